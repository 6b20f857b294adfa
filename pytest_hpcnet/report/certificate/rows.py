"""The certificate's tables: one row per requirement (worst value, margin, verdict), per
node (reached, passed, failed, suspect) and per waiver."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import date

from pydantic import BaseModel, Field

from pytest_hpcnet.inventory.models import Waiver
from pytest_hpcnet.report.burnin_summary import failure_time
from pytest_hpcnet.report.certificate.format import (
    format_threshold,
    format_value,
    headroom,
    out_of_bound,
    pair_nodes,
)
from pytest_hpcnet.report.evidence import CheckRecord, Measurement, effective_verdict, utc_now
from pytest_hpcnet.requirements.registry import BY_ID, certificate_specs

#: The rows a certificate lists by default (the registry's, reachability aside: the plugin adds
#: it); those without records show "not run".
DEFAULT_REQUIREMENTS: tuple[tuple[str, str], ...] = certificate_specs(with_reachability=False)

_VERDICT_ORDER = {
    "fail": 0,
    "not_measured": 1,
    "error": 2,
    "waived": 3,
    "pass": 4,
    "skipped": 5,
    "not_run": 6,
}


class NodeInfo(BaseModel):
    """A node of the inventory as the certificate names it."""

    name: str
    instance_type: str = ""


class RequirementSpec(BaseModel):
    """A requirement the certificate lists: the check id and its human name."""

    check_id: str
    requirement: str


class RequirementRow(BaseModel):
    """One row of the requirement table."""

    check_id: str
    requirement: str
    verdict: str
    threshold: str = ""
    threshold_source: str = ""
    measurement: str = ""
    unit: str = ""
    worst_value: float | str | None = None
    worst_subject: str = ""
    where: str = ""  # the worst subject as shown: `all 4 nodes` when every subject tied
    margin: float | None = Field(
        default=None, description="headroom as a fraction of the threshold; < 0 misses it"
    )
    subjects: int = 0
    subjects_failed: int = 0
    message: str = ""
    anchor: str = ""
    skip_reasons: list[str] = Field(default_factory=list)  # "reason (n subjects)"
    profile_source_keys: list[str] = Field(default_factory=list)  # profile keys with a `source:`
    baseline: float | None = None  # the worst measurement's baseline value, if any
    delta: float | None = None  # (value - baseline) / baseline of that measurement


class NodeRow(BaseModel):
    """One row of the per-node table."""

    name: str
    instance_type: str = ""
    reached: bool = True
    passed: int = 0
    failed: int = 0
    errors: int = 0
    suspect: bool = False


class WaiverRow(BaseModel):
    """One waiver (as the inventory declares it) and what it did on the run date."""

    check: str  # what it names: `id`, `id[node]`, `id[node device]`
    reason: str
    by: str
    expires: str = ""
    applied: bool = False  # it waived at least one failure
    expired: bool = False
    covered: list[str] = Field(default_factory=list)  # the failures under it, with figures
    note: str = ""  # what it did not cover, or why it waived nothing


UNGOOD = ("fail", "not_measured", "error")
"""Verdicts a row names as its message: failed, not measured, errored."""


def anchor_for(check_id: str) -> str:
    """The HTML id of a requirement's evidence section: `ev-<check_id>`."""
    return "ev-" + re.sub(r"[^A-Za-z0-9_-]", "-", check_id)


def _row_verdict(verdicts: Iterable[str]) -> str:
    seen = set(verdicts)
    for verdict in ("fail", "not_measured", "error", "waived", "pass"):
        if verdict in seen:
            return verdict
    return "skipped"


def _worst(records: Sequence[CheckRecord], run_date: date) -> tuple[Measurement, str] | None:
    """The measurement (and its subject) with the least headroom; for `==`/`in` checks
    the first measurement of a failing record, else the first one. Where every number
    passed but a failing record failed a measurement that is text, that failure (the
    earliest by the time it names, else the first)."""
    numeric: list[tuple[float, int, Measurement, str]] = []
    other: list[tuple[int, Measurement, str]] = []
    order = 0
    for record in records:
        failing = effective_verdict(record, run_date) in ("fail", "waived")
        for measurement in record.measured:
            order += 1
            margin = headroom(measurement)
            if margin is not None:
                numeric.append((margin, order, measurement, record.subject))
            elif measurement.comparison is not None:
                rank = 0 if failing and out_of_bound(measurement) else 1 if failing else 2
                other.append((rank, order, measurement, record.subject))
    failed = [(order, m, subject) for rank, order, m, subject in other if rank == 0]
    if numeric:
        margin, _, measurement, subject = min(numeric, key=lambda item: (item[0], item[1]))
        if margin >= 0 and failed:  # only text failed (`91.0 at t=...`): the earliest of it
            _, measurement, subject = min(failed, key=lambda item: (_when(item[1]), item[0]))
        return measurement, subject
    if other:
        _, _, measurement, subject = min(other, key=lambda item: (item[0], item[1]))
        return measurement, subject
    return None


