"""Reboot and re-accept: the gate repairs a drained node whose confirmed faults it can fix.

After the gate drained its confirmed failures, a node whose every fault is of class `reset`
or `reboot` (and allowed by the inventory's `gate.repair` policy) gets its GPUs reset
(`nvidia-smi -r`, only when no process holds a GPU) or its instance rebooted (ECS
`RebootInstance`); then its failed checks and the GPU load (`-m gpu_load`) run again on it
alone. Only a node that passes them is resumed, and it stays **suspect** for
`suspect_nights`: the same code again goes straight to `replace`. A `config` or `replace`
fault is never reset or rebooted; a node Slurm shows running a job is never touched; at most
`RepairSettings.limit(cluster size)` nodes are in repair at once.

`plan` is pure (judgements, Slurm states, policy, past repairs in); `execute` runs the plan
with a `Repairer` (`repair_live.LiveRepairer` on a real cluster, fakes in the unit tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, Protocol

from pytest_hpcnet.gate import slurm
from pytest_hpcnet.gate.judge import NodeJudgement
from pytest_hpcnet.inventory.gate_settings import (
    REPAIRABLE,
    RepairClass,
    RepairSettings,
    SchedulerSettings,
)
from pytest_hpcnet.requirements.registry import fault

Action = Literal["reset", "reboot"]
Outcome = Literal["resumed", "failed", "not_repaired", "skipped"]
"""`resumed`: repaired, re-accepted and resumed; `failed`: repaired but failed the
re-acceptance (stays drained); `not_repaired`: left drained for a person (config, replace,
a repeat while suspect, attempts used up, not allowed by the policy); `skipped`: not tried
tonight (share limit, a job running, not drained by hpcnet), tried again next night."""
BUSY_FLAGS = {"ALLOCATED", "MIXED", "COMPLETING"}
"""Slurm state flags that say a job runs on the node."""
RETURNING = 2
"""A node with this many repairs in the history read is named as returning."""


@dataclass(frozen=True)
class NodeFault:
    """One confirmed failure of a node: its stable code and its repair class."""

    code: str
    repair: RepairClass
    check_id: str


def node_faults(judgement: NodeJudgement) -> list[NodeFault]:
    """The node's faults, one per fault code its failed records carry (in order of first
    failure), each with the repair class the registry declares for it. A failed check with
    no declared code (a site's own check, evidence written before the codes) is `config`: a
    person looks at it, nothing is reset or rebooted."""
    found: list[NodeFault] = []
    coded = {check_id for check_id, _ in judgement.faults}
    for check_id, code in judgement.faults:
        declared = fault(code)
        found.append(NodeFault(code, declared.repair if declared else "config", check_id))
    found += [NodeFault("", "config", c) for c in judgement.checks if c not in coded]
    return found


# -- the history of repairs ---------------------------------------------------------------


@dataclass
class RepairRecord:
    """One node's repair in one gate run, as kept in `gate.jsonl` (`repair: [...]`)."""

    node: str
    codes: list[str]
    classes: list[str]
    outcome: Outcome
    why: str = ""
    action: Action | None = None
    """What was done (None: nothing)."""
    at: str = ""
    reset_s: float | None = None
    reboot_to_running_s: float | None = None
    reboot_to_ssh_s: float | None = None
    """RebootInstance accepted to SSH answering again."""
    ssh_to_accepted_s: float | None = None
    """SSH answering (or the reset done) to the re-acceptance judged."""
    reaccept: list[str] = field(default_factory=list)
    """The re-acceptance's pytest command lines."""
    replace: bool = False
    """Left for replacement: a `replace` fault, the same code again while suspect, the
    attempts used up, or a repair whose re-acceptance failed; it gets a ticket bundle."""
    ticket: str = ""
    """The ticket bundle's path (`hpcnet ticket`'s archive), written for a `replace`."""

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, [], "", False)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RepairRecord:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**{"codes": [], "classes": [], "outcome": "skipped", **known})

    def line(self) -> str:
        """One terminal line: node, codes, what was tried, the times, the outcome."""
        times = [
            f"{label} {value:.1f} s"
            for label, value in (
                ("reset", self.reset_s),
                ("reboot to SSH", self.reboot_to_ssh_s),
                ("SSH to re-accepted", self.ssh_to_accepted_s),
            )
            if value is not None
        ]
        tried = self.action or "no repair"
        timing = f" ({', '.join(times)})" if times else ""
        why = f": {self.why}" if self.why else ""
        ticket = f"; ticket {self.ticket}" if self.ticket else ""
        line = f"  repair {self.node}: {','.join(self.codes)}: {tried}{timing}: {self.outcome}"
        return f"{line}{why}{ticket}"


