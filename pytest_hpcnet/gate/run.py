"""`hpcnet gate run --inventory INV [--act] [--bench]`: the nightly gate in one command.

Runs `pytest -m static --hpcnet-baseline auto` on the inventory (with `--bench`,
`-m "static or benchmark"`), then `hpcnet gate apply` on the run it wrote, under the
cluster's run lock (gate/runlock.py). Exit status (docs/gate.md):
  0  healthy: no node failed; every planned action done (or printed, in a dry run)
  1  nodes failed, confirmed by a re-run of their failed checks (or a regression against the
     last good run, or failures that passed on the re-run); their actions done or printed
  2  usage error: bad arguments, unreadable inventory, pytest refused its options; nothing done
  3  the run is incomplete (unreachable nodes, errors, interrupted, no summary.json), or a
     failure the re-run could not confirm
  4  an action was not done (Slurm controller not answering, a hook failed); retried next run
  5  another run of this cluster holds the lock (its PID and start are printed); nothing done
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from pytest_hpcnet.gate import apply as gate_apply
from pytest_hpcnet.gate import confirm
from pytest_hpcnet.gate.runlock import ENV, RunLocked, take_run_lock
from pytest_hpcnet.inventory.loader import InventoryError, load_inventory

EXIT_LOCKED = 5
PYTEST_USAGE = 4  # pytest.ExitCode.USAGE_ERROR
PYTEST_OK = (0, 1)  # all passed, some failed: the run closed
NOTHING_TO_ACT = (
    "hpcnet gate: --act: the inventory has no scheduler: (kind: slurm) and no actions: "
    "command, so nothing will be drained, resumed or run; the run is only judged "
    "(docs/gate.md)"
)


def add_command(gate_sub: argparse._SubParsersAction) -> None:
    """Register `hpcnet gate run`."""
    cmd = gate_sub.add_parser(
        "run",
        help="the nightly gate: pytest -m static against the last good run, then gate apply",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmd.add_argument("--inventory", type=Path, required=True, help="the cluster's inventory")
    cmd.add_argument("--reports-dir", type=Path, default=Path("reports"), help="default reports/")
    cmd.add_argument("--act", action="store_true", help="drain/resume/hook (default: dry run)")
    cmd.add_argument(
        "--bench", action="store_true", help='also the benchmarks (-m "static or benchmark")'
    )
    cmd.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")


def pytest_argv(args: argparse.Namespace) -> list[str]:
    """The pytest command line the gate runs (printed before it runs)."""
    marker = "static or benchmark" if args.bench else "static"
    return [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        marker,
        "-q",
        "-p",
        "no:cacheprovider",
        "--hpcnet-inventory",
        str(args.inventory),
        "--hpcnet-reports-dir",
        str(args.reports_dir),
        "--hpcnet-baseline",
        "auto",
        *args.pytest_args,
    ]


def _runs(reports: Path) -> set[str]:
    return {p.name for p in reports.iterdir() if p.is_dir() and not p.name.startswith(".")}


def run(args: argparse.Namespace) -> int:
    """Carry out `hpcnet gate run`; returns the exit status."""
    try:
        inventory = load_inventory(args.inventory)
    except InventoryError as exc:
        print(f"hpcnet gate: {exc}", flush=True)
        return gate_apply.EXIT_USAGE
    if args.act and inventory.scheduler.kind == "none" and inventory.actions.command is None:
        print(NOTHING_TO_ACT, flush=True)
    reports: Path = args.reports_dir
    try:
        lock = take_run_lock(reports, inventory.cluster.name)
    except RunLocked as exc:
        print(f"hpcnet gate: {exc}", flush=True)
        return EXIT_LOCKED
    except OSError as exc:
        print(f"hpcnet gate: reports directory {reports}: {exc.strerror or exc}", flush=True)
        return gate_apply.EXIT_USAGE
    try:
        if lock.note:
            print(f"hpcnet gate: {lock.note}", flush=True)
        return _run_locked(args, inventory, reports, lock.path)
    finally:
        lock.release()


def _run_locked(args: argparse.Namespace, inventory, reports: Path, lock_file: Path) -> int:
    before = _runs(reports)
    argv = pytest_argv(args)
    print("hpcnet gate: pytest " + shlex.join(argv[3:]), flush=True)
    env = {**os.environ, ENV: str(lock_file)}
    status = subprocess.run(argv, env=env, check=False).returncode
    new = sorted(_runs(reports) - before)
    if not new:
        print(f"hpcnet gate: pytest exited {status} without a run folder; nothing judged")
        return gate_apply.EXIT_USAGE if status == PYTEST_USAGE else gate_apply.EXIT_INCOMPLETE
    run_dir = reports / new[-1]
    report = gate_apply.apply(
        run_dir,
        inventory.scheduler,
        inventory.actions,
        [n.name for n in inventory.nodes],
        act=args.act,
        cluster=inventory.cluster.name,
        confirm=confirm.for_run(args.inventory, inventory.scheduler, run_dir),
        repair_loop=gate_apply.repair_loop_for(args.inventory, inventory, run_dir),
    )
    code = report.code
    if status not in PYTEST_OK and code in (gate_apply.EXIT_HEALTHY, gate_apply.EXIT_FAILED):
        code = gate_apply.EXIT_INCOMPLETE  # pytest itself did not finish normally
    print(f"hpcnet gate: run {run_dir.name}: exit {code}", flush=True)
    return code