def _when(measurement: Measurement) -> float:
    """The time a failure's value names (`... at t=3600 s`, a burn-in's), else infinity."""
    found = failure_time(measurement.value)
    return float("inf") if found is None else found


def requirement_rows(
    records: Iterable[CheckRecord],
    run_date: date | None = None,
    requirements: Sequence[RequirementSpec] | None = None,
) -> list[RequirementRow]:
    """One row per requirement: failing rows first, requirements that did not run last.

    The worst value is the one with the least headroom (min for `>=`, max for `<=`);
    margin is that headroom as a fraction of the threshold.
    """
    run_date = run_date or utc_now().date()
    specs = (
        list(requirements)
        if requirements is not None
        else [RequirementSpec(check_id=c, requirement=r) for c, r in DEFAULT_REQUIREMENTS]
    )
    by_check: dict[str, list[CheckRecord]] = {}
    for record in records:
        by_check.setdefault(record.check_id, []).append(record)
    catalog_order = {spec.check_id: index for index, spec in enumerate(specs)}
    rows: list[RequirementRow] = []
    for check_id, group in by_check.items():
        verdicts = [effective_verdict(r, run_date) for r in group]
        verdict = _row_verdict(verdicts)
        failing = [r for r, v in zip(group, verdicts, strict=True) if v in UNGOOD]
        judged = [r for r, v in zip(group, verdicts, strict=True) if v != "skipped"]
        worst = _worst(judged or group, run_date)
        name = group[0].requirement or next(
            (s.requirement for s in specs if s.check_id == check_id), check_id
        )
        row = RequirementRow(
            check_id=check_id,
            requirement=name,
            verdict=verdict,
            subjects=len(group),
            subjects_failed=sum(v in UNGOOD for v in verdicts),
            message=(failing[0].message if failing else ""),
            anchor=anchor_for(check_id),
        )
        if worst is not None:
            measurement, subject = worst
            row.threshold = format_threshold(measurement)
            row.threshold_source = measurement.threshold_source
            row.measurement = measurement.name
            row.unit = measurement.unit
            row.worst_value = measurement.value
            row.worst_subject = subject
            row.margin = headroom(measurement)
            row.baseline = measurement.baseline
            row.delta = measurement.delta
        row.skip_reasons = skip_reasons(
            r for r, v in zip(group, verdicts, strict=True) if v == "skipped"
        )
        rows.append(row)
    ran = set(by_check)
    rows.extend(
        RequirementRow(check_id=s.check_id, requirement=s.requirement, verdict="not_run")
        for s in specs
        if s.check_id not in ran
    )
    return sorted(
        rows,
        key=lambda r: (
            _VERDICT_ORDER.get(r.verdict, 9),
            catalog_order.get(r.check_id, len(catalog_order)),
            r.check_id,
        ),
    )