def _parse_at(text: str) -> datetime | None:
    try:
        found = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return found if found.tzinfo else found.replace(tzinfo=timezone.utc)


@dataclass
class PastRepairs:
    """The repairs of earlier gate runs (oldest first), and what they say about a node."""

    records: list[RepairRecord] = field(default_factory=list)

    def of(self, node: str) -> list[RepairRecord]:
        return [r for r in self.records if r.node == node and r.action is not None]

    def suspect_codes(self, node: str, nights: int, now: datetime) -> set[str]:
        """The codes repaired on `node` (and resumed) within the last `nights` nights."""
        since = now - timedelta(days=nights)
        return {
            code
            for r in self.of(node)
            if r.outcome == "resumed" and (at := _parse_at(r.at)) is not None and at >= since
            for code in r.codes
        }

    def attempts(self, node: str, nights: int, now: datetime) -> int:
        """Repairs done on `node` within the last `nights` nights (at least one night)."""
        since = now - timedelta(days=max(nights, 1))
        return sum(1 for r in self.of(node) if (at := _parse_at(r.at)) and at >= since)

    def returning(self) -> dict[str, list[RepairRecord]]:
        """Nodes repaired `RETURNING` times or more: the ones that keep coming back."""
        found: dict[str, list[RepairRecord]] = {}
        for r in self.records:
            if r.action is not None:
                found.setdefault(r.node, []).append(r)
        return {n: rs for n, rs in sorted(found.items()) if len(rs) >= RETURNING}


def past_repairs(entries: Iterable[Mapping[str, Any]], cluster: str = "") -> PastRepairs:
    """The repairs in gate.jsonl entries (of `cluster` when given), oldest first."""
    records = []
    for entry in entries:
        if cluster and entry.get("cluster") not in (None, "", cluster):
            continue
        for item in entry.get("repair") or []:
            record = RepairRecord.from_dict(item)
            record.at = record.at or str(entry.get("at", ""))
            records.append(record)
    records.sort(key=lambda r: r.at)
    return PastRepairs(records)


# -- the plan (pure) ---------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A node the gate repairs tonight."""

    node: str
    slurm_node: str
    faults: tuple[NodeFault, ...]
    action: Action
    judgement: NodeJudgement


@dataclass
class RepairPlan:
    chosen: list[Candidate] = field(default_factory=list)
    left: list[RepairRecord] = field(default_factory=list)
    limit: int = 0


def _allowed(fault: NodeFault, names: Sequence[str]) -> bool:
    return fault.code in names or fault.repair in names


def _action(faults: Sequence[NodeFault], policy: RepairSettings) -> Action | str:
    """`reset` when the policy resets every fault, else `reboot` when it resets or reboots
    every one (a reboot resets the GPUs too), else why not."""
    if all(_allowed(f, policy.reset) for f in faults):
        return "reset"
    if all(_allowed(f, policy.reboot + policy.reset) for f in faults):
        return "reboot"
    left = [f.code for f in faults if not _allowed(f, policy.reset + policy.reboot)]
    return f"gate.repair allows no reset or reboot for {', '.join(left)}"


