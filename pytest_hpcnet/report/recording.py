"""What a check records while it runs: measurements, commands, suspects, then its verdict.

A suite test is marked `@pytest.mark.check("mtu", "Jumbo MTU")`; the `check` fixture hands
it a `Check`. When the test's report is made, the record travels in the report's
`user_properties` (so pytest-xdist workers ship it to the controller), and only the
controller appends it to the evidence bundle.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any

import pytest

from pytest_hpcnet.inventory.models import Waiver
from pytest_hpcnet.report.evidence import EvidenceBundle, evidence_line
from pytest_hpcnet.report.verdict import NOT_APPLICABLE, check_verdict
from pytest_hpcnet.requirements.registry import default_code
from pytest_hpcnet.requirements.verdict import (
    FAIL,
    NOT_MEASURED,
    Measurement,
    NotMeasured,
    Verdict,
)
from pytest_hpcnet.requirements.verdict import (
    NOT_APPLICABLE as NOT_APPLICABLE_OUTCOME,
)
from pytest_hpcnet.transport.results import CommandResult, NodeUnreachable

RECORD_ATTR = "hpcnet_record"
UNREACHABLE_ATTR = "hpcnet_unreachable"
BRIEF_ATTR = "hpcnet_brief"
COMMAND_INLINE_MAX = 1024
"""Longer commands (the facts script, shared by every check of a node) are stored once in
`outputs/` and named by digest in each record instead of being copied into it."""
COMMAND_HEAD = 80
FAULT_CODE_PROPERTY = "hpcnet_fault_code"
"""The JUnit testcase property that carries each fault code of a failed check."""
CODED = ("fail", "waived")
"""Record verdicts that carry fault codes: a failure, and one a waiver covers."""


class Check:
    """The evidence one test gathers about one subject (node, pair or cluster)."""

    def __init__(
        self,
        check_id: str,
        requirement: str,
        subject: str,
        kind: str,
        nodeid: str,
        bundle: EvidenceBundle | None,
    ):
        self.check_id = check_id
        self.requirement = requirement
        self.subject = subject
        self.kind = kind
        self.nodeid = nodeid
        self.bundle = bundle
        self.measured: list[dict[str, Any]] = []
        self.failure_code = ""  # the judge's code for a failure no measurement carries
        self.commands: list[dict[str, Any]] = []
        self._results: dict[int, CommandResult] = {}
        self.suspects: list[str] = []
        self.tool_versions: dict[str, str] = {}
        self.unreachable: dict[str, str] = {}
        self.sections: list[str] = []
        self.started_at = datetime.now(timezone.utc)

    def measure(
        self,
        name: str,
        value: float | str | None,
        unit: str = "",
        threshold: float | str | list | None = None,
        comparison: str | None = None,
        source: str = "",
        subject: str = "",
    ) -> None:
        """Record a measured value and the threshold (and its source) it is judged against;
        its outcome is the judges' (`requirements.verdict.judged`)."""
        self.record_measurement(
            Measurement(name, value, unit, threshold, comparison, source, subject)
        )

    def record_measurement(self, m: Measurement) -> None:
        """Record one judged measurement as the judge decided it; a failed one carries its
        fault code (the judge's, else its requirement's default)."""
        entry = {
            "name": m.name,
            "value": m.value,
            "unit": m.unit,
            "threshold": m.bound,
            "comparison": m.comparison,
            "threshold_source": m.source,
        }
        if m.subject:
            entry["subject"] = m.subject
        if m.outcome is not None:
            entry["outcome"] = m.outcome
        if m.ceiling is not None:
            entry["ceiling"] = m.ceiling
        if m.basis:
            entry["basis"] = m.basis
        code = (m.code or default_code(self.check_id)) if m.outcome == FAIL else ""
        if code:
            entry["code"] = code
        self.measured.append(entry)

    def judge(self, verdict: Verdict, context: str = "") -> Verdict:
        """Take a judge's verdict: record its measurements and sections, then end the test
        with its outcome (a pass returns it; a failure fails the test; not measured and not
        applicable end it as such). `context` prefixes the reason (`node07: ...`)."""
        for m in verdict.measurements:
            self.record_measurement(m)
        self.sections.extend(s for s in verdict.sections if s not in self.sections)
        reason = f"{context}: {verdict.reason}" if context and verdict.reason else verdict.reason
        if verdict.fix and verdict.outcome in (FAIL, NOT_MEASURED):
            reason = f"{reason} (fix: {verdict.fix})" if reason else verdict.fix
        if verdict.outcome == FAIL:
            self.failure_code = verdict.code
            raise CheckFailed(reason or "failed")
        if verdict.outcome == NOT_MEASURED:
            raise NotMeasured(reason or "not measured")
        if verdict.outcome == NOT_APPLICABLE_OUTCOME:
            pytest.skip(NOT_APPLICABLE + (reason or "the inventory expects nothing here"))
        return verdict

    def read(self, *sections: str) -> None:
        """Name facts sections this check's judge read (the certificate shows them)."""
        self.sections.extend(s for s in sections if s not in self.sections)

    def command(self, result: CommandResult) -> None:
        """Record a command run for this check (once, however often the check reads it); its
        output is stored by digest."""
        if id(result) in self._results:
            return
        self._results[id(result)] = result  # held, so its id names no other result
        digest = None
        if self.bundle is not None:
            text = result.stdout
            if result.stderr:
                text += ("\n" if text else "") + "--- stderr ---\n" + result.stderr
            digest = self.bundle.store_output(text)
        if result.unreachable:
            self.unreachable[result.node] = result.unreachable
        command, command_digest = result.command, None
        if self.bundle is not None and len(command) > COMMAND_INLINE_MAX:
            command_digest = self.bundle.store_output(command)
            head = command.split("\n", 1)[0][:COMMAND_HEAD]
            command = f"{head} ... [{len(command)} chars: outputs/{command_digest}.txt]"
        self.commands.append(
            {
                "node": result.node,
                "command": command,
                "command_digest": command_digest,
                "exit_status": result.exit_status,
                "duration_s": round(result.duration_s, 3),
                "started_at": datetime.fromtimestamp(result.started_at, timezone.utc),
                "output_digest": digest,
            }
        )

    def suspect(self, *nodes: str) -> None:
        """Name nodes this check's evidence points at."""
        self.suspects.extend(n for n in nodes if n not in self.suspects)

    def record(self, verdict: str, message: str, waiver: Waiver | None) -> dict[str, Any]:
        """The JSON-able evidence record of this check with its verdict."""
        return {
            "check_id": self.check_id,
            "requirement": self.requirement,
            "nodeid": self.nodeid,
            "subject": self.subject,
            "kind": self.kind,
            "measured": self.measured,
            "verdict": verdict,
            "message": message,
            "commands": self.commands,
            "started_at": self.started_at,
            "ended_at": datetime.now(timezone.utc),
            "tool_versions": self.tool_versions,
            "suspect_nodes": self.suspects,
            "waiver": waiver.model_dump(mode="json") if waiver else None,
            "sections": self.sections,
        }