def skip_reasons(skipped: Iterable[CheckRecord]) -> list[str]:
    """Distinct skip reasons, most frequent first, each with how many subjects it skipped."""
    counts = Counter((r.message or "no reason given").strip() for r in skipped)
    return [
        reason if n == 1 else f"{reason} ({n} subjects)"
        for reason, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def fill_threshold_sources(
    rows: Iterable[RequirementRow], profile_sources: Mapping[str, str]
) -> dict[str, str]:
    """Give each row the profile keys (registry `expects`) whose `source:` note backs its
    threshold; return those notes by key, for the certificate to list once."""
    used: dict[str, str] = {}
    for row in rows:
        if row.check_id not in BY_ID:
            continue
        keys = [k for k in BY_ID[row.check_id].expects if profile_sources.get(k)]
        row.profile_source_keys = keys
        used.update((k, profile_sources[k]) for k in keys)
    return dict(sorted(used.items()))


def fill_planned_bounds(
    rows: Iterable[RequirementRow], planned: Mapping[str, Sequence[Mapping[str, object]]]
) -> None:
    """Give a row that measured no bound (not run, not measured, skipped) the bounds its
    judges would have applied, from the run's expectations (`planned_bounds`), with their
    keys as the source: what a requirement is held to shows whatever its outcome."""
    for row in rows:
        bounds = planned.get(row.check_id) or ()
        if row.threshold or not bounds:
            continue
        shown = []
        for bound in bounds:
            text = format_threshold(
                Measurement(
                    name=str(bound["figure"]),
                    unit=str(bound.get("unit") or ""),
                    threshold=bound.get("value"),  # type: ignore[arg-type]
                    comparison=str(bound["comparison"]),
                )
            )
            text = text if bound.get("value") is not None else "unset"
            shown.append(text if len(bounds) == 1 else f"{bound['figure']} {text}")
        row.threshold = "; ".join(shown)
        row.threshold_source = "expect." + ", expect.".join(str(b["key"]) for b in bounds)


def _record_nodes(record: CheckRecord) -> tuple[str, ...]:
    pair = pair_nodes(record.subject) if record.kind == "pair" else None
    if pair is not None:
        return pair
    return (record.subject,) if record.kind == "node" else ()


def node_rows(
    records: Sequence[CheckRecord],
    nodes: Sequence[NodeInfo],
    unreachable: Iterable[str],
    run_date: date,
) -> list[NodeRow]:
    """One row per node (inventory order, then any other node the evidence names)."""
    unreachable_set = set(unreachable)
    suspects = {node for record in records for node in record.suspect_nodes}
    rows = {n.name: NodeRow(name=n.name, instance_type=n.instance_type) for n in nodes}
    extra: set[str] = set(unreachable_set) | suspects
    for record in records:
        extra.update(_record_nodes(record))
    for name in sorted(extra - set(rows)):
        rows[name] = NodeRow(name=name)
    for record in records:
        verdict = effective_verdict(record, run_date)
        for name in _record_nodes(record):
            row = rows[name]
            if verdict in ("pass", "waived"):
                row.passed += 1
            elif verdict == "fail":
                row.failed += 1
            elif verdict in ("error", "not_measured"):
                row.errors += 1
    for row in rows.values():
        row.reached = row.name not in unreachable_set
        row.suspect = row.name in suspects
    return list(rows.values())


def _covered(record: CheckRecord) -> list[str]:
    """A failure under a waiver: each measurement out of bound with its figure and bound,
    else the record's first line."""
    shown = [
        f"{record.subject}{' ' + m.subject if m.subject else ''}: {m.name} "
        f"{format_value(m.value, m.unit)} (needs {format_threshold(m) or 'a bound'})"
        for m in record.measured
        if out_of_bound(m)
    ]
    if shown:
        return shown
    line = next((part.strip() for part in record.message.splitlines() if part.strip()), "")
    return [f"{record.subject}: {line or 'failed'}"]


def _waiver_key(waiver: Waiver, check_id: str = "") -> tuple[str, str, str, str]:
    return (waiver.check or check_id, waiver.reason, waiver.by or "", waiver.expires.isoformat())


def waiver_rows(
    records: Iterable[CheckRecord], run_date: date, declared: Iterable[Waiver] = ()
) -> list[WaiverRow]:
    """Every waiver once: those the inventory declares (in its order), then any other the
    evidence carries (a merged run's); each with the failures it waived, with their figures,
    or why it waived nothing (expired, the check passed, not measured, nothing matched)."""
    rows: dict[tuple[str, str, str, str], WaiverRow] = {}
    gaps: dict[tuple[str, str, str, str], list[str]] = {}
    passed: dict[tuple[str, str, str, str], int] = {}

    def row_of(waiver: Waiver, check_id: str = "") -> WaiverRow:
        key = _waiver_key(waiver, check_id)
        if key not in rows:
            rows[key] = WaiverRow(
                check=key[0],
                reason=waiver.reason,
                by=waiver.by or "",
                expires=key[3],
                expired=not waiver.applies_on(run_date),
            )
        return rows[key]

    for waiver in declared:
        row_of(waiver)
    for record in records:
        if record.waiver is None:
            continue
        row = row_of(record.waiver, record.check_id)
        key = _waiver_key(record.waiver, record.check_id)
        verdict = effective_verdict(record, run_date)
        if verdict in ("fail", "waived"):
            row.covered.extend(c for c in _covered(record) if c not in row.covered)
            row.applied = row.applied or verdict == "waived"
        elif verdict in ("not_measured", "error"):
            gaps.setdefault(key, []).append(record.subject)
        else:
            passed[key] = passed.get(key, 0) + 1
    for key, row in rows.items():
        notes = []
        if row.expired:
            notes.append("EXPIRED — NOT APPLIED")
        if key in gaps:
            notes.append(
                f"NOT APPLIED to {', '.join(gaps[key])}: not measured or errored "
                "(a waiver covers a failure, never a gap)"
            )
        if not row.covered and key in passed and not row.expired:
            notes.append("not needed: what it names passed")
        if not row.covered and key not in passed and key not in gaps:
            notes.append("matched nothing in this run")
        row.note = "; ".join(notes)
    return list(rows.values())
