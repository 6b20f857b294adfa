"""`hpcnet gate apply RUN_DIR --inventory INV [--act]`: the gate's one step after a run.

Exit status (documented in docs/gate.md):
  0  every judged node passed; every planned action done (or printed, in a dry run)
  1  nodes failed (confirmed by a re-run); every planned action for them done (or printed);
     or the run was REJECTED by checks that name no node (a cluster-wide regression), or by
     failures that passed on a re-run (flaky): nothing to drain
  2  usage error: bad arguments, unreadable inventory or run folder; nothing done
  3  the run is incomplete (unreachable nodes, errors, interrupted, no summary.json), or a
     re-run could not confirm a failure: confirmed failures were acted on, nodes it could
     not judge left as they are (an interrupted run, or one without summary.json, resumes
     nobody)
  4  an action was not done: the Slurm controller did not answer or refused, or a hook failed
     or timed out; what was not done is listed and is planned again by the next run
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_hpcnet.gate import confirm as confirming
from pytest_hpcnet.gate import hook, repair, slurm
from pytest_hpcnet.gate.confirm import GATE_DIR, Confirmer
from pytest_hpcnet.gate.judge import NodeJudgement, judge
from pytest_hpcnet.inventory.gate_settings import ActionSettings, SchedulerSettings
from pytest_hpcnet.inventory.loader import InventoryError, load_inventory
from pytest_hpcnet.report.evidence import (
    EvidenceBundle,
    EvidenceError,
    read_records,
    read_summary,
)

HookRunner = Callable[[str, tuple[str, ...], float], hook.HookResult]
EXIT_HEALTHY, EXIT_FAILED, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_NOT_DONE = 0, 1, 2, 3, 4


@dataclass
class Report:
    """What the gate printed and the status it ends with."""

    lines: list[str] = field(default_factory=list)
    code: int = EXIT_HEALTHY

    def say(self, line: str) -> None:
        self.lines.append(line)
        print(line, flush=True)


def add_commands(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """Register `hpcnet gate apply` on the `hpcnet` parser; returns the `gate` subparsers."""
    gate = sub.add_parser("gate", help="act on a finished run: Slurm drain/resume, action hook")
    gate_sub = gate.add_subparsers(dest="action", required=True)
    apply = gate_sub.add_parser(
        "apply",
        help="plan (and with --act, do) drains, resumes and hook runs for a run folder",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    apply.add_argument("run_dir", type=Path, help="reports/<run-id>/ of a finished run")
    apply.add_argument("--inventory", type=Path, required=True, help="the cluster's inventory")
    apply.add_argument(
        "--act",
        action="store_true",
        help="do it (default: a dry run printing the exact commands)",
    )
    return gate_sub


def run(args: argparse.Namespace) -> int:
    """Carry out `hpcnet gate apply`; returns the exit status."""
    try:
        inventory = load_inventory(args.inventory)
    except InventoryError as exc:
        print(f"hpcnet gate: {exc}")
        return EXIT_USAGE
    return apply(
        args.run_dir,
        inventory.scheduler,
        inventory.actions,
        [n.name for n in inventory.nodes],
        act=args.act,
        cluster=inventory.cluster.name,
        confirm=confirming.for_run(args.inventory, inventory.scheduler, args.run_dir),
        repair_loop=repair_loop_for(args.inventory, inventory, args.run_dir),
    ).code


def repair_loop_for(
    inventory_path: Path, inventory: Any, run_dir: Path
) -> repair.RepairLoop | None:
    """The inventory's `gate.repair` loop (None without the policy)."""
    from pytest_hpcnet.gate.repair_live import loop_for

    return loop_for(inventory_path, inventory, run_dir)


