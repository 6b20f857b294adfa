"""Night after night: the key figures of a cluster's runs in one reports folder.

Per subject (node, pair `a->b`, or the cluster) and per key figure, one value per run.
Levels (bandwidth, latency, throughput) are compared with the previous *good* run's value
(ACCEPTED/PASSED) with the tolerance logic of `report/baseline.py`; error counters, which are
totals since boot, are shown as deltas between consecutive runs (a total that went down is a
counter reset: its delta is the new total), marked when the increase jumps (`COUNTER_FLOOR`).
Runs are ordered by the controller's start time.

A run reads its history at its end (`session.SESSION_TREND_RUNS` runs). Each run leaves
`trends-digest.json` in its folder, written at its own end before its certificate digests
the folder: its figures and its nodes' statuses, all the history needs of it. An earlier run
is read from its digest when there is one for the current figures, else from its evidence
(about 1,700 records per 64-node static run; 14 of them took 0.55 s of a run's CPU).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import pairwise
from pathlib import Path

from pytest_hpcnet.report.baseline import is_regression, metric_subject, tolerance_for
from pytest_hpcnet.report.burnin_summary import burnin_summaries
from pytest_hpcnet.report.certificate.versions import Manifest, manifest
from pytest_hpcnet.report.evidence import (
    CheckRecord,
    EvidenceError,
    RunSummary,
    _write_atomic,
    read_records,
    read_summary,
)
from pytest_hpcnet.report.records import GOOD_VERDICTS
from pytest_hpcnet.requirements.registry import trended_figures

NodeStatus = Callable[[list[CheckRecord], RunSummary], Mapping[str, str]]
"""Judges each node of one run: `pass`, `fail` or anything else (not judged)."""
MAX_RUNS = 60
COUNTER_FLOOR = 10.0
"""A counter's increase is marked when above this and above the largest earlier unmarked
increase of the window by more than the tolerance: a few drops a night are normal, a jump
(or errors where there were none) is not."""


@dataclass(frozen=True)
class Figure:
    """One key figure: which measurement of which check, in which unit, and how to read it."""

    check_id: str
    name: str
    label: str
    counter: bool = False  # a total since boot: shown as deltas between runs
    unit: str = ""  # the registry's; a series shows the unit its run recorded


BURNIN_FIGURES: tuple[Figure, ...] = (
    Figure("burnin", "burnin.achieved_s", "Burn-in: duration achieved", unit="s"),
    Figure("burnin", "burnin.max_temperature", "Burn-in: hottest GPU temperature", unit="C"),
    Figure("burnin", "burnin.tflops_drift_max", "Burn-in: largest TFLOPS drift", unit="%"),
    Figure(
        "burnin", "burnin.first_failure_s", "Burn-in: first failure, time into the run", unit="s"
    ),
)
"""Each node's burn-in summary (`report/burnin_summary.py`, from the judge's measurements):
the duration achieved (the asked one as its dashed line), the hottest temperature (judged
like a level against the last good run), the largest drift, and the first failure's time
with its GPU and quantity in the subject (`node01 GPU 3 temperature`)."""
FIGURES: tuple[Figure, ...] = (
    *(Figure(check_id, f.name, f.label, f.counter, f.unit) for check_id, f in trended_figures()),
    *BURNIN_FIGURES,
)
"""The figures the page follows: the registry's trended figures, in its order, then the
burn-in's."""


@dataclass
class RunInfo:
    """One run of the history."""

    run_id: str
    started_at: datetime
    verdict: str

    @property
    def good(self) -> bool:
        return self.verdict in GOOD_VERDICTS


@dataclass
class Point:
    """One subject's figure in one run; `shown` is the delta for counters, else the value."""

    value: float | None = None
    shown: float | None = None
    mark: str = ""  # "regression", "increase", "reset" or ""
    note: str = ""  # why it is marked: against which run, by how much


@dataclass
class Series:
    """One figure of one subject, one point per run of the history."""

    figure: Figure
    subject: str
    unit: str = ""
    comparison: str | None = None
    threshold: float | None = None  # the latest run's bound, where it had one
    points: list[Point] = field(default_factory=list)

    @property
    def marked(self) -> bool:
        return any(p.mark in ("regression", "increase") for p in self.points)


