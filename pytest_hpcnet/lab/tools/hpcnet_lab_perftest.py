"""hpcnet lab emulation of perftest `ib_write_bw` / `ib_write_lat`: not the real tools.

They measure the lab's real link with TCP instead of RDMA writes, and print perftest's
own layout (header block, address lines, table) so perftest parsers read them. The
server (no target) listens on TCP `-p` (default 18515), serves exactly one client run,
prints its side and exits (or gives up after SERVER_WAIT_S without a client). The
client connects, measures and prints. `-d`/`-i` are checked against the node's emulated
eRDMA devices and print perftest's own errors. Lab faults read from `lab.json`:
`rdma-slow` caps this node's perftest streams (user-space pacing), `eri-slow` those of one
device (`erdma_1`, or `erdma_1@200mbit`), `latency` delays each message this node sends
(user-space; the lab kernel has no netem). The bytes moved are added to the device's
emulated hw counters (`hw_tx_bytes_cnt` on the client, `hw_rx_bytes_cnt` on the server).
`--use_cuda=<gpu>` (a CUDA-built perftest's GPUDirect option) is taken for one of the
node's emulated GPUs as `nvidia-smi` lists them (`gpu-missing` leaves seven) and prints the
CUDA device lines; the bytes still come from host memory.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
import threading
import time

import hpcnet_lab_gpu as gpu
import hpcnet_lab_node as node
import hpcnet_lab_perftest_print as printed
import hpcnet_lab_rdma as lab

DEFAULT_PORT = 18515
SERVER_WAIT_S = 120.0
CONNECT_TIMEOUT_S = 5.0
SWEEP_STEP_S = 0.15
"""`-a`: each size runs at most this long (perftest's 5000/1000 iterations otherwise)."""
SWEEP_MAX_EXP = 23
RDMA_SLOW_BPS = 500e6
LAT_BATCH = 100
"""Latency exchanges per control message (`-a` stops a size between batches)."""
CHUNK = 1 << 20
PORT_STATE_NAMES = {"DOWN": "Down", "INIT": "Init", "ARMED": "Armed", "ACTIVE": "Active"}
BANNER = (
    "\n************************************\n"
    "* Waiting for client to connect... *\n"
    "************************************\n"
)


class ToolError(Exception):
    """A perftest failure: the message is what the real tool prints on stderr."""


def parser(prog: str) -> argparse.ArgumentParser:
    """perftest's options that the lab emulation honours (others are refused)."""
    p = argparse.ArgumentParser(prog=prog, add_help=False, allow_abbrev=False)
    p.add_argument("target", nargs="?")
    p.add_argument("-d", "--ib-dev")
    p.add_argument("-i", "--ib-port", type=int, default=1)
    p.add_argument("-x", "--gid-index", type=int, default=0)
    p.add_argument("-p", "--port", type=int, default=DEFAULT_PORT)
    p.add_argument("-s", "--size", type=int)
    p.add_argument("-a", "--all", action="store_true")
    p.add_argument("-q", "--qp", type=int, default=1)
    p.add_argument("-D", "--duration", type=int)
    p.add_argument("-n", "--iters", type=int)
    p.add_argument("-m", "--mtu", type=int)
    p.add_argument("-c", "--connection", default="RC")
    p.add_argument("-F", "--CPU-freq", action="store_true")
    p.add_argument("-R", "--rdma_cm", action="store_true")
    p.add_argument("--report_gbits", action="store_true")
    p.add_argument("--use_cuda", type=int)
    p.add_argument("-h", "--help", action="store_true")
    return p


def check_device(args: argparse.Namespace) -> dict:
    """The device and port the run uses, or perftest's own error text."""
    devices = lab.load_devices()
    if not devices:
        raise ToolError(
            " Did not detect devices \n If device exists, check if driver is up\n"
            " Unable to find the Infiniband/RoCE device\n"
        )
    if args.ib_dev:
        device = next((d for d in devices if d["name"] == args.ib_dev), None)
        if device is None:
            raise ToolError(
                f"IB device {args.ib_dev} not found\n Unable to find the Infiniband/RoCE device\n"
            )
    else:
        device = devices[0]
    ports = {int(p.get("port", 1)): p for p in device.get("ports", [])}
    port = ports.get(args.ib_port)
    if port is None:
        raise ToolError(f" Invalid port number {args.ib_port}\n Couldn't set the link layer\n")
    state = port.get("state", "ACTIVE")
    if state != "ACTIVE":
        name = PORT_STATE_NAMES.get(state, state.title())
        raise ToolError(
            f" Port number {args.ib_port} state is {name}\n Couldn't set the link layer\n"
            " Couldn't get context for the device\n"
        )
    if args.use_cuda is not None:
        check_gpu(args.use_cuda)
    mapped = [g[7:] for g in port.get("gids", []) if g.startswith("::ffff:")]
    address = mapped[0] if mapped else node.address()  # the device's own ENI address
    return {"name": device["name"], "mtu": int(port.get("active_mtu", 1024)), "address": address}


def check_gpu(index: int) -> None:
    """`--use_cuda=N`: CUDA device N among the node's emulated GPUs (renumbered as the
    emulated nvidia-smi lists them), else perftest's CUDA error."""
    present = len(gpu.gpus())
    if not 0 <= index < present:
        raise ToolError(f"No CUDA device {index} (found {present})\n Couldn't init CUDA\n")
    sys.stdout.write(
        f"initializing CUDA\nListing all CUDA devices in system:\nPicking device No. {index}\n"
    )


class Channel:
    """A TCP connection carrying JSON lines and raw bytes."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send_json(self, obj: dict) -> None:
        self.sock.sendall(json.dumps(obj).encode() + b"\n")

    def recv_json(self) -> dict:
        while b"\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise ToolError("Failed to exchange data between server and clients\n")
            self.buf += data
        line, _, rest = bytes(self.buf).partition(b"\n")
        self.buf = bytearray(rest)
        return json.loads(line)

    def recv_exact(self, view: memoryview) -> None:
        got = min(len(self.buf), len(view))
        if got:
            view[:got] = self.buf[:got]
            del self.buf[:got]
        while got < len(view):
            n = self.sock.recv_into(view[got:])
            if not n:
                raise ToolError("Failed to exchange data between server and clients\n")
            got += n


def sizes_of(args: argparse.Namespace, bw: bool) -> list[int]:
    """The message sizes of the run: -a sweeps 2..2^23, else -s (65536 / 2 by default)."""
    if args.all:
        return [2**e for e in range(1, SWEEP_MAX_EXP + 1)]
    return [args.size or (65536 if bw else 2)]


def slow_bps(device: str | None = None) -> float | None:
    """This node's `rdma-slow` (or `device`'s `eri-slow`) cap in bits/s, None when none."""
    found = node.faults()
    value = found.get("rdma-slow")
    if value is None and device and "eri-slow" in found:
        name, _, rate = found["eri-slow"].partition("@")
        if name == device:
            return node.rate_bps(rate, RDMA_SLOW_BPS)
    return None if value is None else node.rate_bps(value, RDMA_SLOW_BPS)


# --------------------------------------------------------------------------- server


def _drain(sock: socket.socket, counts: list[int], index: int, bps: float | None) -> None:
    pacer = node.Pacer(bps)
    buf = bytearray(CHUNK)
    with sock:
        while True:
            try:
                n = sock.recv_into(buf)
            except OSError:
                return
            if not n:
                return
            counts[index] += n
            pacer.account(n)


def serve(args: argparse.Namespace, bw: bool, device: dict, out) -> int:
    """Wait for one client, serve its run, print the server side."""
    out.write(BANNER)
    out.flush()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("0.0.0.0", args.port))
    except OSError as exc:
        raise ToolError(f" Couldn't bind to port {args.port}: {exc.strerror}\n") from None
    listener.listen(64)
    listener.settimeout(SERVER_WAIT_S)
    with listener:
        try:
            conn, peer = listener.accept()
        except TimeoutError:
            raise ToolError(
                f" Timed out after {SERVER_WAIT_S:.0f} s waiting for a client\n"
                " Unable to open file descriptor for socket connection\n"
            ) from None
        ch = Channel(conn)
        hello = ch.recv_json()
        if hello.get("tool") != ("bw" if bw else "lat"):
            ch.send_json({"ok": False})
            raise ToolError(" Failed to exchange data between server and clients\n")
        qps = int(hello.get("qps", 1)) if bw else 1
        ch.send_json({"ok": True, "addr": device["address"], "device": device["name"]})
        test = "BW" if bw else "Latency"
        args.qp = qps
        out.write(printed.header(test, args, device, bw))
        out.write(printed.address_lines(device["address"], peer[0], qps, os.getpid()))
        out.write(printed.bw_columns(args.report_gbits) if bw else printed.LAT_COLUMNS)
        out.flush()
        if bw:
            received = _serve_bw(listener, ch, qps, out, device["name"])
            lab.count_traffic(device["name"], rx=received, mtu=device["mtu"])
        else:
            _serve_lat(ch, out)
        out.write(printed.RULE + "\n")
        out.flush()
    return 0


def _serve_bw(listener: socket.socket, ch: Channel, qps: int, out, device: str) -> int:
    counts = [0] * qps
    threads = []
    bps = slow_bps(device)
    for i in range(qps):
        data, _ = listener.accept()
        t = threading.Thread(target=_drain, args=(data, counts, i, bps / qps if bps else None))
        t.daemon = True
        t.start()
        threads.append(t)
    while True:
        msg = ch.recv_json()
        if "sent" in msg:
            deadline = time.monotonic() + SERVER_WAIT_S
            while sum(counts) < msg["sent"] and time.monotonic() < deadline:
                time.sleep(0.001)
            ch.send_json({"received": sum(counts)})
        elif "row" in msg:
            out.write(msg["row"])
            out.flush()
        elif msg.get("done"):
            break
    for t in threads:
        t.join(5)
    return sum(counts)


def _serve_lat(ch: Channel, out) -> None:
    delay = node.delay_s()
    while True:
        msg = ch.recv_json()
        if msg.get("done"):
            return
        if "row" in msg:
            out.write(msg["row"])
            out.flush()
            continue
        size, iters = int(msg["size"]), int(msg["iters"])
        buf = memoryview(bytearray(size))
        for _ in range(iters):
            ch.recv_exact(buf)
            if delay:
                time.sleep(delay)
            ch.sock.sendall(buf)


# --------------------------------------------------------------------------- client


def connect(target: str, port: int) -> socket.socket:
    """Connect to the server, or perftest's error."""
    try:
        return socket.create_connection((target, port), timeout=CONNECT_TIMEOUT_S)
    except OSError:
        raise ToolError(
            f"Couldn't connect to {target}:{port}\n"
            "Unable to open file descriptor for socket connection"
            " Unable to init the socket connection\n"
        ) from None


