"""The NCCL collectives phase's wall time beside the all-reduce phase alone, on the lab.

    sudo .venv/bin/python benchmarks/nccl_collectives.py --sizes 4 16

For each size it brings up a lab of that many nodes (holding /run/hpcnet-lab.lock while it
is up), then runs, as the suite does, the whole-cluster all-reduce (`Cluster.nccl`) and the
collectives phase (`Cluster.collectives.phase`: all_gather, reduce_scatter, alltoall and
sendrecv in one launch), both with the lab inventory's `benchmarks.nccl.args` (1M..16M,
-n 3 -w 1: the collectives default to the all-reduce's range). Prints a Markdown table:
each phase's wall seconds, their ratio, and each collective's average busbw.

The lab's ranks move real data over TCP in pure Python on a shared host, so its seconds are
CPU-bound and its figures are no eRDMA figures; on a cluster each collective of size S moves
S(n-1)/n per rank (sendrecv S) against the all-reduce's 2S(n-1)/n, so each takes about half
the all-reduce's time at the same busbw, plus one launcher start.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from lab_runs import lab_lock

from pytest_hpcnet.campaigns.cluster import Cluster
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import cluster as lab
from pytest_hpcnet.transport.fanout import Transport

EVERY = ["all_gather", "reduce_scatter", "alltoall", "sendrecv"]


def one_lab(inventory_path: Path) -> tuple[float, float, dict[str, float | None], list[str]]:
    """(all-reduce s, collectives phase s, avg busbw per collective, not-ok reasons)."""
    inventory = load_inventory(inventory_path)
    nccl = inventory.benchmarks.nccl
    collectives = nccl.collectives.model_copy(update={"run": EVERY})
    inventory.benchmarks.nccl = nccl.model_copy(update={"collectives": collectives})
    transport = Transport(inventory)
    try:
        cluster = Cluster(inventory, transport)
        started = time.monotonic()
        result, _ = cluster.nccl()
        allreduce = time.monotonic() - started
        started = time.monotonic()
        done = cluster.collectives.phase()
        phase = time.monotonic() - started
    finally:
        transport.close()
    bad = [f"all_reduce: {result.reason}"] if not result.ok else []
    bad += [f"{k}: {r.result.reason}" for k, r in done.runs.items() if not r.result.ok]
    busbw = {"all_reduce": result.avg_busbw_gbs}
    busbw |= {k: r.result.avg_busbw_gbs for k, r in done.runs.items()}
    return allreduce, phase, busbw, bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 16])
    args = parser.parse_args()
    rows = []
    with lab_lock():
        for size in args.sizes:
            with tempfile.TemporaryDirectory(prefix="hpcnet-collectives-bench-") as tmp:
                root = Path(tmp)
                lab.up(size, 8500, root / "state", root / "lab.yaml")
                try:
                    rows.append((size, *one_lab(root / "lab.yaml")))
                finally:
                    lab.down(root / "state")
    names = ["all_reduce", *EVERY]
    print(
        "| nodes | all-reduce phase s | collectives phase s | ratio | "
        + " | ".join(f"{n} avg busbw GB/s" for n in names)
        + " |"
    )
    print("|---:|---:|---:|---:|" + "---:|" * len(names))
    for size, allreduce, phase, busbw, bad in rows:
        figures = " | ".join(f"{busbw[n]:.4f}" if busbw.get(n) else "?" for n in names)
        print(f"| {size} | {allreduce:.1f} | {phase:.1f} | {phase / allreduce:.2f} | {figures} |")
        for line in bad:
            print(f"  not ok at {size} nodes: {line}", file=sys.stderr)
    print(f"\n`{' '.join(['python', 'benchmarks/nccl_collectives.py', *sys.argv[1:]])}`")


if __name__ == "__main__":
    main()