@dataclass(frozen=True)
class RepairRow:
    """One repair the gate did (reset or reboot), as the page lists it: plain values, read
    from the gate's `gate.jsonl` by `gate/history.py` (the terminal's `hpcnet trends` lines
    come from the same records)."""

    at: str
    node: str
    codes: tuple[str, ...]
    action: str
    outcome: str
    why: str = ""
    reset_s: float | None = None
    reboot_to_ssh_s: float | None = None
    ssh_to_accepted_s: float | None = None


@dataclass(frozen=True)
class Returning:
    """A node repaired again and again: how often, since when, for which codes."""

    node: str
    repairs: int
    since: str
    codes: tuple[str, ...]


@dataclass
class History:
    """A cluster's runs, its series per figure and subject, and the nodes that flapped."""

    cluster: str
    runs: list[RunInfo] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    node_status: dict[str, list[str]] = field(default_factory=dict)  # node -> status per run
    flapped: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # run folders not read, and why
    version_changes: list[tuple[str, list[str]]] = field(default_factory=list)
    """(run id, what changed in its versions and firmware since the run before), latest first."""
    repairs: list[RepairRow] = field(default_factory=list)
    """The gate's resets and reboots in the reports folder, oldest first."""
    returning: list[Returning] = field(default_factory=list)

    def regressions(self) -> list[tuple[Series, int]]:
        """(series, run index) of every marked point, latest run first."""
        found = [
            (s, i) for s in self.series for i, p in enumerate(s.points) if p.mark == "regression"
        ]
        return sorted(found, key=lambda item: (-item[1], item[0].figure.label, item[0].subject))


DIGEST_FILE = "trends-digest.json"
DIGEST_VERSION = 3
PointRow = tuple[str, str, str, float, str, str | None, float | None]
"""One figure of one subject in one run: check id, measurement, subject, value, unit,
comparison, threshold."""


@dataclass
class RunDigest:
    """What the history needs of one run: its figures' values and its nodes' statuses."""

    points: list[PointRow]
    node_status: dict[str, str] | None = None
    manifest: Manifest | None = None
    """The agreed versions and firmware per instance type and the odd nodes."""


def _figure_keys() -> list[list[str]]:
    return [[f.check_id, f.name] for f in FIGURES]


def digest_run(
    records: list[CheckRecord], summary: RunSummary, node_status: NodeStatus | None
) -> RunDigest:
    """The figures of one run's records (errors and skips left out) and, with `node_status`,
    its nodes' statuses."""
    wanted = {(f.check_id, f.name) for f in FIGURES}
    points: list[PointRow] = []
    for record in records:
        if record.verdict in ("error", "skipped", "not_measured"):
            continue
        for m in record.measured:
            value = _number(m.value)
            if (record.check_id, m.name) in wanted and value is not None:
                bound = _number(m.threshold)
                subject = metric_subject(record.subject, m.subject)
                points.append(
                    (record.check_id, m.name, subject, value, m.unit, m.comparison, bound)
                )
    points += burnin_points(records)
    statuses = dict(node_status(records, summary)) if node_status is not None else None
    return RunDigest(points, statuses, manifest(records))


def burnin_points(records: list[CheckRecord]) -> list[PointRow]:
    """Each node's burn-in summary as the `BURNIN_FIGURES`' points (errors left out)."""
    points: list[PointRow] = []
    for s in burnin_summaries(r for r in records if r.verdict != "error"):
        if s.achieved_s is not None:
            points.append(
                ("burnin", "burnin.achieved_s", s.node, s.achieved_s, "s", None, s.asked_s)
            )
        if s.max_temperature_c is not None:
            points.append(
                (
                    "burnin",
                    "burnin.max_temperature",
                    s.node,
                    s.max_temperature_c,
                    "C",
                    "<=" if s.temperature_bound is not None else None,
                    s.temperature_bound,
                )
            )
        if s.tflops_drift_pct is not None:
            points.append(
                (
                    "burnin",
                    "burnin.tflops_drift_max",
                    s.node,
                    s.tflops_drift_pct,
                    "%",
                    None,
                    s.drift_bound,
                )
            )
        first = s.first
        if first is not None and first.t is not None:
            subject = f"{s.node} {first.label}"
            points.append(("burnin", "burnin.first_failure_s", subject, first.t, "s", None, None))
    return points


