"""Fan-out benchmark on the lab: this plugin's transport beside plain OpenSSH + xargs -P.

    python benchmarks/fanout.py --sizes 4 16 64 --repeat 3 [--static]

For each size it brings up a lab of that many nodes, then, side by side in one run:
- `transport`: this plugin's Transport gathering every node's facts (the one-round-trip
  facts script) in a fresh process: wall time, controller CPU seconds per node,
  SSH connections opened per node, peak RSS;
- `openssh`: the same script through `ssh` with `xargs -P 64` (the floor).
- with `--static`: the whole `pytest -m static --inventory ...` run (facts, pair probes, reports,
  certificate) in a fresh process: wall time and its CPU seconds per node.
Medians of `--repeat` runs. Needs root (the lab). Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_hpcnet.campaigns.fact_sections import facts_command
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import cluster as lab

ROOT = Path(__file__).resolve().parents[1]


def worker(inventory: str) -> None:
    """Measure one fresh session of the transport; print one JSON line."""
    from pytest_hpcnet.transport.fanout import Transport

    inv = load_inventory(inventory)
    cpu0 = time.process_time()
    t0 = time.monotonic()
    transport = Transport(inv)
    results = transport.run_on_all(lambda node: facts_command(node, inv.expect))
    wall = time.monotonic() - t0
    cpu = time.process_time() - cpu0
    again = transport.run_on_all("true")  # untimed: a second fan-out must reuse the connections
    transport.close()
    opened = transport.connections_opened()
    print(
        json.dumps(
            {
                "wall_s": wall,
                "cpu_per_node_ms": 1000 * cpu / len(inv.nodes),
                "connections_per_node": sorted(set(opened.values())),
                "failures": [r.failure for r in [*results.values(), *again.values()] if not r.ok],
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def measure_transport(inventory: str) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", inventory],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_openssh(inventory: str, parallel: int = 64) -> dict:
    """The same facts script through OpenSSH, one ssh process per node, xargs -P."""
    inv = load_inventory(inventory)
    script = facts_command(inv.nodes[0], inv.expect)
    with tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False) as fh:
        fh.write("\n".join(n.host for n in inv.nodes) + "\n")
        hosts = fh.name
    ssh = (
        f"ssh -q -i {shlex.quote(inv.ssh.identity_file)} -o BatchMode=yes "
        f"-o StrictHostKeyChecking=yes -o UserKnownHostsFile={shlex.quote(inv.ssh.known_hosts)} "
        f"-l root {{}} {shlex.quote(script)} >/dev/null"
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(f"xargs -P {parallel} -I{{}} {ssh} < {hosts}", shell=True, check=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    os.unlink(hosts)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_per_node_ms": 1000 * cpu / len(inv.nodes)}


def measure_static_suite(inventory: str, reports: Path) -> dict:
    """`pytest -m static --inventory ...` as a user runs it: wall time, the run's CPU per node."""
    inv = load_inventory(inventory)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "static",
            "-q",
            "-p",
            "no:cacheprovider",
            "--inventory",
            inventory,
            "--reports-dir",
            str(reports),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = [ln for ln in proc.stdout.splitlines() if ln.startswith("checks: ")]
    if proc.returncode not in (0, 1) or not summary:
        raise SystemExit(f"static suite did not run: {proc.stdout.strip().splitlines()[-3:]}")
    return {
        "wall_s": wall,
        "cpu_per_node_ms": 1000 * cpu / len(inv.nodes),
        "peak_rss_mb": after.ru_maxrss / 1024,
        "checks": summary[-1].removeprefix("checks: "),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 16, 64])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--state-dir", type=Path, default=Path("/run/hpcnet-bench"))
    parser.add_argument("--static", action="store_true", help="also time pytest -m static")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return
    with open("/run/hpcnet-lab.lock", "w") as lock:  # one lab per host: take turns with tests
        fcntl.flock(lock, fcntl.LOCK_EX)
        measure_all(args)


def measure_all(args: argparse.Namespace) -> None:
    """Every size, side by side; prints the tables."""
    inventory = str(args.state_dir / "lab.yaml")
    rows, static_rows = [], []
    try:
        for size in args.sizes:
            lab.up(size, 8500, args.state_dir, Path(inventory))
            measure_openssh(inventory)  # warm caches once, not counted
            ours = [measure_transport(inventory) for _ in range(args.repeat)]
            floor = [measure_openssh(inventory) for _ in range(args.repeat)]
            failures = [f for run in ours for f in run["failures"]]
            if failures:
                raise SystemExit(f"fan-out failed on the lab: {failures[0]}")
            wall = statistics.median(r["wall_s"] for r in ours)
            ssh_wall = statistics.median(r["wall_s"] for r in floor)
            rows.append(
                (
                    size,
                    wall,
                    statistics.median(r["cpu_per_node_ms"] for r in ours),
                    ",".join(str(c) for c in ours[0]["connections_per_node"]),
                    max(r["peak_rss_mb"] for r in ours),
                    ssh_wall,
                    statistics.median(r["cpu_per_node_ms"] for r in floor),
                    wall / ssh_wall,
                )
            )
            if args.static:
                runs = [
                    measure_static_suite(inventory, args.state_dir / "reports")
                    for _ in range(args.repeat)
                ]
                swall = statistics.median(r["wall_s"] for r in runs)
                static_rows.append(
                    (
                        size,
                        swall,
                        statistics.median(r["cpu_per_node_ms"] for r in runs),
                        max(r["peak_rss_mb"] for r in runs),
                        ssh_wall,
                        swall / ssh_wall,
                        runs[-1]["checks"],
                    )
                )
    finally:
        lab.down(args.state_dir)
        print_fanout(rows)
        print_static(static_rows)


def print_fanout(rows: list) -> None:
    print(
        "| nodes | hpcnet wall s | hpcnet CPU ms/node | connections/node | peak RSS MB "
        "| OpenSSH+xargs wall s | OpenSSH CPU ms/node | hpcnet / OpenSSH |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, wall, cpu, conns, rss, swall, scpu, ratio in rows:
        print(
            f"| {size} | {wall:.2f} | {cpu:.1f} | {conns} | {rss:.0f} | {swall:.2f} "
            f"| {scpu:.1f} | {ratio:.2f}x |"
        )


def print_static(rows: list) -> None:
    if not rows:
        return
    print()
    print(
        "| nodes | pytest -m static wall s | CPU ms/node | peak RSS MB "
        "| facts via OpenSSH+xargs wall s | static / floor | checks (last run) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---|")
    for size, wall, cpu, rss, floor, ratio, checks in rows:
        print(
            f"| {size} | {wall:.2f} | {cpu:.1f} | {rss:.0f} | {floor:.2f} | {ratio:.2f}x "
            f"| {checks} |"
        )


if __name__ == "__main__":
    main()
