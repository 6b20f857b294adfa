"""Each node's burn-in as the reports show it, read from its `burnin` record's measurements:
the duration asked and achieved, the outcome, each failure with its GPU, quantity and first
time, the hottest temperature and the largest TFLOPS drift the judge reported.

Nothing is judged again here: the outcome is the record's, each failure a measurement the
judge failed; only its time is read back from the value the judge wrote
(`... at t=1234 s (0h20m34s)`, `requirements/burnin.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date

from pytest_hpcnet.report.records import CheckRecord, Measurement
from pytest_hpcnet.report.verdict import effective_verdict

CHECK_ID = "burnin"
DURATION = "burnin.duration"
TEMPERATURE = "burnin.temperature"
DRIFT = "burnin.tflops_drift"
_AT = re.compile(r" at t=(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?) s\b")
_LEADING = re.compile(r"\s*(-?[0-9]+(?:\.[0-9]+)?)")


def failure_time(value: object) -> float | None:
    """The time (s since the burn-in started) a failed measurement's value names
    (`91.0 at t=3600 s (1h00m00s)` -> 3600.0); None where it names none."""
    found = _AT.search(value) if isinstance(value, str) else None
    return float(found.group(1)) if found else None


def leading_number(value: object) -> float | None:
    """A measurement value's number: the value itself, or the number a text value starts
    with (`12.3 % (546 of 780 TFLOPS, ...)` -> 12.3); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    found = _LEADING.match(value) if isinstance(value, str) else None
    return float(found.group(1)) if found else None


def quantity(name: str) -> str:
    """`burnin.temperature` -> `temperature`."""
    return name.removeprefix(f"{CHECK_ID}.")


def _figure(value: object) -> float | None:
    """A measurement's number (not a text that starts with one); None otherwise."""
    return leading_number(value) if not isinstance(value, str) else None


@dataclass(frozen=True)
class Failure:
    """One failed measurement of a node's burn-in: its GPU (the measurement's subject), the
    quantity, the value as the judge wrote it and the time it names (None: none given)."""

    subject: str
    name: str
    value: str
    unit: str
    t: float | None

    @property
    def quantity(self) -> str:
        return quantity(self.name)

    @property
    def label(self) -> str:
        """`GPU 3 temperature`."""
        return f"{self.subject} {self.quantity}".strip()


@dataclass(frozen=True)
class NodeSummary:
    """One node's burn-in, from its record."""

    node: str
    outcome: str
    """The record's verdict on the run date: pass, fail, not_measured, waived, error."""
    asked_s: float | None = None
    achieved_s: float | None = None
    whole: bool = False
    """The judge found the duration achieved (its `burnin.duration` passed)."""
    failures: tuple[Failure, ...] = field(default_factory=tuple)
    """The failed measurements, earliest first (those without a time last)."""
    max_temperature_c: float | None = None
    tflops_drift_pct: float | None = None
    """The largest drift below the baseline any GPU's judge reported (% of its baseline)."""
    temperature_bound: float | None = None
    drift_bound: float | None = None
    message: str = ""

    @property
    def first(self) -> Failure | None:
        return self.failures[0] if self.failures else None


def _failure(m: Measurement) -> Failure:
    return Failure(m.subject, m.name, str(m.value), m.unit, failure_time(m.value))


def node_summary(record: CheckRecord, run_date: date | None = None) -> NodeSummary:
    """The burn-in of the record's node, as its measurements say."""
    measured = record.measured
    duration = next((m for m in measured if m.name == DURATION), None)
    failed = sorted(
        (_failure(m) for m in measured if m.outcome == "fail"),
        key=lambda f: (f.t is None, f.t or 0.0),
    )
    temps = [m for m in measured if m.name == TEMPERATURE]
    drifts = [m for m in measured if m.name == DRIFT and m.outcome in ("pass", "fail")]
    hottest = [v for v in (leading_number(m.value) for m in temps) if v is not None]
    drift = [v for v in (leading_number(m.value) for m in drifts) if v is not None]
    return NodeSummary(
        node=record.subject,
        outcome=effective_verdict(record, run_date),
        asked_s=_figure(duration.threshold) if duration else None,
        achieved_s=_figure(duration.value) if duration else None,
        whole=duration is not None and duration.outcome == "pass",
        failures=tuple(failed),
        max_temperature_c=max(hottest, default=None),
        tflops_drift_pct=max(drift, default=None),
        temperature_bound=next((_figure(m.threshold) for m in temps if m.threshold), None),
        drift_bound=next((_figure(m.threshold) for m in drifts if m.threshold), None),
        message=record.message,
    )


def burnin_summaries(
    records: Iterable[CheckRecord], run_date: date | None = None
) -> list[NodeSummary]:
    """One summary per `burnin` record judged (skipped ones left out), in record order."""
    return [
        node_summary(r, run_date)
        for r in records
        if r.check_id == CHECK_ID and r.kind == "node" and r.verdict != "skipped"
    ]


def clock(seconds: float | None) -> str:
    """`86400 s` as `24h00m00s`; "—" for None."""
    if seconds is None:
        return "—"
    h, rest = divmod(int(seconds), 3600)
    return f"{h}h{rest // 60:02d}m{rest % 60:02d}s"