class CheckFailed(AssertionError):
    """A judge's failure, raised by `Check.judge` (its message is the verdict's reason)."""


ALL_NODES = "all-nodes"
"""The subject (and test id) of a per-node test the expectations rule out everywhere."""


def subject_of(item: pytest.Item) -> tuple[str, str]:
    """(subject, kind) of a test from its `node` / `node_pair` parameter."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    params = {k: v for k, v in params.items() if v is not None or k == "node"}  # `none` ids
    if "node_pair" in params:
        a, b = params["node_pair"]
        return f"{a.name}->{b.name}", "pair"
    if "perftest_pair" in params:
        pair = params["perftest_pair"]
        return f"{pair.a}->{pair.b}", "pair"
    if "node" in params:
        node = params["node"]
        return (node.name, "node") if node is not None else (ALL_NODES, "cluster")
    return "cluster", "cluster"


def find_waiver(
    waivers: list[Waiver],
    check_id: str,
    subject: str,
    measured: Sequence[dict[str, Any]] = (),
) -> Waiver | None:
    """The waiver that covers this record's failures, if any (expired ones included).

    A waiver names a requirement (`check_id`), a subject (`check_id[node07]`,
    `check_id[a->b]`) or a device of a node (`check_id[node07 erdma_1]`,
    `check_id[node07 GPU 3]`: `node07` is the subject or an end of its pair). It covers only
    the failed measurements it names: every failed measurement of the record must be named
    by it, and a record with any measurement not measured is never covered."""
    if any(m.get("outcome") == NOT_MEASURED for m in measured):
        return None
    failed = [m for m in measured if m.get("outcome") == FAIL]
    for waiver in waivers:
        if waiver.check in (check_id, f"{check_id}[{subject}]"):
            return waiver
        if _covers_device(waiver.check, check_id, subject, failed):
            return waiver
    return None


def _covers_device(
    waived: str, check_id: str, subject: str, failed: Sequence[dict[str, Any]]
) -> bool:
    prefix = f"{check_id}["
    if not (waived.startswith(prefix) and waived.endswith("]")):
        return False
    node, _, device = waived[len(prefix) : -1].partition(" ")
    if not device or node not in subject.split("->"):
        return False
    return bool(failed) and all(m.get("subject") in (device, f"{node} {device}") for m in failed)


def classify(report: pytest.TestReport, excinfo: pytest.ExceptionInfo | None) -> tuple[str, str]:
    """(verdict, one-line message) of a test report."""
    if report.passed:
        return "pass", ""
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
        return "skipped", str(reason).removeprefix("Skipped: ")
    if excinfo is None:
        return "error", "failed without an exception"
    exc = excinfo.value
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, (NodeUnreachable, NotMeasured)):
        return "not_measured", first
    if isinstance(exc, (AssertionError, pytest.fail.Exception)) and report.when == "call":
        return "fail", first
    return "error", f"{type(exc).__name__}: {first}"


def decide(
    check: Check,
    report: pytest.TestReport,
    excinfo: pytest.ExceptionInfo | None,
    waivers: list[Waiver],
    run_date: date,
    regressions: Callable[[dict[str, Any]], list] | None = None,
) -> tuple[dict[str, Any], Waiver | None]:
    """The check's record with its one verdict: the report classified, a pass failed by a
    baseline regression, then the waiver judged on the run's date (`verdict.check_verdict`)."""
    verdict, message = classify(report, excinfo)
    waiver = find_waiver(waivers, check.check_id, check.subject, check.measured)
    record = check.record(verdict, message, waiver)
    if regressions is not None and verdict == "pass":
        found = regressions(record)
        if found:
            verdict, message = "fail", "; ".join(r.describe() for r in found)
    record.update(verdict=check_verdict(verdict, waiver, run_date), message=message)
    coded = record["verdict"] in CODED
    record["codes"] = record_codes(record, check.failure_code) if coded else []
    return record, waiver


