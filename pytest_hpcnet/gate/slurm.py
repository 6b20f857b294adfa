"""Slurm drain and resume from a run's judgements: parse, plan (pure), then execute.

Ownership is in the reason: the gate drains with `Reason="hpcnet: <checks>: <reason>"` and
only ever resumes nodes whose reason starts with `hpcnet:`. A node with any other reason
(drained, down or failed by someone else, or by Slurm itself) is never touched.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from pytest_hpcnet.gate.judge import NodeJudgement, short
from pytest_hpcnet.inventory.gate_settings import SchedulerSettings

PREFIX = "hpcnet:"
REASON_MAX = 160
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:]*)=")
_REASON_STAMP = re.compile(r"\s*\[[^\[\]@]*@[0-9T:-]+\]\s*$")
Op = Literal["drain", "resume"]


class SlurmError(Exception):
    """The Slurm controller did not answer or refused; one line."""


@dataclass(frozen=True)
class SlurmNode:
    """One node as Slurm reports it."""

    name: str
    state: str
    """Base state and flags as scontrol prints them, e.g. `IDLE+DRAIN`."""
    reason: str = ""
    """The reason text without Slurm's trailing `[user@time]` stamp."""

    @property
    def flags(self) -> set[str]:
        return set(self.state.upper().replace("*", "").split("+"))

    @property
    def drained(self) -> bool:
        """Draining or drained (the DRAIN flag is set)."""
        return bool({"DRAIN", "DRAINED", "DRAINING"} & self.flags)

    @property
    def ours(self) -> bool:
        """The reason says hpcnet set it."""
        return self.reason.startswith(PREFIX)


def _strip_stamp(reason: str) -> str:
    reason = reason.strip()
    return "" if reason in ("", "none", "(null)") else _REASON_STAMP.sub("", reason)


def parse_scontrol_line(line: str) -> dict[str, str]:
    """One `scontrol show node -o` line as key -> value. `Reason=` is last and runs to the
    end of the line; other values may hold spaces too (`OS=Linux 6.1.0-...`)."""
    line = line.strip()
    reason = ""
    head, sep, tail = line.partition(" Reason=")
    if sep:
        line, reason = head, tail
    keys = list(_KEY.finditer(line))
    fields: dict[str, str] = {}
    for i, match in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
        fields[match.group(1)] = line[match.end() : end].strip()
    if sep:
        fields["Reason"] = reason
    return fields


def parse_scontrol_nodes(text: str) -> dict[str, SlurmNode]:
    """`scontrol show node -o` output -> nodes by name; SlurmError if it is not that."""
    nodes: dict[str, SlurmNode] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = parse_scontrol_line(line)
        if "NodeName" not in fields or "State" not in fields:
            raise SlurmError(f"not a scontrol node line: {short(line)!r}")
        name = fields["NodeName"]
        nodes[name] = SlurmNode(name, fields["State"], _strip_stamp(fields.get("Reason", "")))
    if not nodes:
        raise SlurmError("scontrol listed no nodes")
    return nodes


SINFO_FORMAT = "%N|%T|%E"
"""`sinfo -N -h -o '%N|%T|%E'`: name, long state, reason (last, so a `|` in it is kept)."""


def parse_sinfo_nodes(text: str) -> dict[str, SlurmNode]:
    """`sinfo -N -h -o '%N|%T|%E'` output -> nodes by name (one line per partition)."""
    nodes: dict[str, SlurmNode] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", 2)
        if len(parts) != 3 or not parts[0] or not parts[1]:
            raise SlurmError(f"not a sinfo line of {SINFO_FORMAT!r}: {short(line)!r}")
        name, state, reason = parts
        state = state.strip().upper().replace("DRAINED", "IDLE+DRAIN")
        state = state.replace("DRAINING", "ALLOCATED+DRAIN")
        nodes[name] = SlurmNode(name, state, _strip_stamp(reason))
    if not nodes:
        raise SlurmError("sinfo listed no nodes")
    return nodes


CONFIRMED = "(confirmed by a re-run)"


def drain_reason(judgement: NodeJudgement) -> str:
    """`hpcnet: mtu,path_mtu: <first reason, short>` (`hpcnet: mtu (confirmed by a re-run):
    ...` when a re-run saw it again), one line, at most REASON_MAX chars."""
    confirmed = f" {CONFIRMED}" if judgement.confirmed else ""
    head = f"{PREFIX} {','.join(judgement.checks)}{confirmed}: "
    first = judgement.reasons[0] if judgement.reasons else "failed"
    return short(head + first, REASON_MAX)


