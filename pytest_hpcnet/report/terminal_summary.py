"""The run's lines at the end of pytest's terminal output: the nodes reached and not, the
check counts, each failure in one line, what was not measured grouped by node and cause,
what was not in scope, the verdict and where the reports are.

The session hands it plain values (`RunLines`), so this module knows nothing of pytest's
session state."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pytest_hpcnet.report.records import GOOD_VERDICTS, RunSummary
from pytest_hpcnet.report.verdict import LAB_EVIDENCE, verdict_line
from pytest_hpcnet.requirements.registry import title

FAILURE_LINES = 20
"""How many records that failed the terminal summary names, one line each."""
CAUSE_CHECK_IDS = 5
"""How many requirement ids a cause's line names before `...`."""
UNREACHABLE = re.compile(r"^(?P<node>\S+) unreachable: (?P<reason>.+)$")


def failure_line(record: dict) -> str:
    """`FAIL mtu [node02] HPCNET-MTU: node02: eth1 (erdma_1): MTU 1500, expected 8500` (one
    line; a failure names its fault codes)."""
    shown = {"fail": "FAIL", "not_measured": "NOT MEASURED", "error": "ERROR"}[record["verdict"]]
    message = " ".join(str(record.get("message", "")).split())
    codes = "".join(f" {c}" for c in record.get("codes") or ())
    return f"{shown} {record['check_id']} [{record['subject']}]{codes}: {message}"


def cause_of(record: dict) -> str:
    """The cause a record was not measured for, as the summary groups it: its message on one
    line (a node's name leads it where the judge names one)."""
    message = " ".join(str(record.get("message", "")).split())
    return message.removeprefix("not measured: ") or "not measured"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def cause_line(cause: str, check_ids: list[str]) -> str:
    """`gpu-01 unreachable (timed out ...): 38 checks not measured`; another cause names the
    requirements it left unmeasured."""
    counted = f"{plural(len(check_ids), 'check')} not measured"
    down = UNREACHABLE.match(cause)
    if down:
        return f"{down['node']} unreachable ({down['reason']}): {counted}"
    ids = list(dict.fromkeys(check_ids))
    named = ", ".join(ids[:CAUSE_CHECK_IDS]) + (", ..." if len(ids) > CAUSE_CHECK_IDS else "")
    return f"{cause}: {counted} ({named})"


def checks_line(counts: dict[str, int], outcomes: Counter[str]) -> str:
    """The check counts the certificate shows (the records' verdicts); pytest's own outcomes
    where no check was recorded."""
    if sum(counts.values()):
        return (
            f"{counts.get('pass', 0)} passed, {counts.get('fail', 0)} failed, "
            f"{counts.get('not_measured', 0)} not measured, {counts.get('error', 0)} errors, "
            f"{counts.get('waived', 0)} waived, {counts.get('skipped', 0)} skipped"
        )
    o = outcomes
    return (
        f"{o['passed']} passed, {o['failed']} failed, {o['error']} errors, "
        f"{o['waived']} waived, {o['skipped']} skipped"
    )


@dataclass
class RunLines:
    """What the summary shows of a run, as plain values."""

    cluster: str
    region: str
    nodes: int
    contacted: bool
    run_dir: Path
    summary: RunSummary
    outcomes: Counter[str] = field(default_factory=Counter)
    unreachable: dict[str, str] = field(default_factory=dict)
    retries: dict[str, int] = field(default_factory=dict)
    failing: Counter[str] = field(default_factory=Counter)  # failed or errored, per check id
    failures: list[str] = field(default_factory=list)  # `failure_line`s, the first ones
    not_measured: dict[str, list[str]] = field(default_factory=dict)  # cause -> check ids
    header: list[str] = field(default_factory=list)


SHOWN_ELSEWHERE = ("not_measured", "unbound")
"""Kinds of `scope.incomplete` the cause lines already show (a record not measured)."""


def write_summary(run: RunLines, terminalreporter) -> None:
    """The run's lines at the end of the terminal output: nodes, counts, verdict, reports."""
    tr = terminalreporter
    tr.section("hpcnet", sep="-")
    total = run.nodes
    tr.write_line(f"cluster {run.cluster} ({run.region}): {plural(total, 'node')}")
    down = run.unreachable
    reached = f"{total - len(down)}/{total}" if run.contacted else "not contacted"
    tr.write_line(f"nodes reached: {reached}; unreachable: {len(down)}")
    for name, reason in sorted(down.items()):
        tr.write_line(f"  {name}: {reason}", red=True)
    if run.retries:
        tr.write_line(
            "connection retries: " + ", ".join(f"{n} {c}" for n, c in run.retries.items())
        )
    summary = run.summary
    tr.write_line("checks: " + checks_line(summary.counts, run.outcomes))
    for check_id, count in sorted(run.failing.items()):
        tr.write_line(f"  {title(check_id)} ({check_id}): {count} not passed", red=True)
    for line in run.failures:  # the reason in full, which pytest's FAILED lines cut
        tr.write_line(f"    {line}", red=True)
    more = sum(run.failing.values()) - len(run.failures)
    if more > 0:
        tr.write_line(f"    ... and {more} more in evidence.jsonl and the certificate")
    for cause, check_ids in run.not_measured.items():
        tr.write_line(f"  {cause_line(cause, check_ids)}", yellow=True)
    for line in run.header:  # the baseline chosen by `auto`
        tr.write_line(line)
    for entry in summary.scope.incomplete:
        if entry.kind in SHOWN_ELSEWHERE and run.not_measured:
            continue
        where = f" [{entry.subject}]" if entry.subject else ""
        reason = entry.reason.removeprefix("not measured: ")
        tr.write_line(f"  not measured: {entry.check_id}{where}: {reason}", red=True)
    for entry in summary.scope.excluded:
        tr.write_line(f"  not in scope: {entry.check_id}: {entry.reason}")
    good = summary.verdict in GOOD_VERDICTS
    tr.write_line(f"verdict: {verdict_line(summary)}", green=good, red=not good)
    if summary.lab:
        tr.write_line(LAB_EVIDENCE, yellow=True)
    tr.write_line(f"reports: {run.run_dir}/ (certificate.html, evidence.jsonl)")
