"""What the lab's emulated `ib_write_bw` / `ib_write_lat` print, in perftest's own layout:
the help text, the header block, the address lines and the table rows (the protocol and the
faults are in hpcnet_lab_perftest.py). Standard library only.
"""

from __future__ import annotations

import argparse
import math

RULE = "-" * 87


def usage(prog: str, doc: str) -> str:
    """The help text: the first line says it is the lab emulation."""
    return (
        f"{doc.splitlines()[0]}\n"
        f" Usage:\n   {prog}            start a server and wait for connection\n"
        f"   {prog} <host>     connect to server at <host>\n\n Options:\n"
        "  -a, --all  Run sizes from 2 till 2^23 (a short run per size in the lab)\n"
        "  -d, --ib-dev=<dev>  Use IB device <dev> (default first device found)\n"
        "  -D, --duration  Run test for a customized period of seconds\n"
        "  -F, --CPU-freq  Do not show a warning even if cpufreq_ondemand module is loaded\n"
        "  -i, --ib-port=<port>  Use port <port> of IB device (default 1)\n"
        "  -n, --iters=<iters>  Number of exchanges\n"
        "  -p, --port=<port>  Listen on/connect to port <port> (default 18515)\n"
        "  -q, --qp=<num of qp's>  Num of qp's(default 1)\n"
        "  -R, --rdma_cm  Connect QPs with rdma_cm\n"
        "  -s, --size=<size>  Size of message to exchange\n"
        "  -x, --gid-index=<index>  Test uses GID with GID index\n"
        "  --report_gbits  Report Max/Average BW of test in Gbit/sec (instead of MiB/sec)\n"
        "      --use_cuda=<cuda device id> Use CUDA specific device for GPUDirect RDMA testing\n"
    )


def gid(address: str) -> str:
    """An IPv4-mapped RoCE GID the way perftest prints it (decimal bytes)."""
    octets = [int(x) for x in address.split(".")]
    return ":".join(f"{b:02d}" for b in [0] * 10 + [255, 255] + octets)


def header(test: str, args: argparse.Namespace, device: dict, bw: bool) -> str:
    """perftest's header block."""
    cm = "ON" if args.rdma_cm else "OFF"
    lines = [
        RULE,
        f"                    RDMA_Write {test} Test",
        f" Dual-port       : OFF\t\tDevice         : {device['name']}",
        f" Number of qps   : {args.qp if bw else 1}\t\tTransport type : IB",
        f" Connection type : {args.connection}\t\tUsing SRQ      : OFF",
        " PCIe relax order: OFF",
        " ibv_wr* API     : OFF",
        f" TX depth        : {128 if bw else 1}",
    ]
    if bw:
        lines.append(" CQ Moderation   : 1")
    lines += [
        f" Mtu             : {device['mtu']}[B]",
        " Link type       : Ethernet",
        f" GID index       : {args.gid_index}",
        f" Max inline data : {0 if bw else 220}[B]",
        f" rdma_cm QPs     : {cm}",
        f" Data ex. method : {'rdma_cm' if args.rdma_cm else 'Ethernet'}",
        RULE,
    ]
    return "\n".join(lines) + "\n"


def address_lines(local: str, remote: str, qps: int, seed: int) -> str:
    """The `local address:` / `remote address:` lines, one pair per QP."""
    out = []
    for side, addr, base in (("local", local, seed), ("remote", remote, seed ^ 0x5A5A)):
        for q in range(qps):
            qpn, psn = (base + q) & 0xFFFF, (base * 7919 + q * 104729) & 0xFFFFFF
            out.append(
                f" {side} address: LID 0000 QPN {qpn:#06x} PSN {psn:#08x} RKey 0x00{qpn:04x}"
                f" VAddr 0x007f{(base << 12) & 0xFFFFFFFF:08x}\n GID: {gid(addr)}"
            )
    return "\n".join(out) + f"\n{RULE}\n"


def bw_columns(gbits: bool) -> str:
    """The bandwidth table's column line."""
    unit = "Gb/sec" if gbits else "MB/sec"
    return f" #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]\n"


LAT_COLUMNS = (
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
    "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
)


def bw_row(size: int, iters: int, nbytes: int, seconds: float, gbits: bool, dur: bool) -> str:
    """One bandwidth row (peak printed as 0.00 in duration mode, as perftest does)."""
    rate = nbytes / seconds if seconds > 0 else 0.0
    avg = rate * 8 / 1e9 if gbits else rate / 2**20
    peak = 0.0 if dur else avg
    mpps = iters / seconds / 1e6 if seconds > 0 else 0.0
    return f" {size:<10} {iters:<16} {peak:<7.2f}            {avg:<7.2f}\t\t   {mpps:<7.6f}\n"


def lat_row(size: int, samples: list[float]) -> str:
    """One latency row from one-way samples in usec."""
    s = sorted(samples)
    n = len(s)
    avg = sum(s) / n
    stdev = math.sqrt(sum((x - avg) ** 2 for x in s) / n)

    def pct(p: float) -> float:
        return s[min(n - 1, max(0, math.ceil(n * p) - 1))]

    return (
        f" {size:<7} {n:<7}       {s[0]:<7.2f}        {s[-1]:<7.2f}      {s[n // 2]:<7.2f}"
        f"            {avg:<7.2f}        {stdev:<7.2f}           {pct(0.99):<7.2f}"
        f"                       {pct(0.999):<7.2f}\n"
    )