def apply(
    run_dir: Path,
    scheduler: SchedulerSettings,
    actions: ActionSettings,
    nodes: list[str],
    act: bool = False,
    cluster: str = "",
    scontrol_runner: slurm.Runner = slurm.run_command,
    hook_runner: HookRunner = hook.run_hook,
    confirm: Confirmer | None = None,
    repair_loop: repair.RepairLoop | None = None,
) -> Report:
    """Judge the run, confirm its failures by a re-run (`confirm`, when given and there is
    something to act with), plan, print the plan's exact commands and, with `act`, carry
    it out. Only a confirmed failure is acted on; an unreachable node never is. With
    `repair_loop` (the inventory's `gate.repair`), drained nodes are then reset or rebooted
    and re-accepted (gate/repair.py)."""
    report = Report()
    mode = "act" if act else "dry run"
    if act and scheduler.kind == "slurm" and not scheduler.act:
        report.say("hpcnet gate: --act refused: the inventory says scheduler.act: false")
        report.code = EXIT_USAGE
        return report
    try:
        records = read_records(run_dir) if run_dir.is_dir() else None
        summary = read_summary(run_dir) if run_dir.is_dir() else None
    except (EvidenceError, ValueError) as exc:
        report.say(f"hpcnet gate: {run_dir}: {exc}")
        report.code = EXIT_USAGE
        return report
    if not records:
        report.say(f"hpcnet gate: {run_dir} is not a run folder with evidence.jsonl records")
        report.code = EXIT_USAGE
        return report
    if summary and cluster and summary.cluster and summary.cluster != cluster:
        report.say(
            f"hpcnet gate: {run_dir} is a run of cluster {summary.cluster!r}, "
            f"the inventory is {cluster!r}; nothing done"
        )
        report.code = EXIT_USAGE
        return report
    judgements = judge(records, summary, nodes)
    strangers = sorted(set(judgements) - set(nodes)) if nodes else []
    for name in strangers:  # evidence about a node the inventory does not have
        report.say(f"  ignored {name}: not a node of the inventory")
        del judgements[name]
    acting = scheduler.kind == "slurm" or actions.command is not None
    confirmed = _confirm(judgements, confirm) if confirm is not None and acting else None
    failed = sorted(n for n, j in judgements.items() if j.status == "fail")
    flaky = sorted(n for n, j in judgements.items() if j.flaky)
    unjudged = sorted(n for n, j in judgements.items() if j.status == "unjudged" and not j.flaky)
    run_id = summary.run_id if summary else run_dir.name
    gate_dir = run_dir.resolve().parent / GATE_DIR / run_dir.resolve().name
    passed = len(judgements) - len(failed) - len(unjudged) - len(flaky)
    report.say(
        f"hpcnet gate: run {run_id} ({summary.verdict if summary else 'no summary.json'}), "
        f"{mode}: {passed} passed, {len(failed)} failed, {len(unjudged)} unjudged"
        + (f", {len(flaky)} flaky" if flaky else "")
    )
    for name in unjudged:
        report.say(f"  unjudged {name}: {judgements[name].why}")
    for name in flaky:
        report.say(f"  flaky {name}: {judgements[name].why}")
    for line in confirmed.lines if confirmed else []:
        report.say(line)
    incomplete = summary is None or summary.verdict == "INCOMPLETE"
    report.code = EXIT_FAILED if failed else EXIT_HEALTHY
    if not failed and flaky:
        report.say("  no failure was confirmed by a re-run: nothing to drain")
        report.code = EXIT_FAILED  # the run did fail; nothing is acted on
    elif not failed and summary is not None and summary.verdict == "REJECTED":
        report.say("  the run was REJECTED by checks that name no node: nothing to drain")
        report.code = EXIT_FAILED  # never "healthy" after a failed check (e.g. a regression)
    if incomplete or (confirmed and confirmed.unconfirmed):
        report.code = EXIT_INCOMPLETE
    entry: dict[str, Any] = {
        "at": datetime.now(timezone.utc).isoformat(),
        "cluster": cluster,
        "run_id": run_id,
        "mode": mode,
        "failed": failed,
        "unjudged": unjudged,
    }
    if confirmed is not None:
        entry.update(
            confirmed=failed, flaky=flaky, unconfirmed=confirmed.unconfirmed, reruns=confirmed.runs
        )
    not_done = False
    if scheduler.kind == "slurm":
        not_done |= _slurm(report, judgements, scheduler, act, scontrol_runner, entry)
        if repair_loop is not None and not not_done:
            not_done |= _repair(
                report, judgements, scheduler, act, scontrol_runner, entry, repair_loop, confirm
            )
    if actions.command is not None:
        not_done |= _hooks(
            report,
            judgements,
            scheduler,
            actions,
            act,
            run_id,
            cluster,
            hook_runner,
            gate_dir,
            entry,
        )
    if act:
        _keep(gate_dir, entry)
    if not_done:
        report.code = EXIT_NOT_DONE
    return report


@dataclass
class Confirmed:
    """What the re-runs changed: lines to print, nodes left unconfirmed, pytest lines run."""

    lines: list[str] = field(default_factory=list)
    unconfirmed: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)


def _confirm(judgements: Mapping[str, NodeJudgement], confirm: Confirmer) -> Confirmed:
    """Re-run the failed nodes' checks: a confirmed node stays failed (its drain reason says
    so), a flaky one and one the re-run could not judge become unjudged (not acted on)."""
    failed = {n: j for n, j in judgements.items() if j.status == "fail"}
    done = Confirmed()
    if not failed:
        return done
    for name, found in sorted(confirm(failed).items()):
        judgement = judgements[name]
        ids = ", ".join(judgement.checks)
        if found.outcome == "confirmed":
            judgement.confirmed = True
            done.lines.append(f"  confirmed {name}: {ids} failed again ({found.detail})")
        elif found.outcome == "flaky":
            judgement.status, judgement.flaky = "unjudged", True
            judgement.why = f"{ids} failed, then passed on a re-run ({found.detail}); not drained"
        else:
            judgement.status = "unjudged"
            judgement.why = f"{ids} failed, not confirmed: {found.detail}; not drained"
            done.unconfirmed.append(name)
    done.runs = list(getattr(confirm, "lines", []))
    done.lines[:0] = [f"  re-run to confirm: pytest {line}" for line in done.runs]
    return done


