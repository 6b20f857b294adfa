"""The GPU load phase's wall time on the lab, by node count (it runs on every node at once).

    sudo .venv/bin/python benchmarks/gpu_load.py --sizes 4 16 --repeat 1

For each size it brings up a lab of that many nodes (holding /run/hpcnet-lab.lock while it
is up) and runs `pytest -m gpu_load --inventory <lab>` as a user would: every emulated GPU
of every node under the load program at once (`benchmarks.gpu_load.seconds` of the lab
inventory, 10 s). Prints a Markdown table: the load phase's own seconds (its progress line),
the whole run's wall seconds, and pytest's summary line. The load phase should stay flat in
the node count; the emulated torch sleeps like a GPU, so the host's CPUs are not the limit.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab_runs import ROOT, lab_lock

from pytest_hpcnet.lab import cluster as lab

PHASE = re.compile(r"hpcnet: GPU load on (\d+) nodes, (\d+) GPUs, [\d.]+ s: .* \(([\d.]+) s\)")


def one_run(inventory: Path, reports: Path) -> tuple[float, float | None, str]:
    """(wall s, load phase s, pytest's summary line) of one `pytest -m gpu_load` run."""
    start = time.monotonic()
    options = ["-m", "gpu_load", "-p", "no:cacheprovider", "--inventory", str(inventory)]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *options, "--reports-dir", str(reports)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
    )
    wall = time.monotonic() - start
    found = PHASE.search(proc.stdout)
    if proc.returncode != 0:
        print("\n".join(proc.stdout.splitlines()[-25:]), file=sys.stderr)
    lines = [ln for ln in proc.stdout.splitlines() if " in " in ln and "passed" in ln]
    summary = lines[-1].strip("= ") if lines else f"exit {proc.returncode}"
    return wall, float(found.group(3)) if found else None, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    rows = []
    with lab_lock():
        for size in args.sizes:
            with tempfile.TemporaryDirectory(prefix="hpcnet-gpu-load-bench-") as tmp:
                root = Path(tmp)
                lab.up(size, 8500, root / "state", root / "lab.yaml")
                try:
                    runs = [one_run(root / "lab.yaml", root / f"r{i}") for i in range(args.repeat)]
                finally:
                    lab.down(root / "state")
            phases = [p for _, p, _ in runs if p is not None]
            rows.append(
                (
                    size,
                    statistics.median(phases) if phases else None,
                    statistics.median(w for w, _, _ in runs),
                    runs[-1][2],
                )
            )
    print("| nodes | GPUs | load phase s (median) | pytest -m gpu_load wall s | pytest |")
    print("|---:|---:|---:|---:|---|")
    for size, load, wall, summary in rows:
        shown = f"{load:.1f}" if load is not None else "?"
        print(f"| {size} | {size * 8} | {shown} | {wall:.1f} | {summary} |")
    print(f"\n`{' '.join(['python', 'benchmarks/gpu_load.py', *sys.argv[1:]])}`")


if __name__ == "__main__":
    main()
