"""hpcnet lab emulation of nccl-tests `all_reduce_perf`: not the real tool (no GPU, no NCCL).

Launched by the real Open MPI `mpirun` (one process per rank; rank and size from
OMPI_COMM_WORLD_RANK/SIZE, else PMI_RANK/SIZE or SLURM_PROCID/NTASKS, else one rank).
Rendezvous: every rank listens on an ephemeral TCP port on its node's lab address and
publishes `address port pid host` as `rank-<r>` in `<lab state>/rendezvous/<job>/`
(`$HPCNET_LAB_RENDEZVOUS` overrides the folder; `<job>` is a hash of mpirun's
OMPI_MCA_orte_hnp_uri, unique per launch), a folder every node sees since the lab
nodes share the host filesystem. Each rank connects to rank r+1 and accepts rank r-1:
a TCP ring between node addresses. For each size from -b to -e (factor -f) it runs a
real ring all-reduce (reduce-scatter then all-gather) of float32 buffers, -w warmup and
-n timed iterations, out-of-place then in-place, and counts wrong values with -c 1.
Rank 0 prints nccl-tests' layout: algbw = size/time, busbw = algbw * 2(n-1)/n.
Lab faults from `lab.json`: `nccl-slow` (this rank stretches each all-reduce by its
factor), `nccl-rail-slow DEV[@FACTOR]` (the same, only where NCCL_IB_HCA leaves that ERI
alone: its rail run), `nccl-net-slow [FACTOR]` (the same, only in a network-only run:
NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1) and `latency` (this rank delays each message
it sends), all user-space emulation.
With NCCL_DEBUG=INFO every rank prints the INFO lines NCCL prints when it picks its
network: `NET/IB : Using [0]erdma_0:1/RoCE [1]erdma_1:1/RoCE [RO]; OOB eth0:<ip><0>` and
`Using network IB` over the node's active devices matching NCCL_IB_HCA, or, with the
`nccl-socket` fault (or no usable device), `NET/IB : No device found.` and `Using network
Socket`; GPUDirect RDMA is always off (no GPU). With `nccl-crash` the node's rank, once the
whole table and its footer are out, prints nccl-tests' `Test NCCL failure` line and dies of
SIGSEGV (a crash at teardown: the table is complete, the run is not). On IB the ring's
bytes are added to the devices' emulated hw counters, split evenly; on Socket they are not.
`-J FILE.json` (nccl-tests 2.17.3+): rank 0 also writes nccl-tests' JSON file (version 3, the
real file's keys) and prints `# Writing JSON output to FILE` (`FILE.0`, ... when it exists).
`-h` prints the real usage text, `-J,--output_file` included.
NCCL_DEBUG_FILE (`%h` host, `%p` pid) takes the INFO lines, one file per process, as NCCL
does. Without it, INFO lines go to stdout and mix with rank 0's table the way a real run's
do under mpirun (rank 0's block-buffered stdout forwarded in chunks): rank 0 writes its first
row up to the op, the other ranks print an INFO line each, and only then the rest of the
row follows, so the table cannot be read whole. The network choice and its INFO
lines are in hpcnet_lab_nccl_net.py, the JSON file in hpcnet_lab_nccl_json.py.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import operator
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time
from array import array
from pathlib import Path

import hpcnet_lab_nccl_collectives as collectives
import hpcnet_lab_nccl_json as nccl_json
import hpcnet_lab_nccl_net as nccl_net
import hpcnet_lab_node as node
import hpcnet_lab_rdma as lab

COMMANDS = (
    "all_reduce_perf",
    "all_gather_perf",
    "reduce_scatter_perf",
    "alltoall_perf",
    "sendrecv_perf",
)
"""The commands this file is installed as (`lab.emulation.lab_tools`)."""

VERSION = "2.19.6"
NCCL_HEADERS = 21903
RENDEZVOUS_WAIT_S = 60.0
IO_TIMEOUT_S = 120.0
PATTERN = 13
"""Rank r's element i is (i + r) % 13: sums stay exact in float32."""
NCCL_SLOW_FACTOR = 10.0
INTERLEAVE_WAIT_S = 0.5
"""How long rank 0 waits, its first row half written, for mpirun to forward the other ranks'
INFO lines (NCCL_DEBUG=INFO on stdout)."""
CRASH_AFTER_S = 1.0
"""`nccl-crash`: the rank waits this long after the run so rank 0's footer is out first."""
_SIZE_RE = re.compile(r"^(\d+)([KMGkmg]?)$")