def _stream(sock: socket.socket, size: int, stop: dict, sent: list[int], i: int, bps) -> None:
    payload = memoryview(bytes(size))
    pacer = node.Pacer(bps)
    count = 0
    while count < stop["iters"] and time.perf_counter() < stop["until"]:
        sock.sendall(payload)
        count += 1
        pacer.account(size)
    sent[i] = count


def run_client(args: argparse.Namespace, bw: bool, device: dict, out) -> int:
    """Connect, measure, print the client side."""
    sock = connect(args.target, args.port)
    sock.settimeout(SERVER_WAIT_S)
    ch = Channel(sock)
    qps = max(1, args.qp) if bw else 1
    ch.send_json({"tool": "bw" if bw else "lat", "qps": qps})
    hello = ch.recv_json()
    if not hello.get("ok"):
        raise ToolError(" Failed to exchange data between server and clients\n")
    args.qp = qps
    out.write(printed.header("BW" if bw else "Latency", args, device, bw))
    out.write(
        printed.address_lines(device["address"], hello.get("addr", args.target), qps, os.getpid())
    )
    out.write(printed.bw_columns(args.report_gbits) if bw else printed.LAT_COLUMNS)
    out.flush()
    if bw:
        _client_bw(args, ch, qps, out, device)
    else:
        _client_lat(args, ch, out)
    ch.send_json({"done": True})
    out.write(printed.RULE + "\n")
    out.flush()
    sock.close()
    return 0


