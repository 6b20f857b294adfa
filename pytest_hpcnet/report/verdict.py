"""The verdict, decided in one place and on the run's own date.

A check's verdict is `check_verdict(raw, waiver, run_date)`: a failure under a waiver valid
on the run's date is waived. The run's date is the UTC date of its start (`run_date`), never
the controller's local date, so the terminal, JUnit, the evidence, the certificate and
`hpcnet merge` agree whatever the time zone. The run's verdict is `overall_verdict`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timezone

from pytest_hpcnet.inventory.models import Waiver
from pytest_hpcnet.report.records import VERDICTS, CheckRecord, OverallVerdict, RunSummary


def run_date(started_at: datetime) -> date:
    """The date a run is judged on: the UTC date of its start."""
    return started_at.astimezone(timezone.utc).date()


def check_verdict(raw: str, waiver: Waiver | None, on: date) -> str:
    """The verdict that counts: a `fail` with a waiver valid `on` the run's date is `waived`;
    a `waived` without one is `fail`; anything else stands."""
    waiver_valid = waiver is not None and waiver.applies_on(on)
    if raw == "fail" and waiver_valid:
        return "waived"
    if raw == "waived" and not waiver_valid:
        return "fail"
    return raw


def effective_verdict(record: CheckRecord, run_date: date | None = None) -> str:
    """The verdict that counts: a `fail` with a valid waiver is `waived`;
    a `waived` without a valid (present, unexpired) waiver is `fail`."""
    on = run_date or datetime.now(timezone.utc).date()
    return check_verdict(record.verdict, record.waiver, on)


def count_verdicts(records: Iterable[CheckRecord], run_date: date | None = None) -> dict[str, int]:
    """Records per effective verdict; every verdict appears, zero where absent."""
    counts = dict.fromkeys(VERDICTS, 0)
    for record in records:
        counts[effective_verdict(record, run_date)] += 1
    return counts


def overall_verdict(
    records: Iterable[CheckRecord],
    unreachable_nodes: Iterable[str] = (),
    run_date: date | None = None,
    interrupted: bool = False,
) -> OverallVerdict:
    """INCOMPLETE if interrupted, any node unreachable, any check errored or nothing
    was judged; else REJECTED if any check failed; else ACCEPTED."""
    counts = count_verdicts(records, run_date)
    judged = counts["pass"] + counts["fail"] + counts["waived"]
    if interrupted or list(unreachable_nodes) or counts["error"] or not judged:
        return "INCOMPLETE"
    if counts["fail"]:
        return "REJECTED"
    return "ACCEPTED"


def run_date_of(summary: RunSummary | None, records: Iterable[CheckRecord]) -> date:
    """The date waivers are judged on: the run's start, else the first record's, else today."""
    if summary is not None and summary.started_at is not None:
        return run_date(summary.started_at)
    starts = [r.started_at for r in records if r.started_at is not None]
    return run_date(min(starts)) if starts else datetime.now(timezone.utc).date()
