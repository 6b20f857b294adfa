"""Judging each node from a finished run's evidence (pure: records and summary in).

- A node **fails** when a check that counts as `fail` (waivers applied) names it: the subject
  of a node check, or a suspect of a pair or cluster check.
- A node **passes** only with positive evidence: at least one judged check concerns it,
  nothing failed or errored on it, it was reachable, and the run closed normally
  (`summary.json` present, not interrupted).
- Everything else is **unjudged** and the gate leaves it as it is: unreachable nodes (what
  failed on a node that never answered was not measured, and is not blamed on it), nodes
  with an errored or not measured check, both ends of a pair that failed without a suspect,
  and every node of a run that never closed or was interrupted (failures found before the
  stop still count).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from pytest_hpcnet.report.evidence import CheckRecord, RunSummary, effective_verdict, run_date_of

Status = Literal["fail", "pass", "unjudged"]
REASON_CHARS = 80
UNMEASURED = ("error", "not_measured")
"""Verdicts that say the check could not measure the node: never a failure of it."""


@dataclass
class NodeJudgement:
    """What the run says about one node."""

    node: str
    status: Status = "unjudged"
    checks: list[str] = field(default_factory=list)
    """Failed check ids, in order of first failure."""
    reasons: list[str] = field(default_factory=list)
    """One short message per failed check id, same order."""
    faults: list[tuple[str, str]] = field(default_factory=list)
    """(check id, fault code) of each code the failed records carry, in order."""
    why: str = ""
    """For `unjudged`: why the gate will not act on this node."""
    nodeids: list[str] = field(default_factory=list)
    """The test ids of the failed records naming the node (what a confirmation re-runs)."""
    local: bool = True
    """Every failed record is a check of this node alone (a re-run may leave out the rest)."""
    partners: list[str] = field(default_factory=list)
    """The other ends of the failed pair records naming the node."""
    confirmed: bool = False
    """The failure was seen again on a re-run (`gate.confirm`)."""
    flaky: bool = False
    """The failure passed on a re-run: not acted on."""


def short(text: str, limit: int = REASON_CHARS) -> str:
    """One line of at most `limit` characters (whitespace squashed, `...` where cut)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."


def _ends(record: CheckRecord) -> list[str]:
    if record.kind == "node":
        return [record.subject]
    if record.kind == "pair":
        return [n for n in record.subject.split("->") if n]
    return []


def judge(
    records: Iterable[CheckRecord], summary: RunSummary | None, nodes: Iterable[str] = ()
) -> dict[str, NodeJudgement]:
    """Each node's judgement, keyed by inventory name (`nodes` adds nodes without records)."""
    records = list(records)
    run_date = run_date_of(summary, records)
    found: dict[str, NodeJudgement] = {}

    def get(name: str) -> NodeJudgement:
        return found.setdefault(name, NodeJudgement(name))

    for name in nodes:
        get(name)
    judged: set[str] = set()
    blocked: dict[str, str] = {}
    for record in records:
        verdict = effective_verdict(record, run_date)
        ends = _ends(record)
        for name in ends:
            get(name)
        if verdict in ("pass", "waived"):
            judged.update(ends)
        elif verdict == "fail":
            culprits = list(dict.fromkeys([*ends, *record.suspect_nodes]))
            if record.kind != "node":
                culprits = list(dict.fromkeys(record.suspect_nodes))
            if not culprits:
                why = f"{record.check_id} failed on {record.subject} without naming a suspect"
                for name in ends:
                    blocked.setdefault(name, why)
            for name in culprits:
                judgement = get(name)
                if record.check_id not in judgement.checks:
                    judgement.checks.append(record.check_id)
                    judgement.reasons.append(short(record.message or record.check_id))
                for code in record.fault_codes():
                    if (record.check_id, code) not in judgement.faults:
                        judgement.faults.append((record.check_id, code))
                if record.nodeid and record.nodeid not in judgement.nodeids:
                    judgement.nodeids.append(record.nodeid)
                judgement.local = judgement.local and record.kind == "node"
                for other in ends:
                    if other != name and other not in judgement.partners:
                        judgement.partners.append(other)
        elif verdict in UNMEASURED:
            what = "errored" if verdict == "error" else "not measured"
            for name in {*ends, *record.suspect_nodes}:
                get(name)
                blocked.setdefault(name, f"{record.check_id} {what}")
    unreachable = set(summary.unreachable_nodes) if summary else set()
    closed = summary is not None and not summary.interrupted
    for name, judgement in found.items():
        if name in unreachable:  # what failed there was not measured: never blamed
            failed = f" ({', '.join(judgement.checks)} failed: not measured, not blamed)"
            judgement.why = "unreachable in this run" + (failed if judgement.checks else "")
        elif judgement.checks:
            judgement.status = "fail"
        elif not closed:
            judgement.why = "run interrupted" if summary else "run has no summary.json"
        elif name in blocked:
            judgement.why = blocked[name]
        elif name in judged:
            judgement.status = "pass"
        else:
            judgement.why = "no check judged this node"
    return found
