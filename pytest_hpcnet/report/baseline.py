"""Comparison of a run's measurements with a previous run (the baseline).

A measurement regresses when it moved the wrong way by more than the tolerance:
higher-is-better (`>=` thresholds) dropped, lower-is-better (`<=`) rose.
Measurements with other comparisons or without a numeric baseline are not judged.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.report.evidence import (
    EVIDENCE_FILE,
    SUMMARY_FILE,
    CheckRecord,
    RunSummary,
    read_records,
    read_summary,
)
from pytest_hpcnet.report.records import GOOD_VERDICTS

MetricKey = tuple[str, str, str]  # (check_id, measurement name, subject)


@dataclass
class Baseline:
    """Numeric measurements of a previous run, by (check_id, measurement, subject)."""

    values: dict[MetricKey, float] = field(default_factory=dict)
    source: str = ""

    def get(self, check_id: str, name: str, subject: str) -> float | None:
        """The baseline value, or None where the previous run did not measure it."""
        return self.values.get((check_id, name, subject))


@dataclass
class Regression:
    """A measurement that moved the wrong way by more than its tolerance."""

    check_id: str
    metric: str
    subject: str
    value: float
    baseline: float
    delta_pct: float
    tolerance_pct: float

    def describe(self) -> str:
        """One line for a failure message."""
        return (
            f"{self.check_id} {self.metric} on {self.subject}: {self.value:g} vs baseline "
            f"{self.baseline:g} ({self.delta_pct:+.1f} %, tolerance {self.tolerance_pct:.0f} %)"
        )


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def metric_subject(record_subject: str, measurement_subject: str) -> str:
    """What a measurement is of: the record's subject, narrowed by the measurement's own
    (`node01 GPU 3`, `node01 GPU 0 -> GPU 1`) where a record holds one per GPU or device."""
    narrower = measurement_subject.strip()
    if not narrower or narrower == record_subject:
        return record_subject
    return f"{record_subject} {narrower}"


def baseline_from_records(records: Iterable[CheckRecord], source: str = "") -> Baseline:
    """A baseline holding every numeric measurement of these records (last one wins)."""
    baseline = Baseline(source=source)
    for record in records:
        if record.verdict in ("error", "skipped", "not_measured"):
            continue
        for measurement in record.measured:
            value = _number(measurement.value)
            if value is not None:
                subject = metric_subject(record.subject, measurement.subject)
                baseline.values[(record.check_id, measurement.name, subject)] = value
    return baseline


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    """A baseline from a previous run folder, its `evidence.jsonl`, or its `summary.json`."""
    source = Path(path)
    if source.is_dir():
        evidence = source / EVIDENCE_FILE
    elif source.name == SUMMARY_FILE:
        evidence = source.with_name(EVIDENCE_FILE)
    else:
        evidence = source
    if not evidence.exists():
        raise FileNotFoundError(f"no evidence for a baseline at {evidence}")
    return baseline_from_records(read_records(evidence), source=str(source))


def tolerance_for(
    check_id: str, name: str, default: float, per_metric: Mapping[str, float]
) -> float:
    """The tolerance of one measurement: `check.measurement`, `measurement`, `check`, default."""
    for key in (f"{check_id}.{name}", name, check_id):
        if key in per_metric:
            return per_metric[key]
    return default


def is_regression(comparison: str | None, delta: float, tolerance: float) -> bool:
    """Moved the wrong way by more than the tolerance: `>=` dropped, `<=` rose."""
    return (comparison == ">=" and delta < -tolerance) or (comparison == "<=" and delta > tolerance)


def compare_to_baseline(
    records: Iterable[CheckRecord],
    baseline: Baseline,
    tolerance_default: float = 0.10,
    per_metric: Mapping[str, float] | None = None,
) -> list[Regression]:
    """Fill each measurement's `baseline`/`delta` (fraction) in place; return regressions.

    `per_metric` maps `check.measurement`, `measurement` or `check` to a tolerance
    (fraction, e.g. 0.05), the most specific key winning.
    """
    overrides = dict(per_metric or {})
    regressions: list[Regression] = []
    for record in records:
        for measurement in record.measured:
            value = _number(measurement.value)
            subject = metric_subject(record.subject, measurement.subject)
            previous = baseline.get(record.check_id, measurement.name, subject)
            if value is None or previous is None:
                continue
            measurement.baseline = previous
            if previous == 0:
                measurement.delta = None
                continue
            delta = (value - previous) / abs(previous)
            measurement.delta = delta
            tolerance = tolerance_for(
                record.check_id, measurement.name, tolerance_default, overrides
            )
            if is_regression(measurement.comparison, delta, tolerance):
                regressions.append(
                    Regression(
                        check_id=record.check_id,
                        metric=measurement.name,
                        subject=subject,
                        value=value,
                        baseline=previous,
                        delta_pct=delta * 100,
                        tolerance_pct=tolerance * 100,
                    )
                )
    return regressions


def record_regressions(record: dict, baseline: Baseline, expect: Expectations) -> list[Regression]:
    """Compare one check record's numbers with the baseline; the deltas land in the record."""
    checked = CheckRecord.model_validate(record)
    found = compare_to_baseline(
        [checked], baseline, expect.regression_tolerance, expect.regression_tolerances
    )
    record["measured"] = [m.model_dump(mode="json") for m in checked.measured]
    return found


