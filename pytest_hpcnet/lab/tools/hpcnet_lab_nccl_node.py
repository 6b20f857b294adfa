"""hpcnet lab emulation: `all_reduce_perf -g N` in one process on one node (not NCCL).

The single-node all-reduce over a node's emulated GPUs (NVLink, no network): each size's
time is paced from an H200 8-GPU bus bandwidth curve, busbw = PEAK x size / (size + HALF)
(about 384 GB/s at 128 MiB and 476 at 4 GiB, as a published 8 x H100 SXM run with NVLS
shows: tests/fixtures/gpu_load/), slept for real and printed in nccl-tests' layout with one
`Rank` line per GPU. Fault `nccl-node-slow` (a factor, default 4) divides the curve.
Standard library only: it runs on the node with the system python3.
"""

from __future__ import annotations

import os
import time

import hpcnet_lab_gpu as gpu
import hpcnet_lab_node as node
import hpcnet_lab_rdma as lab

PEAK_GBS = 480.0
HALF_BYTES = 32 * 2**20
MAX_SLEEP_S = 2.0
"""Each size sleeps at most this long (the lab's iterations are not all paced in full)."""


def slowdown() -> float:
    value = node.faults().get("nccl-node-slow")
    try:
        return max(1.0, float(value)) if value is not None else 1.0
    except ValueError:
        return 4.0


def run(args, sizes: list[int], header_tail: str, version: str, headers: int) -> int:
    """Print the single-node table for `args.ngpus` GPUs; 0 when all are there."""
    rows = gpu.gpus()[: args.ngpus]
    out = [
        f"# nccl-tests version {version} nccl-headers={headers} nccl-library={headers}",
        "# Collective test starting: all_reduce_perf",
        f"# nThread {args.nthreads} nGpus {args.ngpus} minBytes {args.minbytes} maxBytes "
        f"{args.maxbytes} {header_tail}",
        "#",
        "# Using devices",
    ]
    for r, row in enumerate(rows):
        bus = row["pci.bus_id"][9:11].lower()
        out.append(
            f"#  Rank {r:2d} Group  0 Pid {os.getpid():6d} on {lab.node_name():>10} device "
            f"{r:2d} [0x{bus}] {row['name']}"
        )
    if len(rows) < args.ngpus:
        out.append(f"{lab.node_name()}: Test CUDA failure common.cu:1 'invalid device ordinal'")
        print("\n".join(out), flush=True)
        return 1
    out += [
        "#",
        "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "     (us)  (GB/s)  (GB/s)       ",
    ]
    print("\n".join(out), flush=True)
    n = args.ngpus
    factor = 2 * (n - 1) / n
    slow = slowdown()
    busbws = []
    for size in sizes:
        busbw = PEAK_GBS * size / (size + HALF_BYTES) / slow
        algbw = busbw / factor
        usec = size / (algbw * 1e3)
        time.sleep(min(MAX_SLEEP_S, usec * 1e-6 * (args.iters + args.warmup_iters)))
        cells = f"  {usec:7.1f}  {algbw:6.2f}  {busbw:6.2f}  {0 if args.check else 'N/A':>5}"
        print(
            f"{size:12d}  {size // 4:12d}     float     {args.op}      -1{cells}{cells}", flush=True
        )
        busbws += [busbw, busbw]
    avg = sum(busbws) / len(busbws) if busbws else 0.0
    print(f"# Out of bounds values : 0 OK\n# Avg bus bandwidth    : {avg:.6g} \n#", flush=True)
    print("# Collective test concluded: all_reduce_perf\n#\n", flush=True)
    return 0