def write_digest(run_dir: Path, digest: RunDigest) -> None:
    """Write the run's `trends-digest.json` (atomically, like every file of a run folder)."""
    data = {
        "version": DIGEST_VERSION,
        "figures": _figure_keys(),
        "points": digest.points,
        "node_status": digest.node_status,
        "manifest": digest.manifest.model_dump(mode="json") if digest.manifest else None,
    }
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    _write_atomic(run_dir / DIGEST_FILE, text.encode("utf-8"))


def read_digest(run_dir: Path, with_status: bool) -> RunDigest | None:
    """The run's digest, or None where it is missing, unreadable, of another version or
    figure list, or (`with_status`) without node statuses: the evidence is read instead."""
    try:
        data = json.loads((run_dir / DIGEST_FILE).read_text(encoding="utf-8"))
        if data["version"] != DIGEST_VERSION or data["figures"] != _figure_keys():
            return None
        points = [
            (
                str(c),
                str(n),
                str(s),
                float(v),
                str(u),
                None if k is None else str(k),
                None if t is None else float(t),
            )
            for c, n, s, v, u, k, t in data["points"]
        ]
        known = {(f.check_id, f.name) for f in FIGURES}
        if any((check_id, name) not in known for check_id, name, *_ in points):
            return None
        status = data["node_status"]
        if status is not None:
            status = {str(node): str(value) for node, value in status.items()}
        found = data.get("manifest")
        versions = Manifest.model_validate(found) if found is not None else None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    if with_status and status is None:
        return None
    return RunDigest(points, status, versions)


def _start(summary: RunSummary) -> datetime:
    moment = summary.started_at or datetime.min.replace(tzinfo=timezone.utc)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def load_runs(
    reports_dir: Path,
    cluster: str | None,
    max_runs: int = MAX_RUNS,
    node_status: NodeStatus | None = None,
) -> tuple[str, list[tuple[RunSummary, RunDigest]], list[str]]:
    """The closed runs of `cluster` (default: the latest run's), oldest first, at most
    `max_runs` (the latest), each as its digest; and the folders that could not be read."""
    found: list[tuple[RunSummary, Path]] = []
    skipped: list[str] = []
    for run_dir in sorted(p for p in reports_dir.iterdir() if p.is_dir()):
        if run_dir.name.startswith("."):
            continue
        try:
            summary = read_summary(run_dir)
        except (OSError, ValueError) as exc:
            skipped.append(f"{run_dir.name}: unreadable summary.json ({type(exc).__name__})")
            continue
        if summary is not None:
            found.append((summary, run_dir))
    found.sort(key=lambda item: (_start(item[0]), item[0].run_id))
    if cluster is None and found:
        cluster = found[-1][0].cluster
    runs = []
    for summary, run_dir in [f for f in found if f[0].cluster == cluster][-max_runs:]:
        digest = read_digest(run_dir, with_status=node_status is not None)
        if digest is None:
            try:
                digest = digest_run(read_records(run_dir), summary, node_status)
            except (OSError, EvidenceError) as exc:
                skipped.append(f"{run_dir.name}: {exc}")
                continue
        runs.append((summary, digest))
    return cluster or "", runs, skipped