def _slurm(
    report: Report,
    judgements: Mapping[str, NodeJudgement],
    scheduler: SchedulerSettings,
    act: bool,
    runner: slurm.Runner,
    entry: dict[str, Any],
) -> bool:
    """Plan and (with act) execute Slurm drains/resumes; True when something was not done."""
    try:
        live = slurm.read_nodes(scheduler, runner)
    except slurm.SlurmError as exc:
        report.say(f"slurm: controller not answering: {exc}")
        report.say("slurm: nothing done; the next gate run plans again")
        entry["slurm"] = {"error": str(exc)}
        return True
    the_plan = slurm.plan(judgements, live, scheduler)
    for name, why in the_plan.untouched:
        report.say(f"  untouched {name}: {why}")
    if not the_plan.actions:
        report.say("slurm: nothing to do")
    for action in the_plan.actions:
        report.say(action.command)
    entry["slurm"] = {"planned": [a.command for a in the_plan.actions]}
    if not act or not the_plan.actions:
        return False
    outcome = slurm.execute(the_plan.actions, scheduler, runner)
    entry["slurm"]["done"] = [a.command for a in outcome.done]
    report.say(f"slurm: {len(outcome.done)} of {len(the_plan.actions)} done")
    if outcome.failed is None:
        return False
    action, error = outcome.failed
    report.say(f"slurm: FAILED {action.command}: {error}")
    for rest in outcome.not_done:
        report.say(f"slurm: not done (next run plans it again): {rest.command}")
    entry["slurm"]["failed"] = {"command": action.command, "error": error}
    return True


def _repair(
    report: Report,
    judgements: Mapping[str, NodeJudgement],
    scheduler: SchedulerSettings,
    act: bool,
    runner: slurm.Runner,
    entry: dict[str, Any],
    loop: repair.RepairLoop,
    confirm: Confirmer | None,
) -> bool:
    """Plan and (with act) carry out the resets and reboots of drained nodes (gate.repair);
    True when Slurm could not be read."""
    try:
        live = slurm.read_nodes(scheduler, runner)
    except slurm.SlurmError as exc:
        report.say(f"repair: controller not answering: {exc}; nothing repaired")
        return True
    if not act:  # in a dry run nothing is drained yet: plan as if the drains were done
        live = {
            name: slurm.SlurmNode(name, f"{node.state}+DRAIN", f"{slurm.PREFIX} (planned)")
            if not node.reason or node.ours
            else node
            for name, node in live.items()
        }
    the_plan = repair.plan(
        judgements,
        live,
        loop.policy,
        scheduler,
        loop.past,
        loop.cluster_nodes,
        confirm_required=confirm is not None,
    )
    for candidate in the_plan.chosen:
        codes = ",".join(f.code for f in candidate.faults)
        report.say(
            f"  repair {candidate.node}: {codes}: {candidate.action}"
            + ("" if act else " (planned)")
        )
    records = list(the_plan.left)
    if act:
        records += repair.execute(the_plan, loop.repairer, repair.slurm_resume(scheduler, runner))
    for record in sorted(records, key=lambda r: r.node):
        if act or record.action is None:
            report.say(record.line())
    for node, past in loop.past.returning().items():
        report.say(f"  returning {node}: repaired {len(past)} times since {past[0].at[:10]}")
    entry["repair"] = [r.as_dict() for r in records]
    return False


def _hooks(
    report: Report,
    judgements: Mapping[str, NodeJudgement],
    scheduler: SchedulerSettings,
    actions: ActionSettings,
    act: bool,
    run_id: str,
    cluster: str,
    runner: HookRunner,
    gate_dir: Path,
    entry: dict[str, Any],
) -> bool:
    """Run (or print) the action hook once per failed node; True when one did not succeed."""
    results = []
    bad = False
    for name in sorted(n for n, j in judgements.items() if j.status == "fail"):
        slurm_node = scheduler.node_names.slurm_name(name)
        argv = hook.hook_argv(actions, judgements[name], slurm_node, run_id, cluster)
        if not act:
            report.say(shlex.join(argv))
            continue
        result = runner(name, argv, actions.timeout_s)
        report.say(result.command)
        record = result.record()
        record["output_digest"] = EvidenceBundle(gate_dir).store_output(result.output)
        del record["output"]
        results.append(record)
        if not result.ok:
            bad = True
            state = "timed out" if result.timed_out else f"exit status {result.exit_status}"
            report.say(f"hook: FAILED for {name}: {state}")
    if act:
        entry["hooks"] = results
    return bad


def _keep(gate_dir: Path, entry: dict[str, Any]) -> None:
    """Append this gate run's entry to `gate.jsonl` (fsynced)."""
    gate_dir.mkdir(parents=True, exist_ok=True)
    line = json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n"
    with open(gate_dir / "gate.jsonl", "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())