def parse_size(text: str) -> int:
    """nccl-tests sizes: 8, 1K, 1M, 8G (powers of 1024)."""
    m = _SIZE_RE.match(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"invalid size {text!r}")
    return int(m.group(1)) * 1024 ** " KMG".index(m.group(2).upper() or " ")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="all_reduce_perf", add_help=False, allow_abbrev=False)
    p.add_argument("-t", "--nthreads", type=int, default=1)
    p.add_argument("-g", "--ngpus", type=int, default=1)
    p.add_argument("-b", "--minbytes", type=parse_size, default=32 * 1024 * 1024)
    p.add_argument("-e", "--maxbytes", type=parse_size, default=32 * 1024 * 1024)
    p.add_argument("-i", "--stepbytes", type=parse_size, default=1024 * 1024)
    p.add_argument("-f", "--stepfactor", type=int, default=0)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup_iters", type=int, default=5)
    p.add_argument("-c", "--check", type=int, default=1)
    p.add_argument("-o", "--op", default="sum")
    p.add_argument("-d", "--datatype", default="float")
    p.add_argument("-J", "--output_file", default=None)
    p.add_argument("-h", "--help", action="store_true")
    return p


USAGE = (
    "USAGE: all_reduce_perf \n\t"
    "[-t,--nthreads <num threads>] \n\t"
    "[-g,--ngpus <gpus per thread>] \n\t"
    "[-b,--minbytes <min size in bytes>] \n\t"
    "[-e,--maxbytes <max size in bytes>] \n\t"
    "[-i,--stepbytes <increment size>] \n\t"
    "[-f,--stepfactor <increment factor>] \n\t"
    "[-n,--iters <iteration count>] \n\t"
    "[-w,--warmup_iters <warmup iteration count>] \n\t"
    "[-c,--check <check iteration count>] \n\t"
    "[-o,--op <sum/prod/min/max/avg/mulsum/all>] \n\t"
    "[-d,--datatype <nccltype/all>] \n\t"
    "[-J,--output_file <file> write output to filepath, if accessible. Infer type from suffix "
    "(only json supported presently.)] \n\t"
    "[-h,--help]\n"
)
"""nccl-tests 2.19.6's usage text (src/common.cu), cut to the options emulated here."""


def world() -> tuple[int, int]:
    """(rank, size) from the launcher's environment."""
    for rank_var, size_var in (
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMI_RANK", "PMI_SIZE"),
        ("SLURM_PROCID", "SLURM_NTASKS"),
    ):
        if rank_var in os.environ and size_var in os.environ:
            return int(os.environ[rank_var]), int(os.environ[size_var])
    return 0, 1


def job_dir() -> Path:
    """This launch's rendezvous folder, the same for every rank of one mpirun."""
    root = os.environ.get("HPCNET_LAB_RENDEZVOUS") or str(lab.state_dir() / "rendezvous")
    key = (
        os.environ.get("OMPI_MCA_orte_hnp_uri")  # noqa: SIM112 (Open MPI's own spelling)
        or os.environ.get("PMIX_NAMESPACE")
        or os.environ.get("SLURM_JOB_ID", "") + os.environ.get("SLURM_STEP_ID", "")
        or str(os.getppid())
    )
    return Path(root) / hashlib.sha1(key.encode()).hexdigest()[:16]


