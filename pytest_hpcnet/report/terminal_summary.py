"""The run's lines at the end of pytest's terminal output: the nodes reached and not, the
check counts, each failure in one line, what was not measured or not in scope, the verdict
and where the reports are."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from pytest_hpcnet.report.records import GOOD_VERDICTS, RunSummary
from pytest_hpcnet.report.verdict import LAB_EVIDENCE, verdict_line
from pytest_hpcnet.requirements.registry import title

if TYPE_CHECKING:
    from pytest_hpcnet.session import HpcnetState


FAILURE_LINES = 20
"""How many records that did not pass the terminal summary names, one line each."""


def failure_line(record: dict) -> str:
    """`FAIL mtu [node02]: node02: eth1 (erdma_1): MTU 1500, expected 8500` (one line)."""
    shown = {"fail": "FAIL", "not_measured": "NOT MEASURED", "error": "ERROR"}[record["verdict"]]
    message = " ".join(str(record.get("message", "")).split())
    return f"{shown} {record['check_id']} [{record['subject']}]: {message}"


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


def write_summary(state: HpcnetState, terminalreporter) -> None:
    """The run's lines at the end of the terminal output: nodes, counts, verdict, reports."""
    inv = state.inventory
    tr = terminalreporter
    tr.section("hpcnet", sep="-")
    total = len(inv.nodes)
    tr.write_line(f"cluster {inv.cluster.name} ({inv.cluster.region}): {total} nodes")
    down = state.unreachable
    contacted = state.cluster is not None or state.contacted
    reached = f"{total - len(down)}/{total}" if contacted else "not contacted"
    tr.write_line(f"nodes reached: {reached}; unreachable: {len(down)}")
    for name, reason in sorted(down.items()):
        tr.write_line(f"  {name}: {reason}", red=True)
    retried = state.retries()
    if retried:
        tr.write_line("connection retries: " + ", ".join(f"{n} {c}" for n, c in retried.items()))
    summary = state.summary or RunSummary(run_id=state.run_dir.name)
    tr.write_line("checks: " + checks_line(summary.counts, state.outcomes))
    for check_id, count in sorted(state.failing.items()):
        tr.write_line(f"  {title(check_id)} ({check_id}): {count} not passed", red=True)
    for line in state.failures:  # the reason in full, which pytest's FAILED lines cut
        tr.write_line(f"    {line}", red=True)
    more = sum(state.failing.values()) - len(state.failures)
    if more > 0:
        tr.write_line(f"    ... and {more} more in evidence.jsonl and the certificate")
    for line in state.header:  # the baseline chosen by `auto`
        tr.write_line(line)
    for entry in summary.scope.incomplete:
        where = f" [{entry.subject}]" if entry.subject else ""
        tr.write_line(f"  not measured: {entry.check_id}{where}: {entry.reason}", red=True)
    for entry in summary.scope.excluded:
        tr.write_line(f"  not in scope: {entry.check_id}: {entry.reason}")
    good = summary.verdict in GOOD_VERDICTS
    tr.write_line(f"verdict: {verdict_line(summary)}", green=good, red=not good)
    if summary.lab:
        tr.write_line(LAB_EVIDENCE, yellow=True)
    tr.write_line(f"reports: {state.run_dir}/ (certificate.html, evidence.jsonl)")
