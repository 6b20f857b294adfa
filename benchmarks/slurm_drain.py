"""The gate's Slurm step on a lab with a real Slurm: how long draining and resuming take.

    python benchmarks/slurm_drain.py --sizes 16 64 --repeat 3

For each size it brings up a lab of that many nodes with `hpcnet lab up --slurm`'s Slurm
(slurmctld on the host, one slurmd per node namespace), writes a synthetic run folder through
the real `EvidenceBundle` (an MTU record per node) and times `gate.apply.apply` as
`hpcnet gate apply --act` runs it (the real `scontrol`, one `scontrol update` per node):
- dry run: read every node's state (`scontrol show node -o`) and plan;
- drain 1: one failed node drained;
- resume 1: that node passes again and is resumed;
- drain all: every node failed and drained (the worst night);
- resume all: every node resumed.
Medians of `--repeat` runs, wall time of the whole step (judge, read, plan, act). Needs root
(the lab) and holds /run/hpcnet-lab.lock while its lab is up. Prints a Markdown table and the
command that produced it.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pytest_hpcnet.gate.apply import apply
from pytest_hpcnet.inventory.gate_settings import ActionSettings, SchedulerSettings
from pytest_hpcnet.lab import cluster as lab
from pytest_hpcnet.lab import slurm as lab_slurm
from pytest_hpcnet.lab.system import LabError
from pytest_hpcnet.report.evidence import EvidenceBundle

LOCK = "/run/hpcnet-lab.lock"
STEPS = ("dry run", "drain 1", "resume 1", "drain all", "resume all")


def run_folder(reports: Path, nodes: list[str], failing: set[str], n: int) -> Path:
    bundle = EvidenceBundle.create(reports, f"20261130-020000-{n:04x}")
    for node in nodes:
        bad = node in failing
        bundle.append(
            {
                "check_id": "mtu",
                "requirement": "Jumbo MTU",
                "subject": node,
                "verdict": "fail" if bad else "pass",
                "message": f"{node}: eth0 MTU 1500, expected 8500" if bad else "",
            }
        )
    bundle.close({"cluster": "lab"})
    return bundle.run_dir


def timed(run_dir: Path, nodes: list[str], act: bool, expect: int) -> float:
    settings = SchedulerSettings(kind="slurm", act=True, scontrol=lab_slurm.PROGRAMS["scontrol"])
    start = time.perf_counter()
    report = apply(run_dir, settings, ActionSettings(), nodes, act=act, cluster="lab")
    elapsed = time.perf_counter() - start
    done = [line for line in report.lines if line.startswith("slurm: ") and " done" in line]
    if report.code not in (0, 1) or (
        act and expect and f"{expect} of {expect} done" not in done[0]
    ):
        raise SystemExit(f"gate step failed: {report.lines[-3:]}")
    return elapsed


def measure(size: int, repeat: int, state_dir: Path, work: Path) -> dict[str, float]:
    inventory = state_dir / "lab.yaml"
    t0 = time.perf_counter()
    state = lab.up(size, 8500, state_dir, inventory)
    t_up = time.perf_counter() - t0
    t0 = time.perf_counter()
    conf = lab_slurm.start(state)
    t_slurm = time.perf_counter() - t0
    os.environ["SLURM_CONF"] = str(conf)
    nodes = [n.name for n in state.nodes]
    samples: dict[str, list[float]] = {step: [] for step in STEPS}
    try:
        for r in range(repeat):
            base = work / f"{size}-{r}"
            one = {nodes[len(nodes) // 2]}
            fail_one = run_folder(base, nodes, one, 1)
            pass_all = run_folder(base, nodes, set(), 2)
            fail_all = run_folder(base, nodes, set(nodes), 3)
            samples["dry run"].append(timed(fail_one, nodes, False, 0))
            samples["drain 1"].append(timed(fail_one, nodes, True, 1))
            samples["resume 1"].append(timed(pass_all, nodes, True, 1))
            samples["drain all"].append(timed(fail_all, nodes, True, size))
            samples["resume all"].append(timed(pass_all, nodes, True, size))
    finally:
        lab_slurm.stop(state.root)
        lab.down(state_dir)
    result = {step: statistics.median(values) for step, values in samples.items()}
    result["lab up"], result["slurm up"] = t_up, t_slurm
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--state-dir", type=Path, default=Path("/run/hpcnet-slurm-drain"))
    args = parser.parse_args()
    reason = lab_slurm.missing()
    if reason:
        raise SystemExit(reason)
    command = " ".join(["python", *map(shlex.quote, sys.argv)])
    results = {}
    with open(LOCK, "w") as lock, tempfile.TemporaryDirectory(prefix="hpcnet-drain-") as work:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for {LOCK} (another lab is up)", file=sys.stderr)
            fcntl.flock(lock, fcntl.LOCK_EX)
        for size in args.sizes:
            print(f"lab up with Slurm: {size} nodes", file=sys.stderr)
            try:
                results[size] = measure(size, args.repeat, args.state_dir, Path(work))
            except LabError as exc:
                raise SystemExit(f"slurm_drain: {size} nodes: {exc}") from None
            print(f"{size} nodes: {results[size]}", file=sys.stderr, flush=True)
    columns = ("lab up", "slurm up", *STEPS)
    print("| nodes | " + " | ".join(columns) + " |")
    print("|---:|" + "---:|" * len(columns))
    for size, row in results.items():
        print(f"| {size} | " + " | ".join(f"{row[c]:.2f} s" for c in columns) + " |")
    print(f"\n`{command}` (medians of {args.repeat}; lab up and slurm up: once)")


if __name__ == "__main__":
    main()
