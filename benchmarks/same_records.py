"""Behaviour unchanged by a restructure: the lab's records at two commits, record by record.

    python benchmarks/same_records.py OLD NEW --nodes 2 --marker static [--fault KIND NODE ARGS]

For each commit it checks the tree out (a detached `git worktree` under --work), brings up a
lab of --nodes nodes from that tree's own code (its emulated tools too), injects the fault
when one is given, runs the acceptance suite as a user does (`pytest -m MARKER
--hpcnet-inventory lab.yaml` from an empty folder, the tree first on PYTHONPATH), and
takes the lab down. It then compares the two `evidence.jsonl` files record by record: the
same records (check, subject) with the same verdict, sections read, number of commands,
tool names, and measurements (name, subject, unit, comparison, bound, bound's source, basis,
outcome). Measured values, times and command texts are not compared (a ping's RTT differs
from run to run, and a restructure may reorder a script). Prints the differences and a
one-line summary; exits 1 when any record differs. Needs root (the lab) and holds
/run/hpcnet-lab.lock while a lab is up.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lab_runs import ROOT, lab_lock

MEASURED = ("name", "subject", "unit", "comparison", "threshold", "threshold_source", "basis")


def run_at(commit: str, work: Path, nodes: int, marker: str, fault: list[str]) -> Path:
    """The evidence.jsonl of one lab run at `commit`."""
    tree = work / commit
    if not tree.exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), commit], cwd=ROOT, check=True
        )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    state, empty = work / f"{commit}-state", work / f"{commit}-run"
    empty.mkdir(exist_ok=True)
    inventory = state / "lab.yaml"
    lab = [sys.executable, "-m", "pytest_hpcnet.cli", "lab"]
    with lab_lock():
        subprocess.run(
            [
                *lab,
                "up",
                "--nodes",
                str(nodes),
                "--state-dir",
                str(state),
                "--inventory",
                str(inventory),
            ],
            env=env,
            check=True,
            cwd=empty,
            capture_output=True,
        )
        try:
            if fault:
                subprocess.run(
                    [*lab, "fault", "--state-dir", str(state), *fault],
                    env=env,
                    check=True,
                    cwd=empty,
                    capture_output=True,
                )
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-m",
                    marker,
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "--hpcnet-inventory",
                    str(inventory),
                    "--hpcnet-reports-dir",
                    "reports",
                ],
                env=env,
                cwd=empty,
                capture_output=True,
                timeout=1800,
            )
        finally:
            subprocess.run(
                [*lab, "down", "--state-dir", str(state)], env=env, cwd=empty, capture_output=True
            )
    return max((empty / "reports").glob("*/evidence.jsonl"), key=lambda p: p.stat().st_mtime)


def shape(record: dict) -> dict:
    """What a restructure must not change in one record."""
    return {
        "verdict": record.get("verdict"),
        "sections": sorted(record.get("sections") or []),
        "commands": len(record.get("commands") or []),
        "tools": sorted(record.get("tool_versions") or {}),
        "measured": sorted(
            ((*tuple(str(m.get(k)) for k in MEASURED), str(m.get("outcome"))))
            for m in record.get("measured") or []
        ),
    }


def records(path: Path) -> dict[tuple[str, str], dict]:
    found = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if "check_id" in record:
            found[(record["check_id"], record.get("subject", ""))] = shape(record)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--marker", default="static")
    parser.add_argument("--fault", nargs="*", default=[], help="KIND NODE [ARGS]")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="same-records-"))
    old = records(run_at(args.old, work, args.nodes, args.marker, args.fault))
    new = records(run_at(args.new, work, args.nodes, args.marker, args.fault))
    differ = 0
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            differ += 1
            print(f"{key[0]} {key[1]}:\n  {args.old}: {old.get(key)}\n  {args.new}: {new.get(key)}")
    new_ids = sorted({k[0] for k in set(new) - set(old)})
    print(
        f"{len(old)} records at {args.old}, {len(new)} at {args.new}; {differ} differ"
        + (f" (new requirements: {', '.join(new_ids)})" if new_ids else "")
    )
    print(
        f"command: python benchmarks/same_records.py {args.old} {args.new} --nodes "
        f"{args.nodes} --marker {args.marker}"
        + (f" --fault {' '.join(args.fault)}" if args.fault else "")
    )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