def plan(
    judgements: Mapping[str, NodeJudgement],
    live: Mapping[str, slurm.SlurmNode],
    policy: RepairSettings,
    scheduler: SchedulerSettings,
    past: PastRepairs,
    cluster_nodes: int,
    now: datetime | None = None,
    confirm_required: bool = True,
) -> RepairPlan:
    """Which failed nodes to reset or reboot tonight, and why each other one is left."""
    now = now or datetime.now(timezone.utc)
    result = RepairPlan(limit=policy.limit(cluster_nodes))
    for name in sorted(n for n, j in judgements.items() if j.status == "fail"):
        judgement = judgements[name]
        faults = node_faults(judgement)
        codes = [f.code for f in faults]

        sure = judgement.confirmed or not confirm_required  # a ticket for a confirmed failure

        def leave(
            outcome: Outcome,
            why: str,
            replace: bool = False,
            codes=codes,
            faults=faults,
            name=name,
            sure=sure,
        ) -> None:
            classes = [f.repair for f in faults]
            record = RepairRecord(name, codes, classes, outcome, why, replace=replace and sure)
            result.left.append(record)

        slurm_name = scheduler.node_names.slurm_name(name)
        node = live.get(slurm_name)
        people = [f for f in faults if f.repair not in REPAIRABLE]
        repeat = sorted(set(codes) & past.suspect_codes(name, policy.suspect_nights, now))
        attempts = past.attempts(name, policy.suspect_nights, now)
        action = _action(faults, policy)
        if people:
            what = ", ".join(f"{f.code} ({f.repair})" for f in people)
            replace = any(f.repair == "replace" for f in people)
            leave("not_repaired", f"{what}: never reset or rebooted; stays drained", replace)
        elif repeat:
            leave(
                "not_repaired",
                f"{', '.join(repeat)} again within {policy.suspect_nights} nights of its "
                "repair: replace",
                True,
            )
        elif attempts >= policy.max_attempts:
            leave("not_repaired", f"{attempts} repairs did not hold: replace", True)
        elif action not in REPAIRABLE:
            leave("not_repaired", str(action))
        elif confirm_required and not judgement.confirmed:
            leave("skipped", "failure not confirmed by a re-run")
        elif node is None:
            leave("skipped", f"{slurm_name} is not a Slurm node")
        elif not (node.drained and node.ours):
            leave("skipped", f"not drained by hpcnet (Slurm: {node.state} {node.reason!r})")
        elif node.flags & BUSY_FLAGS:
            leave("skipped", f"Slurm shows a job on it ({node.state})")
        elif len(result.chosen) >= result.limit:
            leave(
                "skipped",
                f"{result.limit} nodes in repair at once at most (gate.repair: max_share "
                f"{policy.max_share:g} of {cluster_nodes}, max_nodes_per_night "
                f"{policy.max_nodes_per_night})",
            )
        else:
            result.chosen.append(Candidate(name, slurm_name, tuple(faults), action, judgement))
    return result


# -- carrying it out ---------------------------------------------------------------------


class RepairError(Exception):
    """A repair step that did not complete (one line)."""


@dataclass
class Step:
    """What a reset or reboot took."""

    reset_s: float | None = None
    reboot_to_running_s: float | None = None
    reboot_to_ssh_s: float | None = None
    note: str = ""


@dataclass
class Acceptance:
    passed: bool
    detail: str
    lines: list[str] = field(default_factory=list)


class Repairer(Protocol):
    """The cluster side of the loop: the GPU reset, the reboot, the re-acceptance."""

    def gpu_busy(self, node: str) -> list[str]:
        """The compute processes holding a GPU of `node` (empty: none)."""

    def reset(self, node: str) -> Step:
        """`nvidia-smi -r` on `node`; RepairError when it did not succeed."""

    def reboot(self, node: str) -> Step:
        """Reboot `node`'s instance and wait for it to run and SSH to answer; RepairError."""

    def reaccept(self, node: str, judgement: NodeJudgement) -> Acceptance:
        """The node's failed checks and the GPU load, on `node` alone."""

    def ticket(self, node: str) -> str:
        """Write `node`'s ticket bundle from the night's run; its path (RepairError: none)."""


