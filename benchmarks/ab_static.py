"""Two (or more) trees of the plugin side by side on one lab: the static gate's controller CPU.

    sudo .venv/bin/python benchmarks/ab_static.py --nodes 64 --rounds 2 ../base .

One lab comes up under the host-wide lab lock; each round runs `pytest -m static` once per
tree, alternating, in a fresh process whose `cwd` and `PYTHONPATH` are the tree (so the tree's
own plugin is imported, with this venv's packages), and prints each run's controller CPU
(`RUSAGE_SELF` at unconfigure, `benchmarks/xdist_rusage.py`), wall time and load average.
A figure in ms per node is the host's of that hour: compare trees within one run of this.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_hpcnet.lab import cluster as lab

LOCK = "/run/hpcnet-lab.lock"


def run_static(tree: Path, inventory: Path, reports: Path) -> dict:
    """One static run of `tree`'s plugin: its controller CPU, wall time and checks line."""
    usage = Path(tempfile.mkdtemp(prefix="hpcnet-ab-"))
    env = {**os.environ, "HPCNET_RUSAGE_DIR": str(usage), "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as on an installed controller
    argv = [sys.executable, "-m", "pytest", "-m", "static", "-q", "-p", "no:cacheprovider"]
    argv += ["-p", "no:hypothesispytest", "-p", "benchmarks.xdist_rusage"]
    argv += ["--hpcnet-inventory", str(inventory), "--hpcnet-reports-dir", str(reports)]
    t0 = time.monotonic()
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t0
    checks = [ln for ln in done.stdout.splitlines() if ln.startswith("checks:")]
    cpu = json.loads((usage / "controller.json").read_text())["cpu_s"]
    return {"wall_s": wall, "cpu_s": cpu, "checks": checks[-1] if checks else done.stdout[-300:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", type=Path, nargs="+", help="checkouts of the plugin")
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--state-dir", type=Path, default=Path("/run/hpcnet-ab"))
    args = parser.parse_args()
    inventory = args.state_dir / "lab.yaml"
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            lab.up(args.nodes, 8500, args.state_dir, inventory)
            for _ in range(args.rounds):
                for tree in args.trees:
                    run = run_static(tree.resolve(), inventory, args.state_dir / "reports")
                    load = Path("/proc/loadavg").read_text().split()[0]
                    print(
                        f"| {tree} | {run['cpu_s'] * 1000 / args.nodes:.1f} | "
                        f"{run['wall_s']:.1f} | {load} | {run['checks']} |",
                        flush=True,
                    )
        finally:
            lab.down(args.state_dir)


if __name__ == "__main__":
    main()