def _client_bw(args: argparse.Namespace, ch: Channel, qps: int, out, device: dict) -> None:
    streams = [
        socket.create_connection((args.target, args.port), CONNECT_TIMEOUT_S) for _ in range(qps)
    ]
    bps = slow_bps(device["name"])
    delay = node.delay_s()
    duration = args.duration is not None and not args.all
    try:
        for size in sizes_of(args, True):
            if delay:
                time.sleep(delay)
            if duration:
                stop = {"iters": math.inf, "until": time.perf_counter() + args.duration}
            elif args.all:
                stop = {"iters": args.iters or 5000, "until": time.perf_counter() + SWEEP_STEP_S}
            else:
                stop = {"iters": args.iters or 5000, "until": time.perf_counter() + SERVER_WAIT_S}
            sent = [0] * qps
            started = time.perf_counter()
            threads = [
                threading.Thread(
                    target=_stream, args=(s, size, stop, sent, i, bps / qps if bps else None)
                )
                for i, s in enumerate(streams)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            ch.send_json({"sent": sum(sent) * size})
            ch.recv_json()
            seconds = time.perf_counter() - started
            lab.count_traffic(device["name"], tx=sum(sent) * size, mtu=device["mtu"])
            row = printed.bw_row(
                size, sum(sent), sum(sent) * size, seconds, args.report_gbits, duration
            )
            out.write(row)
            out.flush()
            ch.send_json({"row": row})
    finally:
        for s in streams:
            s.close()


def _client_lat(args: argparse.Namespace, ch: Channel, out) -> None:
    delay = node.delay_s()
    for size in sizes_of(args, False):
        iters = args.iters or 1000
        payload = memoryview(bytearray(size))
        back = memoryview(bytearray(size))
        samples: list[float] = []
        budget = time.perf_counter() + SWEEP_STEP_S
        while len(samples) < iters and not (args.all and time.perf_counter() > budget):
            batch = min(LAT_BATCH, iters - len(samples))
            ch.send_json({"size": size, "iters": batch})
            for _ in range(batch):
                t0 = time.perf_counter()
                if delay:
                    time.sleep(delay)
                ch.sock.sendall(payload)
                ch.recv_exact(back)
                samples.append((time.perf_counter() - t0) * 1e6 / 2)
        row = printed.lat_row(size, samples)
        out.write(row)
        out.flush()
        ch.send_json({"row": row})


def main(prog: str, doc: str, bw: bool, argv: list[str] | None = None) -> int:
    """Run as `ib_write_bw` (bw) or `ib_write_lat`; returns the exit status."""
    p = parser(prog)
    args, extra = p.parse_known_args(argv)
    if args.help:
        sys.stdout.write(printed.usage(prog, doc))
        return 0
    if extra:
        sys.stderr.write(f"{prog}: unrecognized option '{extra[0]}'\n{printed.usage(prog, doc)}")
        return 1
    try:
        device = check_device(args)
        if args.target:
            return run_client(args, bw, device, sys.stdout)
        return serve(args, bw, device, sys.stdout)
    except ToolError as exc:
        sys.stdout.flush()
        sys.stderr.write(str(exc))
        return 1
    except (OSError, ValueError) as exc:
        sys.stdout.flush()
        sys.stderr.write(f" Failed to exchange data between server and clients ({exc})\n")
        return 1