# -- `--hpcnet-baseline auto`: the last good run of the same cluster -----------------------

AUTO = "auto"


@dataclass
class BaselineChoice:
    """The run `auto` chose, or why none was (then the run is not compared)."""

    run_dir: Path | None
    note: str

    def line(self) -> str:
        """One line for the terminal and the summary."""
        return self.note


def _started(summary: RunSummary) -> datetime:
    """When a run started, by the controller's clock (summary.json); nodes' clocks never count."""
    moment = summary.started_at or datetime.min.replace(tzinfo=timezone.utc)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def compatible_scope(candidate: RunSummary, selection: str) -> bool:
    """A handover run covers any selection; a partial run only the same selection."""
    return candidate.scope.handover or candidate.scope.selection == selection


def good_runs(
    reports_dir: Path, cluster: str, selection: str = "", exclude: str = ""
) -> list[tuple[Path, RunSummary]]:
    """The closed runs of `cluster` in `reports_dir` with a good verdict, oldest first.

    Ordered by the controller's UTC start time in `summary.json`, then the run id; a folder
    whose summary cannot be read is skipped (never a baseline).
    """
    found: list[tuple[Path, RunSummary]] = []
    if not reports_dir.is_dir():
        return found
    for run_dir in reports_dir.iterdir():
        if run_dir.name == exclude or run_dir.name.startswith(".") or not run_dir.is_dir():
            continue
        try:
            summary = read_summary(run_dir)
        except (OSError, ValueError):
            continue
        if summary is None or summary.cluster != cluster or summary.interrupted:
            continue
        if summary.verdict in GOOD_VERDICTS and compatible_scope(summary, selection):
            found.append((run_dir, summary))
    found.sort(key=lambda item: (_started(item[1]), item[1].run_id))
    return found


def choose_baseline(
    reports_dir: Path, cluster: str, selection: str = "", exclude: str = ""
) -> BaselineChoice:
    """`--hpcnet-baseline auto`: the latest good run of the same cluster and scope."""
    runs = good_runs(reports_dir, cluster, selection, exclude)
    if not runs:
        return BaselineChoice(
            None,
            f"baseline auto: no earlier {'/'.join(GOOD_VERDICTS)} run of cluster {cluster} "
            f"in {reports_dir}; not compared",
        )
    run_dir, summary = runs[-1]
    started = f"{_started(summary):%Y-%m-%d %H:%M:%S} UTC" if summary.started_at else "?"
    return BaselineChoice(
        run_dir,
        f"baseline auto: {run_dir.name} ({summary.verdict}, started {started})",
    )
