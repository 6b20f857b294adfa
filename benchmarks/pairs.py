"""Perftest stage wall time on 2, 8 and 32 lab nodes: rounds of disjoint pairs run at once.

    python benchmarks/pairs.py --sizes 2 8 32

For each size: bring up a lab, gather facts, then time `Cluster.perftest("ib_write_bw")`
(the default schedule: two rounds of perfect matchings, each round's pairs concurrently,
servers started, clients run, servers stopped). Target: 32 nodes within 2.5x of 2 nodes.
Needs root (the lab). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import fcntl
import time
from pathlib import Path

from pytest_hpcnet.campaigns.cluster import Cluster
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import cluster as lab
from pytest_hpcnet.transport.fanout import Transport


def measure(inventory: Path) -> tuple[float, int, int, float]:
    """(wall seconds, rounds, pairs, slowest pair Gbit/s) of one perftest campaign."""
    inv = load_inventory(inventory)
    cluster = Cluster(inv, Transport(inv))
    try:
        cluster.gather_facts()
        t0 = time.monotonic()
        campaign = cluster.perftest("ib_write_bw")
        wall = time.monotonic() - t0
    finally:
        cluster.transport.close()
    errors = [run.error for run in campaign.runs.values() if run.error]
    if errors:
        raise SystemExit(f"perftest failed on a healthy lab: {errors[0]}")
    rounds = len({run.round for run in campaign.runs.values()})
    slowest = min(run.value for run in campaign.runs.values())
    return wall, rounds, len(campaign.runs), slowest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 8, 32])
    parser.add_argument("--state-dir", type=Path, default=Path("/run/hpcnet-bench"))
    args = parser.parse_args()
    rows = []
    with open("/run/hpcnet-lab.lock", "w") as lock:  # one lab per host: take turns with tests
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            for size in args.sizes:
                inventory = args.state_dir / "lab.yaml"
                lab.up(size, 8500, args.state_dir, inventory)
                rows.append((size, *measure(inventory)))
        finally:
            lab.down(args.state_dir)
    base = rows[0][1]
    print("| nodes | rounds | pairs | perftest stage wall s | vs smallest | slowest pair Gbit/s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size, wall, rounds, pairs, slowest in rows:
        print(f"| {size} | {rounds} | {pairs} | {wall:.1f} | {wall / base:.2f}x | {slowest:.1f} |")


if __name__ == "__main__":
    main()
