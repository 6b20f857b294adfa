"""Night after night: the key figures of a cluster's runs in one reports folder.

Per subject (node, pair `a->b`, or the cluster) and per key figure, one value per run.
Levels (bandwidth, latency, throughput) are compared with the previous *good* run's value
(ACCEPTED/PASSED) with the tolerance logic of `report/baseline.py`; error counters, which are
totals since boot, are shown as deltas between consecutive runs (a total that went down is a
counter reset: its delta is the new total), marked when the increase jumps (`COUNTER_FLOOR`).
Runs are ordered by the controller's start time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import pairwise
from pathlib import Path

from pytest_hpcnet.report.baseline import is_regression, tolerance_for
from pytest_hpcnet.report.evidence import (
    CheckRecord,
    EvidenceError,
    RunSummary,
    read_records,
    read_summary,
)
from pytest_hpcnet.report.records import GOOD_VERDICTS

NodeStatus = Callable[[list[CheckRecord], RunSummary], Mapping[str, str]]
"""Judges each node of one run: `pass`, `fail` or anything else (not judged)."""
MAX_RUNS = 60
COUNTER_FLOOR = 10.0
"""A counter's increase is marked when above this and above the largest earlier unmarked
increase of the window by more than the tolerance: a few drops a night are normal, a jump
(or errors where there were none) is not."""


@dataclass(frozen=True)
class Figure:
    """One key figure: which measurement of which check, and how to read it."""

    check_id: str
    name: str
    label: str
    counter: bool = False  # a total since boot: shown as deltas between runs


FIGURES: tuple[Figure, ...] = (
    Figure("ib_write_bw", "bw_avg", "ib_write_bw average bandwidth"),
    Figure("ib_write_lat", "t_avg", "ib_write_lat average latency"),
    Figure("ib_write_lat", "t_p99", "ib_write_lat p99 latency"),
    Figure("nccl_busbw", "avg_busbw", "NCCL all_reduce average bus bandwidth"),
    Figure("nccl_busbw", "busbw_largest", "NCCL all_reduce bus bandwidth, largest size"),
    Figure("cpfs", "write_bw", "CPFS write throughput per node"),
    Figure("cpfs", "read_bw", "CPFS read throughput per node"),
    Figure("tuning", "errors", "NIC errors (new since the previous run)", counter=True),
    Figure("tuning", "dropped", "NIC drops (new since the previous run)", counter=True),
)


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
    points: list[Point] = field(default_factory=list)

    @property
    def marked(self) -> bool:
        return any(p.mark in ("regression", "increase") for p in self.points)


@dataclass
class History:
    """A cluster's runs, its series per figure and subject, and the nodes that flapped."""

    cluster: str
    runs: list[RunInfo] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    node_status: dict[str, list[str]] = field(default_factory=dict)  # node -> status per run
    flapped: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # run folders not read, and why

    def regressions(self) -> list[tuple[Series, int]]:
        """(series, run index) of every marked point, latest run first."""
        found = [
            (s, i) for s in self.series for i, p in enumerate(s.points) if p.mark == "regression"
        ]
        return sorted(found, key=lambda item: (-item[1], item[0].figure.label, item[0].subject))


def _start(summary: RunSummary) -> datetime:
    moment = summary.started_at or datetime.min.replace(tzinfo=timezone.utc)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def load_runs(
    reports_dir: Path, cluster: str | None, max_runs: int = MAX_RUNS
) -> tuple[str, list[tuple[RunSummary, list[CheckRecord]]], list[str]]:
    """The closed runs of `cluster` (default: the latest run's), oldest first, at most
    `max_runs` (the latest); and the folders that could not be read."""
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
        try:
            runs.append((summary, read_records(run_dir)))
        except (OSError, EvidenceError) as exc:
            skipped.append(f"{run_dir.name}: {exc}")
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
    name, runs, skipped = load_runs(reports_dir, cluster, max_runs)
    history = History(name, skipped=skipped)
    table: dict[tuple[Figure, str], Series] = {}
    wanted = {(f.check_id, f.name): f for f in FIGURES}
    for index, (summary, records) in enumerate(runs):
        history.runs.append(RunInfo(summary.run_id, _start(summary), summary.verdict))
        for record in records:
            if record.verdict in ("error", "skipped"):
                continue
            for m in record.measured:
                figure = wanted.get((record.check_id, m.name))
                value = _number(m.value)
                if figure is None or value is None:
                    continue
                series = table.setdefault((figure, record.subject), Series(figure, record.subject))
                series.unit, series.comparison = m.unit, m.comparison
                while len(series.points) <= index:
                    series.points.append(Point())
                series.points[index] = Point(value=value)
        if node_status is not None:
            for node, status in node_status(records, summary).items():
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
    return history


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
