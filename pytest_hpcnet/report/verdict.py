"""The verdict, decided in one place and on the run's own date.

A check's verdict is `check_verdict(raw, waiver, run_date)`: a failure under a waiver valid
on the run's date is waived. The run's date is the UTC date of its start (`run_date`), never
the controller's local date, so the terminal, JUnit, the evidence, the certificate and
`hpcnet merge` agree whatever the time zone. The run's verdict is `overall_verdict`, over
the run's scope (`scope_of`): a `not_measured` check, and a skipped check in scope, were
not measured (INCOMPLETE) unless the skip says the inventory expects nothing there
(`NOT_APPLICABLE`); no waiver covers what was not measured; a partial run that passed is
PASSED, never ACCEPTED.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, datetime, timezone

from pytest_hpcnet.inventory.models import Waiver
from pytest_hpcnet.report.records import (
    VERDICTS,
    CheckRecord,
    OverallVerdict,
    RunScope,
    RunSummary,
    ScopeEntry,
)

NOT_APPLICABLE = "not applicable: "
"""The prefix of a skip reason that says the inventory expects nothing there (explicitly:
`kernel_module: null`, no flows listed, one node and so no pair); every other skip is a
check in scope that was not measured."""
UNBOUND = re.compile(r"no bound set \((expect\.[A-Za-z0-9_.]+)\)")
"""A skip for an unset threshold names the key to set: `no bound set (expect.nccl.x)`."""
MAX_SUBJECTS = 8
LAB_EVIDENCE = "LAB evidence (emulated tools), not a cluster handover"


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


def excluded_ids(scope: RunScope | None) -> set[str]:
    """The requirement ids the inventory leaves out (`scope.exclude`)."""
    return {e.check_id for e in scope.excluded if e.kind == "inventory"} if scope else set()


def in_scope(records: Iterable[CheckRecord], scope: RunScope | None) -> list[CheckRecord]:
    """The records the verdict covers: those of requirements the inventory did not exclude."""
    out = excluded_ids(scope)
    return [r for r in records if r.check_id not in out]


def _skip_entry(record: CheckRecord) -> tuple[str, str, str]:
    """(kind, reason, key) of a skipped record."""
    reason = " ".join(record.message.split()) or "skipped without a reason"
    if reason.startswith(NOT_APPLICABLE):
        return "not_applicable", reason, ""
    found = UNBOUND.search(reason)
    if found:
        return "unbound", reason, found.group(1)
    return "skipped", reason, ""


def scope_of(
    records: Iterable[CheckRecord], scope: RunScope | None = None, run_date: date | None = None
) -> RunScope:
    """The run's scope completed from its evidence: the inventory's exclusions kept, each
    not-applicable skip added to `excluded`, each other skip (and, in a handover run, each
    required requirement with no record) listed in `incomplete`, one entry per
    requirement and reason with its subjects."""
    base = scope or RunScope()
    kept = in_scope(records, base)
    grouped: dict[tuple[str, str, str, str], list[str]] = {}
    for record in kept:
        verdict = effective_verdict(record, run_date)
        if verdict == "not_measured":
            reason = " ".join(record.message.split()) or "not measured"
            unbound = UNBOUND.search(reason)
            key = (
                (record.check_id, "unbound", reason, unbound.group(1))
                if unbound
                else (record.check_id, "not_measured", f"not measured: {reason}", "")
            )
            grouped.setdefault(key, []).append(record.subject)
            continue
        if verdict != "skipped":
            continue
        kind, reason, key = _skip_entry(record)
        grouped.setdefault((record.check_id, kind, reason, key), []).append(record.subject)
    excluded = [e for e in base.excluded if e.kind == "inventory"]
    incomplete: list[ScopeEntry] = []
    for (check_id, kind, reason, key), named_subjects in grouped.items():
        subjects = list(dict.fromkeys(named_subjects))  # merged partitions: all-nodes once
        named = ", ".join(subjects[:MAX_SUBJECTS])
        if len(subjects) > MAX_SUBJECTS:
            named += f" and {len(subjects) - MAX_SUBJECTS} more"
        entry = ScopeEntry(check_id=check_id, subject=named, reason=reason, key=key, kind=kind)
        (excluded if kind == "not_applicable" else incomplete).append(entry)
    seen = {r.check_id for r in kept}
    out = excluded_ids(base)
    for check_id in base.required:
        if check_id not in seen and check_id not in out:
            reason = "not run: no record in the evidence"
            incomplete.append(ScopeEntry(check_id=check_id, reason=reason, kind="not_run"))
    recorded: dict[str, set[str]] = {}
    for record in kept:
        recorded.setdefault(record.check_id, set()).add(record.subject)
    for check_id, subjects in base.expected.items():
        if check_id in out or check_id not in seen:
            continue  # excluded, or already listed as not run at all
        missing = [s for s in dict.fromkeys(subjects) if s not in recorded[check_id]]
        if missing:
            named = ", ".join(missing[:MAX_SUBJECTS])
            if len(missing) > MAX_SUBJECTS:
                named += f" and {len(missing) - MAX_SUBJECTS} more"
            reason = f"not run: {len(missing)} planned subject(s) have no record"
            incomplete.append(
                ScopeEntry(check_id=check_id, subject=named, reason=reason, kind="not_run")
            )
    return base.model_copy(update={"excluded": excluded, "incomplete": incomplete})


def overall_verdict(
    records: Iterable[CheckRecord],
    unreachable_nodes: Iterable[str] = (),
    run_date: date | None = None,
    interrupted: bool = False,
    scope: RunScope | None = None,
) -> OverallVerdict:
    """Over the records in scope: INCOMPLETE if interrupted, any node unreachable, any check
    errored, any check in scope was not measured (`scope_of(...).incomplete`) or nothing was
    judged; else REJECTED if any check failed; else ACCEPTED for a handover run (the
    default scope), PASSED for a partial one."""
    records = list(records)
    scope = scope_of(records, scope, run_date)
    counts = count_verdicts(in_scope(records, scope), run_date)
    judged = counts["pass"] + counts["fail"] + counts["waived"]
    unmeasured = scope.incomplete
    if (
        interrupted
        or list(unreachable_nodes)
        or counts["error"]
        or counts["not_measured"]
        or unmeasured
        or not judged
    ):
        return "INCOMPLETE"
    if counts["fail"]:
        return "REJECTED"
    return "ACCEPTED" if scope.handover else "PASSED"


def verdict_line(summary: RunSummary) -> str:
    """The run's verdict as the terminal, `hpcnet verify`, report.html and junit.xml print
    it: `LAB ACCEPTED` for the lab's evidence."""
    verdict, scope = summary.verdict, summary.scope
    shown = f"LAB {verdict}" if summary.lab else verdict
    if scope.handover:
        return shown
    if verdict == "PASSED":
        return f"{shown} ({scope.label} passed, not a handover certificate)"
    return f"{shown} ({scope.label}, not a handover certificate)"


def required_ids(excluded: Iterable[str] = ()) -> list[str]:
    """The requirements a handover run must cover: every certificate row not excluded."""
    from pytest_hpcnet.requirements.registry import REQUIREMENTS

    out = set(excluded)
    return [r.id for r in REQUIREMENTS if r.row and r.id not in out]


def run_date_of(summary: RunSummary | None, records: Iterable[CheckRecord]) -> date:
    """The date waivers are judged on: the run's start, else the first record's, else today."""
    if summary is not None and summary.started_at is not None:
        return run_date(summary.started_at)
    starts = [r.started_at for r in records if r.started_at is not None]
    return run_date(min(starts)) if starts else datetime.now(timezone.utc).date()
