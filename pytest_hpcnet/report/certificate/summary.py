"""What the first pages of the certificate say in a bounded space, whatever the cluster size:
what failed by node, device and GPU (similar findings share a row), the failing pairs, the
scope entries grouped by requirement and reason, and "Where" for a requirement's worst value
("all 64 nodes" when every subject measured the same)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date

from pydantic import BaseModel, Field

from pytest_hpcnet.report.certificate.evidence import BAD
from pytest_hpcnet.report.certificate.format import (
    format_threshold,
    format_value,
    headroom,
    out_of_bound,
    pair_nodes,
)
from pytest_hpcnet.report.certificate.rows import RequirementRow
from pytest_hpcnet.report.evidence import CheckRecord, effective_verdict
from pytest_hpcnet.report.records import ScopeEntry

_ORDER = {verdict: index for index, verdict in enumerate(BAD)}
MAX_NAMES = 4  # node names listed in one cell before "and N more"
MAX_DETAIL = 140  # characters of a record's message shown as a finding's detail


class Finding(BaseModel):
    """Subjects that failed a requirement the same way: same device or GPU, same value."""

    check_id: str
    requirement: str
    verdict: str
    device: str = ""  # the device or GPU within the node ("" for the node itself)
    measured: str = ""
    threshold: str = ""
    detail: str = ""  # the record's message, where no measurement shows the failure
    code: str = ""  # the failure's fault code (docs/fault-codes.md)
    subjects: list[str] = Field(default_factory=list)


class PairFinding(BaseModel):
    """One failing pair of a pair check."""

    check_id: str
    source: str
    target: str
    verdict: str
    measured: str = ""
    threshold: str = ""
    margin: float | None = None
    code: str = ""  # the failure's fault code (docs/fault-codes.md)
    suspects: list[str] = Field(default_factory=list)


class ScopeGroup(BaseModel):
    """Scope entries of one requirement with one reason: the subjects they cover."""

    check_id: str
    reason: str
    key: str = ""
    subjects: list[str] = Field(default_factory=list)


def name_list(names: Sequence[str], every: Sequence[str] | int = 0, noun: str = "nodes") -> str:
    """`all 64 nodes` when `names` are all of `every` (the names, or how many there are);
    `all 64 nodes but node07` when only a few are missing; else the first names and how many
    more."""
    if not names:
        return "all"
    total = every if isinstance(every, int) else len(every)
    if total > 1 and len(names) == total:
        return f"all {total} {noun}"
    if not isinstance(every, int) and len(names) > total / 2:
        named = set(names)
        missing = [n for n in every if n not in named]
        if 0 < len(missing) <= 2 and len(missing) + len(names) == total:
            return f"all {total} {noun} but {', '.join(missing)}"
    if len(names) <= MAX_NAMES + 1:
        return ", ".join(names)
    return f"{', '.join(names[:MAX_NAMES])} and {len(names) - MAX_NAMES} more"


def _detail(message: str) -> str:
    line = next((part.strip() for part in message.splitlines() if part.strip()), "")
    return line if len(line) <= MAX_DETAIL else line[: MAX_DETAIL - 1] + "…"


def findings(
    records: Iterable[CheckRecord], run_date: date, order: Sequence[str] = ()
) -> list[Finding]:
    """What failed on nodes and the cluster (not pairs), worst verdict first: one row per
    requirement, verdict, device or GPU and value, naming every subject that shares it."""
    catalog = {check_id: index for index, check_id in enumerate(order)}
    groups: dict[tuple[str, ...], Finding] = {}
    for record in records:
        verdict = effective_verdict(record, run_date)
        if verdict not in BAD or record.kind == "pair":
            continue
        missed = [m for m in record.measured if out_of_bound(m)] if verdict != "error" else []
        shown = missed or [None]
        codes = record.fault_codes()
        for measurement in shown:
            finding = Finding(
                check_id=record.check_id,
                requirement=record.requirement or record.check_id,
                verdict=verdict,
                detail="" if measurement is not None else _detail(record.message),
                code=(measurement.code if measurement else "") or (codes[0] if codes else ""),
            )
            if measurement is not None:
                finding.device = measurement.subject
                finding.measured = format_value(measurement.value, measurement.unit)
                finding.threshold = format_threshold(measurement)
            key = (
                finding.check_id,
                finding.verdict,
                finding.device,
                finding.measured,
                finding.threshold,
                finding.detail,
                finding.code,
            )
            group = groups.setdefault(key, finding)
            if record.subject not in group.subjects:
                group.subjects.append(record.subject)
    return sorted(
        groups.values(),
        key=lambda f: (
            _ORDER[f.verdict],
            catalog.get(f.check_id, len(catalog)),
            f.check_id,
            -len(f.subjects),
            f.device,
        ),
    )


def failing_pairs(records: Iterable[CheckRecord], run_date: date) -> list[PairFinding]:
    """Every failing (or waived, or unmeasured) pair, the one furthest off its bound first."""
    found = []
    for record in records:
        verdict = effective_verdict(record, run_date)
        ends = pair_nodes(record.subject) if record.kind == "pair" else None
        if verdict not in BAD or ends is None:
            continue
        missed = [m for m in record.measured if out_of_bound(m)]
        worst = min(missed, key=lambda m: headroom(m) or 0.0) if missed else None
        shown = format_value(worst.value, worst.unit) if worst else _detail(record.message)
        found.append(
            PairFinding(
                check_id=record.check_id,
                source=ends[0],
                target=ends[1],
                verdict=verdict,
                measured=shown,
                threshold=format_threshold(worst) if worst else "",
                margin=headroom(worst) if worst else None,
                code=(worst.code if worst else "") or next(iter(record.fault_codes()), ""),
                suspects=list(record.suspect_nodes),
            )
        )
    return sorted(
        found,
        key=lambda p: (
            _ORDER[p.verdict],
            p.margin if p.margin is not None else 0.0,
            p.check_id,
            p.source,
            p.target,
        ),
    )


def scope_groups(entries: Iterable[ScopeEntry]) -> list[ScopeGroup]:
    """Scope entries grouped by requirement, reason and key, their subjects in order."""
    groups: dict[tuple[str, str, str], ScopeGroup] = {}
    for entry in entries:
        reason = entry.reason.removeprefix("not measured: ")  # the heading says so
        key = (entry.check_id, reason, entry.key)
        group = groups.setdefault(
            key, ScopeGroup(check_id=entry.check_id, reason=reason, key=entry.key)
        )
        if entry.subject and entry.subject not in group.subjects:
            group.subjects.append(entry.subject)
    return list(groups.values())


def where(
    records: Sequence[CheckRecord], row: RequirementRow, run_date: date, nodes: Sequence[str] = ()
) -> str:
    """Where a requirement's worst value was measured: `all 4 nodes` (pairs, devices) when
    every judged subject measured the same value, else the subject and its device or GPU
    (a cluster-wide measurement over a list of nodes names them as `name_list` does)."""
    subject = row.worst_subject
    values = [
        (r, m)
        for r in records
        if r.check_id == row.check_id and effective_verdict(r, run_date) != "skipped"
        for m in r.measured
        if m.name == row.measurement
    ]
    if not values or not subject:
        return subject
    subjects = {r.subject for r, _ in values}
    if len({repr(m.value) for _, m in values}) == 1 and len(values) > 1:
        if len(subjects) == 1:
            return f"{subject}: all {len(values)} devices"
        kinds = {r.kind for r, _ in values}
        noun = "pairs" if kinds == {"pair"} else "nodes" if kinds == {"node"} else "subjects"
        return f"all {len(subjects)} {noun}"
    device = next(
        (
            m.subject
            for r, m in values
            if r.subject == subject and m.subject and repr(m.value) == repr(row.worst_value)
        ),
        "",
    )
    if ", " in device:
        return name_list(device.split(", "), nodes or 0)
    return f"{subject} {device}".strip()


def excluded_groups(entries: Iterable[ScopeEntry]) -> list[ScopeGroup]:
    """Excluded checks grouped by reason (one `scope.exclude` reason covers many checks):
    `check_id` lists them all."""
    groups: dict[str, ScopeGroup] = {}
    for entry in entries:
        name = entry.check_id + (f"[{entry.subject}]" if entry.subject else "")
        group = groups.setdefault(entry.reason, ScopeGroup(check_id="", reason=entry.reason))
        group.subjects.append(name)
    for group in groups.values():
        group.check_id = ", ".join(group.subjects)
        group.subjects = []
    return list(groups.values())