def fault_properties(record: dict[str, Any]) -> list[tuple[str, str]]:
    """The testcase properties JUnit writes for a failed record: one `hpcnet_fault_code` per
    code (pytest's junitxml reads the item's `user_properties` at teardown)."""
    if record["verdict"] != FAIL:
        return []
    return [(FAULT_CODE_PROPERTY, code) for code in record.get("codes", ())]


def record_codes(record: dict[str, Any], failure_code: str = "") -> list[str]:
    """The fault codes of a failed record: its failed measurements' codes, else the code
    its judge gave the failure (`failure_code`), else its requirement's default (a failure
    no measurement carries, a baseline regression)."""
    found = [m["code"] for m in record["measured"] if m.get("outcome") == FAIL and m.get("code")]
    default = failure_code or default_code(record["check_id"])
    return list(dict.fromkeys(found)) or ([default] if default else [])


def show_verdict(
    report: pytest.TestReport, verdict: str, message: str, waiver: Waiver | None
) -> None:
    """Make the report (terminal, JUnit) say the decided verdict: a waived failure shows as
    xfailed with its waiver, a baseline regression as failed."""
    if verdict == "waived" and waiver is not None:
        report.outcome = "skipped"
        report.wasxfail = f"waived until {waiver.expires}: {waiver.reason}"
    elif verdict == "fail" and report.passed:
        report.outcome = "failed"
        report.longrepr = message


NOT_MEASURED_CATEGORY = "not measured"
"""pytest's own category for a check not measured: its last line counts them apart
(`1 failed, 1 passed, 3 not measured`); the report stays failed, so the exit status does too."""


def one_line(where: str, verdict: str, message: str, codes: Sequence[str] = ()) -> str:
    """What pytest shows of a check that failed or was not measured, whatever `--tb` says:
    `suite.py:42: not measured: n1: GPU 3: nvidia-smi is not installed (fix: ...)`; a
    failure leads with its fault codes: `suite.py:42: [HPCNET-MTU] node02: eth1: MTU 1500`."""
    said = " ".join(message.split()) or verdict
    if verdict == NOT_MEASURED:
        return f"{where}: not measured: {said}"
    return f"{where}: [{' '.join(codes)}] {said}" if codes else f"{where}: {said}"


def test_status(report: pytest.TestReport) -> tuple[str, str, tuple[str, dict]] | None:
    """`pytest_report_teststatus` for a check not measured: its own category, letter `N` and
    word `NOT MEASURED`; None for every other report (pytest's own status)."""
    brief = getattr(report, BRIEF_ATTR, None)
    if not brief or brief.split("\t", 1)[0] != NOT_MEASURED:
        return None
    return NOT_MEASURED_CATEGORY, "N", ("NOT MEASURED", {"yellow": True})


def attach(report: pytest.TestReport, record: dict[str, Any], unreachable: dict[str, str]) -> None:
    """Put the record's evidence line on the report, what the controller reads of it for
    every check (verdict, id, whether it ran a command), and the nodes it found unreachable,
    as text (pytest-xdist serializes report attributes); the controller appends the line as
    is and parses it only for a check that did not pass."""
    setattr(report, RECORD_ATTR, evidence_line(record))
    brief = (record["verdict"], record["check_id"], "1" if record["commands"] else "")
    setattr(report, BRIEF_ATTR, "\t".join(brief))
    if unreachable:
        setattr(report, UNREACHABLE_ATTR, json.dumps(unreachable))


@dataclass(frozen=True)
class Carried:
    """What a report carries of its check: the evidence line and the few fields the
    controller reads for every check; `record()` parses the whole line."""

    line: str
    verdict: str
    check_id: str
    contacted: bool
    unreachable: dict[str, str]

    def record(self) -> dict[str, Any]:
        return json.loads(self.line)


def detach(report: pytest.TestReport) -> Carried | None:
    """What a report carries of its check's record, if anything."""
    line = getattr(report, RECORD_ATTR, None)
    if not line:
        return None
    unreachable = json.loads(getattr(report, UNREACHABLE_ATTR, None) or "{}")
    verdict, check_id, contacted = getattr(report, BRIEF_ATTR).split("\t")  # set with the line
    return Carried(line, verdict, check_id, bool(contacted), unreachable)