Resume = Callable[[Candidate], str | None]
"""Resume a node in Slurm; returns None when done, else why not."""


def _one(candidate: Candidate, repairer: Repairer, resume: Resume) -> RepairRecord:
    faults = candidate.faults
    record = RepairRecord(
        candidate.node,
        [f.code for f in faults],
        [f.repair for f in faults],
        "failed",
        action=candidate.action,
        at=datetime.now(timezone.utc).isoformat(),
    )
    try:
        if candidate.action == "reset":
            busy = repairer.gpu_busy(candidate.node)
            if busy:
                record.action = None
                record.outcome = "skipped"
                record.why = f"a process holds a GPU ({', '.join(busy[:3])}): not reset"
                return record
            step = repairer.reset(candidate.node)
        else:
            step = repairer.reboot(candidate.node)
    except RepairError as exc:
        record.why = f"{candidate.action} did not complete: {exc}; stays drained"
        return record
    record.reset_s = step.reset_s
    record.reboot_to_running_s = step.reboot_to_running_s
    record.reboot_to_ssh_s = step.reboot_to_ssh_s
    started = time.monotonic()
    accepted = repairer.reaccept(candidate.node, candidate.judgement)
    record.ssh_to_accepted_s = round(time.monotonic() - started, 1)
    record.reaccept = accepted.lines
    if not accepted.passed:
        record.why = f"failed the re-acceptance: {accepted.detail}; stays drained"
        record.replace = True
        return record
    not_done = resume(candidate)
    if not_done:
        record.why = f"re-accepted, but not resumed: {not_done}"
        return record
    record.outcome = "resumed"
    record.why = f"re-accepted ({accepted.detail}); suspect"
    return record


def attach_tickets(records: Iterable[RepairRecord], repairer: Repairer) -> None:
    """Write the ticket bundle of each node left for replacement and name it in its record
    (a bundle that cannot be written is said in its `why`)."""
    for record in records:
        if not record.replace or record.ticket:
            continue
        try:
            record.ticket = repairer.ticket(record.node)
        except RepairError as exc:
            record.why = f"{record.why}; no ticket bundle: {exc}" if record.why else str(exc)


def execute(repair_plan: RepairPlan, repairer: Repairer, resume: Resume) -> list[RepairRecord]:
    """Repair the chosen nodes (at once: at most the plan's limit), re-accept, resume; then
    write the ticket bundle of every node left for replacement, the plan's `left` records
    included (their `ticket`). Returns the chosen nodes' records."""
    done: list[RepairRecord] = []
    if repair_plan.chosen:
        with ThreadPoolExecutor(
            len(repair_plan.chosen), thread_name_prefix="hpcnet-repair"
        ) as pool:
            done = list(pool.map(lambda c: _one(c, repairer, resume), repair_plan.chosen))
    attach_tickets([*repair_plan.left, *done], repairer)
    return done


@dataclass
class RepairLoop:
    """What `gate apply` needs to repair: the policy, the cluster side, the past."""

    policy: RepairSettings
    repairer: Repairer
    past: PastRepairs
    cluster_nodes: int


def slurm_resume(scheduler: SchedulerSettings, runner: slurm.Runner = slurm.run_command) -> Resume:
    """Resume with `scontrol update NodeName=... State=RESUME`, only while hpcnet's drain
    is still the node's reason and no job runs on it."""

    def resume(candidate: Candidate) -> str | None:
        try:
            node = slurm.read_nodes(scheduler, runner).get(candidate.slurm_node)
        except slurm.SlurmError as exc:
            return str(exc)
        if node is None or not node.ours:
            return f"Slurm no longer shows hpcnet's drain ({node.reason if node else 'gone'!r})"
        argv = slurm.resume_argv(scheduler.scontrol, candidate.slurm_node)
        action = slurm.Action("resume", candidate.node, candidate.slurm_node, argv, "repaired")
        outcome = slurm.execute([action], scheduler, runner)
        return outcome.failed[1] if outcome.failed else None

    return resume