@dataclass(frozen=True)
class Action:
    """One scontrol call for one node."""

    op: Op
    node: str
    slurm_node: str
    argv: tuple[str, ...]
    why: str

    @property
    def command(self) -> str:
        """The argv shell-quoted: what the dry run prints and the real run executes."""
        return shlex.join(self.argv)


@dataclass
class Plan:
    """What the gate will do, and what it leaves alone and why."""

    actions: list[Action] = field(default_factory=list)
    untouched: list[tuple[str, str]] = field(default_factory=list)
    """(node, why) for every judged node the gate leaves as it is."""


def drain_argv(scontrol: str, slurm_node: str, reason: str) -> tuple[str, ...]:
    return (scontrol, "update", f"NodeName={slurm_node}", "State=DRAIN", f"Reason={reason}")


def resume_argv(scontrol: str, slurm_node: str) -> tuple[str, ...]:
    return (scontrol, "update", f"NodeName={slurm_node}", "State=RESUME")


def plan(
    judgements: Mapping[str, NodeJudgement],
    slurm: Mapping[str, SlurmNode],
    settings: SchedulerSettings,
) -> Plan:
    """Drain failed nodes, resume our drained nodes that now pass, touch nothing else."""
    result = Plan()
    for name in sorted(judgements):
        judgement = judgements[name]
        slurm_name = settings.node_names.slurm_name(name)
        node = slurm.get(slurm_name)
        if node is None:
            if judgement.status != "unjudged":
                result.untouched.append((name, f"{slurm_name} is not a Slurm node"))
            continue
        if node.reason and not node.ours:
            if judgement.status != "unjudged" or node.drained:
                result.untouched.append((name, f"reason set by someone else: {node.reason!r}"))
            continue
        if judgement.status == "fail":
            reason = drain_reason(judgement)
            if node.drained and node.reason == reason:
                result.untouched.append((name, "already drained by hpcnet for this"))
                continue
            argv = drain_argv(settings.scontrol, slurm_name, reason)
            result.actions.append(Action("drain", name, slurm_name, argv, reason))
        elif judgement.status == "pass":
            if node.drained and node.ours:
                argv = resume_argv(settings.scontrol, slurm_name)
                result.actions.append(Action("resume", name, slurm_name, argv, "passes again"))
        elif node.drained and node.ours:
            result.untouched.append((name, f"stays drained: {judgement.why}"))
    return result


@dataclass
class Outcome:
    """What executing a plan did."""

    done: list[Action] = field(default_factory=list)
    failed: tuple[Action, str] | None = None
    not_done: list[Action] = field(default_factory=list)


Runner = Callable[[tuple[str, ...], float], subprocess.CompletedProcess]


def run_command(argv: tuple[str, ...], timeout_s: float) -> subprocess.CompletedProcess:
    """Run argv (no shell) with a timeout; SlurmError when it cannot run or times out."""
    try:
        return subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise SlurmError(f"`{shlex.join(argv)}` did not answer within {timeout_s:g} s") from None
    except OSError as exc:
        raise SlurmError(f"`{shlex.join(argv)}` cannot run: {exc.strerror or exc}") from None


def _failure(proc: subprocess.CompletedProcess) -> str:
    lines = (proc.stderr or proc.stdout or "").strip().splitlines()
    return short(lines[-1] if lines else f"exit status {proc.returncode}", 200)


def read_nodes(settings: SchedulerSettings, runner: Runner = run_command) -> dict[str, SlurmNode]:
    """Every node's state and reason from `scontrol show node -o`; SlurmError otherwise."""
    argv = (settings.scontrol, "show", "node", "-o")
    proc = runner(argv, settings.timeout_s)
    if proc.returncode != 0:
        raise SlurmError(f"`{shlex.join(argv)}` failed: {_failure(proc)}")
    return parse_scontrol_nodes(proc.stdout)


def execute(
    actions: Iterable[Action], settings: SchedulerSettings, runner: Runner = run_command
) -> Outcome:
    """Run the actions in order; stop at the first one that fails (the controller is then
    most likely gone) and list the rest as not done: the next run plans them again."""
    outcome = Outcome()
    pending = list(actions)
    while pending:
        action = pending.pop(0)
        started = time.monotonic()
        try:
            proc = runner(action.argv, settings.timeout_s)
            error = None if proc.returncode == 0 else _failure(proc)
        except SlurmError as exc:
            error = str(exc)
        if error is not None:
            took = time.monotonic() - started
            outcome.failed = (action, f"{error} (after {took:.1f} s)")
            outcome.not_done = pending
            break
        outcome.done.append(action)
    return outcome
