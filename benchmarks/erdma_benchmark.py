"""What the eRDMA-depth checks (issue 16) add to a benchmark run on the lab.

    sudo .venv/bin/python benchmarks/erdma_benchmark.py --nodes 16

Brings up one lab of `--nodes` nodes (holding /run/hpcnet-lab.lock while it is up) and runs
`pytest -m benchmark --inventory <lab>` as a user would, three times in a row: without the
eRDMA-depth checks (every ERI's pair, all ERIs at once, GPUDirect, the counter deltas, NCCL's
transport; `-k`), one ERI per node; every check, one ERI per node; every check with two ERIs
per node (`set_eris` between the runs). Prints a Markdown table of wall seconds and pytest's
summary line.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from lab_runs import lab_lock, timed_pytest

from pytest_hpcnet.lab import cluster as lab
from pytest_hpcnet.lab.emulation import set_eris

DEPTH = "not (every_eri or all_eris or gpudirect or error_counter or runs_on_erdma)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=16)
    args = parser.parse_args()
    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="hpcnet-erdma-bench-") as tmp, lab_lock():
        root = Path(tmp)
        state, inventory = root / "state", root / "lab.yaml"
        lab.up(args.nodes, 8500, state, inventory)
        try:
            wall, line = timed_pytest("benchmark", inventory, root / "r0", "-k", DEPTH)
            rows.append(("without the eRDMA-depth checks, 1 ERI", wall, line))
            wall, line = timed_pytest("benchmark", inventory, root / "r1")
            rows.append(("every check, 1 ERI per node", wall, line))
            set_eris(state, 2)
            wall, line = timed_pytest("benchmark", inventory, root / "r2")
            rows.append(("every check, 2 ERIs per node", wall, line))
        finally:
            lab.down(state)
    base = rows[0][1]
    print(f"| {args.nodes} nodes, -m benchmark | wall s | pytest |")
    print("|---|---:|---|")
    for name, wall, line in rows:
        extra = f" ({(wall - base) / base:+.0%})" if wall != base else ""
        print(f"| {name} | {wall:.1f}{extra} | {line} |")


if __name__ == "__main__":
    main()