class Ring:
    """A rank's two TCP connections: to the next rank and from the previous one."""

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size
        self.moved = [0, 0]  # bytes sent, received
        self.peers: list[list[str]] = []
        self.delay = node.delay_s()
        slow = node.faults().get("nccl-slow")
        try:
            self.slow = max(1.0, float(slow)) if slow else 1.0
        except ValueError:
            self.slow = NCCL_SLOW_FACTOR
        if size == 1:
            return
        self.folder = job_dir()
        self.folder.mkdir(parents=True, exist_ok=True)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind((node.address(), 0))
        listener.listen(4)
        listener.settimeout(RENDEZVOUS_WAIT_S)
        address, port = listener.getsockname()
        mine = self.folder / f"rank-{rank}"
        tmp = mine.with_suffix(".tmp")
        tmp.write_text(f"{address} {port} {os.getpid()} {lab.node_name()}\n")
        tmp.replace(mine)
        wanted = range(size) if rank == 0 else [(rank + 1) % size]
        found = self._wait_for(wanted)
        nxt = found[(rank + 1) % size]
        self.next = socket.create_connection((nxt[0], int(nxt[1])), RENDEZVOUS_WAIT_S)
        self.prev, _ = listener.accept()
        listener.close()
        for sock in (self.next, self.prev):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(IO_TIMEOUT_S)
        if rank == 0:
            self.peers = [found[r] for r in range(size)]

    def _wait_for(self, ranks) -> dict[int, list[str]]:
        deadline = time.monotonic() + RENDEZVOUS_WAIT_S
        found: dict[int, list[str]] = {}
        while time.monotonic() < deadline:
            for r in ranks:
                if r not in found:
                    with contextlib.suppress(OSError):
                        found[r] = (self.folder / f"rank-{r}").read_text().split()
            if len(found) == len(ranks):
                return found
            time.sleep(0.02)
        missing = sorted(set(ranks) - set(found))
        raise RuntimeError(f"rank(s) {missing} did not join within {RENDEZVOUS_WAIT_S:.0f} s")

    def _send(self, data: memoryview) -> None:
        if self.delay:
            time.sleep(self.delay)
        self.next.sendall(data)

    def exchange(self, out: memoryview, into: memoryview) -> None:
        """Send `out` to the next rank while receiving `into` from the previous one."""
        self.moved[0] += len(out)
        self.moved[1] += len(into)
        sender = threading.Thread(target=self._send, args=(out,))
        sender.start()
        got = 0
        while got < len(into):
            n = self.prev.recv_into(into[got:])
            if not n:
                raise RuntimeError("ring peer closed the connection")
            got += n
        sender.join()

    def allreduce(self, buf: array) -> None:
        """In-place ring all-reduce (sum) of a float32 array: reduce-scatter, all-gather."""
        n, r = self.size, self.rank
        if n == 1:
            return
        started = time.perf_counter()
        bounds = [len(buf) * i // n for i in range(n + 1)]
        view = memoryview(buf).cast("B")
        item = buf.itemsize

        def chunk(i: int) -> tuple[int, int]:
            return bounds[i % n], bounds[i % n + 1]

        for step in range(n - 1):
            (sa, sb), (ra, rb) = chunk(r - step), chunk(r - step - 1)
            incoming = array("f", bytes((rb - ra) * item))
            self.exchange(view[sa * item : sb * item], memoryview(incoming).cast("B"))
            buf[ra:rb] = array("f", map(operator.add, buf[ra:rb], incoming))
        for step in range(n - 1):
            (sa, sb), (ra, rb) = chunk(r + 1 - step), chunk(r - step)
            self.exchange(view[sa * item : sb * item], view[ra * item : rb * item])
        if self.slow > 1.0:  # `nccl-slow`: this rank takes `slow` times as long
            time.sleep((self.slow - 1.0) * (time.perf_counter() - started))

    def total(self, value: int) -> int:
        """The sum of an integer over all ranks (ring pass), known to every rank."""
        acc = value
        carry = value
        for _ in range(self.size - 1):
            incoming = bytearray(8)
            outgoing = carry.to_bytes(8, "little", signed=True)
            self.exchange(memoryview(outgoing), memoryview(incoming))
            carry = int.from_bytes(incoming, "little", signed=True)
            acc += carry
        return acc

    def close(self) -> None:
        if self.size == 1:
            return
        self.total(0)  # barrier: nobody leaves while a peer still reads
        self.next.close()
        self.prev.close()
        if self.rank == 0:
            shutil.rmtree(self.folder, ignore_errors=True)


def sizes(args: argparse.Namespace) -> list[int]:
    """-b .. -e by factor -f (or increment -i), rounded down to whole floats per rank."""
    out, size = [], args.minbytes
    while size <= args.maxbytes and len(out) < 64:
        out.append(size - size % 4 or 4)
        size = size * args.stepfactor if args.stepfactor > 1 else size + args.stepbytes
    return out


def pattern(rank: int, count: int) -> array:
    block = array("f", [float((i + rank) % PATTERN) for i in range(PATTERN)])
    return (block * (count // PATTERN + 1))[:count]


def expected(nranks: int, count: int) -> array:
    sums = [sum((i + r) % PATTERN for r in range(nranks)) for i in range(PATTERN)]
    block = array("f", [float(x) for x in sums])
    return (block * (count // PATTERN + 1))[:count]


def run_one(ring: Ring, count: int, args: argparse.Namespace, in_place: bool) -> tuple[float, int]:
    """(average usec, wrong values) of one size, out-of-place or in-place."""
    source = pattern(ring.rank, count)
    work = array("f", source)
    for _ in range(args.warmup_iters):
        work = array("f", source)
        ring.allreduce(work)
    ring.total(0)
    started = time.perf_counter()
    for _ in range(args.iters):
        if not in_place:
            work = array("f", source)  # out-of-place: fresh receive buffer from sendbuff
        else:
            work[:] = source  # in-place: the send buffer is overwritten by the result
        ring.allreduce(work)
    usec = (time.perf_counter() - started) * 1e6 / max(1, args.iters)
    wrong = 0
    if args.check:
        want = expected(ring.size, count)
        if work != want:
            wrong = sum(1 for a, b in zip(work, want, strict=True) if a != b)
    return usec, ring.total(wrong)


def header(args: argparse.Namespace, ring: Ring, binary: str = "all_reduce_perf") -> str:
    step = f"{args.stepfactor}(factor)" if args.stepfactor > 1 else f"{args.stepbytes}(bytes)"
    lines = [
        f"# nccl-tests version {VERSION} nccl-headers={NCCL_HEADERS} nccl-library={NCCL_HEADERS}",
        f"# Collective test starting: {binary}",
        f"# nThread {args.nthreads} nGpus {args.ngpus} minBytes {args.minbytes} maxBytes "
        f"{args.maxbytes} step: {step} warmup iters: {args.warmup_iters} iters: {args.iters} "
        f"agg iters: 1 validation: {args.check} graph: 0",
        "#",
        "# Using devices",
    ]
    peers = ring.peers or [["", "", str(os.getpid()), lab.node_name()]]
    for r, (_, _, pid, host) in enumerate(peers):
        lines.append(
            f"#  Rank {r:2d} Group  0 Pid {int(pid):6d} on {host:>10} device  0 [0x00] lab-emulated"
        )
    lines += [
        "#",
        "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "     (us)  (GB/s)  (GB/s)       ",
    ]
    return "\n".join(lines) + "\n"


def program() -> str:
    """The nccl-tests binary this process runs as (argv[0]: all_reduce_perf, alltoall_perf...)."""
    name = os.path.basename(sys.argv[0]).removesuffix(".py")
    return name if name.endswith("_perf") else "all_reduce_perf"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    binary = program()
    args, extra = parser().parse_known_args(argv)
    if args.help or extra:
        if extra:
            sys.stdout.write(f"invalid option '{extra[0]}'\n")
        sys.stdout.write(USAGE)
        return 0 if args.help else 1
    rank, nranks = world()
    if (
        nranks == 1 and args.ngpus > 1 and binary == "all_reduce_perf"
    ):  # one process, all of a node's GPUs: NVLink, no network
        import hpcnet_lab_nccl_node

        step = f"{args.stepfactor}(factor)" if args.stepfactor > 1 else f"{args.stepbytes}(bytes)"
        tail = f"step: {step} warmup iters: {args.warmup_iters} iters: {args.iters} agg iters: 1"
        tail += f" validation: {args.check} graph: 0"
        return hpcnet_lab_nccl_node.run(args, sizes(args), tail, VERSION, NCCL_HEADERS)
    report = nccl_json.JsonReport(args.output_file, rank, argv, NCCL_HEADERS)
    info = nccl_net.InfoLog()
    network, devices = nccl_net.nccl_network(binary)
    nccl_net.log_network(info, network, devices)
    try:
        ring = Ring(rank, nranks)
    except (OSError, RuntimeError) as exc:
        sys.stdout.write(f"{lab.node_name()}: Test NCCL failure {binary}: {exc}\n")
        report.close(0, None, f"Test NCCL failure {binary}: {exc}")
        return 1
    report.config(args, ring)
    # `nccl-rail-slow`: only on that ERI alone; `nccl-net-slow`: only with P2P and SHM off
    ring.slow *= nccl_net.rail_slow(devices) * nccl_net.network_only_slow()
    if binary != "all_reduce_perf":
        return run_collective(binary, args, ring, network, devices)
    if nranks > 1:
        via = "NET/IB/0" if network == "IB" else "NET/Socket/0"
        prev, nxt = (rank - 1) % nranks, (rank + 1) % nranks
        info(f"Channel 00/0 : {prev}[0] -> {rank}[0] [receive] via {via}")
        info(f"Channel 00/0 : {rank}[0] -> {nxt}[0] [send] via {via}")
    out = sys.stdout
    if rank == 0:
        out.write(header(args, ring))
        out.flush()
    factor = 2 * (nranks - 1) / nranks
    busbws: list[float] = []
    wrong_total = 0
    try:
        for size in sizes(args):
            count = size // 4
            row = f"{size:12d}  {count:12d}     float     {args.op}      -1"
            measured = []
            for in_place in (False, True):
                usec, wrong = run_one(ring, count, args, in_place)
                algbw = size / usec / 1e3 if usec > 0 else 0.0
                busbw = algbw * factor
                busbws.append(busbw)
                wrong_total += wrong
                measured.append((usec, algbw, busbw, wrong))
                shown = str(wrong) if args.check else "N/A"
                row += f"  {usec:7.1f}  {algbw:6.2f}  {busbw:6.2f}  {shown:>5}"
            if size == sizes(args)[0] and info.to_stdout and nranks > 1:
                interleave(ring, info, row, out)
            elif rank == 0:
                out.write(row + "\n")
                out.flush()
            report.row(size, args.op, args.check, measured)
        ring.close()
    except (OSError, RuntimeError) as exc:
        sys.stdout.write(f"{lab.node_name()}: Test NCCL failure all_reduce_perf: {exc}\n")
        report.close(wrong_total, None, f"Test NCCL failure all_reduce_perf: {exc}")
        return 1
    finally:
        for d in devices:
            lab.count_traffic(
                d["name"], ring.moved[0] // len(devices), ring.moved[1] // len(devices)
            )
    if rank == 0:
        avg = sum(busbws) / len(busbws) if busbws else 0.0
        verdict = "OK" if not wrong_total else "FAILED"
        out.write(f"# Out of bounds values : {wrong_total} {verdict}\n")
        out.write(f"# Avg bus bandwidth    : {avg:.6g} \n#\n")
        out.write("# Collective test concluded: all_reduce_perf\n#\n\n")
        out.flush()
        report.close(wrong_total, avg)
    if "nccl-crash" in node.faults():
        crash()
    return 1 if wrong_total else 0


def run_collective(
    binary: str, args: argparse.Namespace, ring: Ring, network: str, devices: list[dict]
) -> int:
    """all_gather_perf, reduce_scatter_perf, alltoall_perf or sendrecv_perf: each size over
    the ring, rank 0 printing the collective's own table (hpcnet_lab_nccl_collectives)."""
    key = collectives.key_of(binary)
    n, out = ring.size, sys.stdout
    if ring.rank == 0:
        out.write(header(args, ring, binary))
        out.flush()
    busbws: list[float] = []
    wrong_total, shared = 0, 0
    try:
        for size in dict.fromkeys(collectives.round_size(s, n) for s in sizes(args)):
            measured = []
            for in_place in (False, True):
                usec, wrong = collectives.run_size(ring, key, size, args, in_place)
                algbw = size / usec / 1e3 if usec > 0 else 0.0
                busbw = algbw * collectives.bus_factor(key, n)
                busbws.append(busbw)
                wrong_total += wrong
                measured.append((usec, algbw, busbw, wrong))
            shared += collectives.traffic_share(key, size, n) * 2 * (args.iters + args.warmup_iters)
            if ring.rank == 0:
                out.write(collectives.row(key, size, n, measured, args.check) + "\n")
                out.flush()
        ring.close()
    except (OSError, RuntimeError) as exc:
        out.write(f"{lab.node_name()}: Test NCCL failure {binary}: {exc}\n")
        return 1
    finally:
        if network == "IB" and n > 1:  # the collective's share of the traffic, not the relay's
            for d in devices:
                lab.count_traffic(d["name"], shared // len(devices), shared // len(devices))
    if ring.rank == 0:
        avg = sum(busbws) / len(busbws) if busbws else 0.0
        verdict = "OK" if not wrong_total else "FAILED"
        out.write(f"# Out of bounds values : {wrong_total} {verdict}\n")
        out.write(f"# Avg bus bandwidth    : {avg:.6g} \n#\n")
        out.write(f"# Collective test concluded: {binary}\n#\n\n")
        out.flush()
    return 1 if wrong_total else 0


def interleave(ring: Ring, info: nccl_net.InfoLog, row: str, out) -> None:
    """Rank 0's row cut after its op by the other ranks' INFO lines (every rank calls this)."""
    head = row.index(" -1") if " -1" in row else len(row) // 2
    if ring.rank == 0:
        out.write(row[:head])
        out.flush()
    ring.total(0)  # rank 0's half row is out
    if ring.rank != 0:
        info(f"comm 0x{ring.rank:04x} rank {ring.rank} nRanks {ring.size} - Init COMPLETE")
        sys.stdout.flush()
    ring.total(0)  # every other rank's line is out
    if ring.rank == 0:
        time.sleep(INTERLEAVE_WAIT_S)  # mpirun forwards them before the rest of the row
        out.write(row[head:] + "\n")
        out.flush()


def crash() -> None:
    """Die as a rank that segfaults in teardown: nccl-tests' failure line, then SIGSEGV."""
    time.sleep(CRASH_AFTER_S)
    sys.stdout.write(
        f"{lab.node_name()}: Test NCCL failure common.cu:1279 'unhandled system error "
        "(run with NCCL_DEBUG=INFO for details) / '\n"
    )
    sys.stdout.flush()
    signal.signal(signal.SIGSEGV, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGSEGV)


if __name__ == "__main__":
    sys.exit(main())