def build_history(
    reports_dir: Path,
    cluster: str | None = None,
    tolerance: float = 0.10,
    per_metric: Mapping[str, float] | None = None,
    node_status: NodeStatus | None = None,
    max_runs: int = MAX_RUNS,
) -> History:
    """The history of one cluster in a reports folder."""
    name, runs, skipped = load_runs(reports_dir, cluster, max_runs, node_status)
    history = History(name, skipped=skipped)
    table: dict[tuple[Figure, str], Series] = {}
    wanted = {(f.check_id, f.name): f for f in FIGURES}
    for index, (summary, digest) in enumerate(runs):
        history.runs.append(RunInfo(summary.run_id, _start(summary), summary.verdict))
        for check_id, measurement, subject, value, unit, comparison, bound in digest.points:
            figure = wanted[(check_id, measurement)]
            series = table.setdefault((figure, subject), Series(figure, subject, figure.unit))
            series.unit, series.comparison = unit, comparison
            series.threshold = bound if bound is not None else series.threshold
            while len(series.points) <= index:
                series.points.append(Point())
            series.points[index] = Point(value=value)
        if node_status is not None and digest.node_status is not None:
            for node, status in digest.node_status.items():
                row = history.node_status.setdefault(node, [""] * index)
                row.extend([""] * (index - len(row)))
                row.append(status)
    for series in table.values():
        series.points.extend(Point() for _ in range(len(runs) - len(series.points)))
        _judge(series, history.runs, tolerance, dict(per_metric or {}))
    history.series = sorted(table.values(), key=lambda s: (FIGURES.index(s.figure), s.subject))
    for row in history.node_status.values():
        row.extend([""] * (len(runs) - len(row)))
    history.flapped = sorted(n for n, row in history.node_status.items() if flapped(row))
    for (_, before), (summary, after) in pairwise(runs):
        if before.manifest is not None and after.manifest is not None:
            changed = manifest_changes(before.manifest, after.manifest)
            if changed:
                history.version_changes.insert(0, (summary.run_id, changed))
    return history


def manifest_changes(before: Manifest, after: Manifest) -> list[str]:
    """What changed in the versions and firmware from one run to the next: an agreed value
    of an instance type (`ecs.x: nvidia_driver 570.172.08 -> 580.95.05`), and each node off
    its type's value that was not off it before (an unplanned change on a few nodes)."""
    old = {(line.instance_type, item): value for line in before.lines for item, value in line.items}
    found = [
        f"{line.instance_type or 'all nodes'}: {item} {old[(line.instance_type, item)]} -> {value}"
        for line in after.lines
        for item, value in line.items
        if (line.instance_type, item) in old and old[(line.instance_type, item)] != value
    ]
    seen = {(o.subject, o.item, o.value) for o in before.odd}
    found += [
        f"{o.subject}: {o.item} {o.value} (its type runs {o.agreed})"
        for o in after.odd
        if (o.subject, o.item, o.value) not in seen
    ]
    return found


def _judge(series: Series, runs: list[RunInfo], tolerance: float, per_metric: dict) -> None:
    """Fill `shown` and the marks: counters as deltas, levels against the last good run."""
    figure = series.figure
    limit = tolerance_for(figure.check_id, figure.name, tolerance, per_metric)
    previous: float | None = None  # counters: the previous run's total
    usual = 0.0  # counters: the largest unmarked increase between earlier runs
    reference: tuple[float, str] | None = None  # levels: the last good run's value
    for point, run in zip(series.points, runs, strict=True):
        if point.value is None:
            continue
        if figure.counter:
            if previous is not None:
                delta = point.value - previous
                if delta < 0:  # the counter went down: reboot or reset, the total is new
                    point.shown, point.mark = point.value, "reset"
                    point.note = f"counter reset (was {previous:g}); {point.value:g} since"
                else:
                    point.shown = delta
                    bound = max(COUNTER_FLOOR, (1 + limit) * usual)
                    if delta > bound:
                        point.mark = "increase"
                        point.note = f"+{delta:g} since the previous run (usual at most {usual:g})"
                    usual = max(usual, delta) if not point.mark else usual
            previous = point.value
            continue
        point.shown = point.value
        if reference is not None and reference[0] != 0:
            delta = (point.value - reference[0]) / abs(reference[0])
            if is_regression(series.comparison, delta, limit):
                point.mark = "regression"
                point.note = (
                    f"{delta * 100:+.1f} % vs {reference[0]:g} in good run {reference[1]} "
                    f"(tolerance {limit * 100:.0f} %)"
                )
        if run.good:
            reference = (point.value, run.run_id)


def flapped(statuses: list[str]) -> bool:
    """Passed, failed, passed again (or failed, passed, failed), ignoring unjudged runs."""
    seen = [s for s in statuses if s in ("pass", "fail")]
    changes = sum(1 for a, b in pairwise(seen) if a != b)
    return changes >= 2
