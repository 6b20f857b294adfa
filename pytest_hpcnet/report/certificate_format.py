"""How the certificate shows numbers, thresholds, margins and pair subjects."""

from __future__ import annotations

import math
from typing import Any

from pytest_hpcnet.report.evidence import Measurement


def number_of(value: Any) -> float | None:
    """A finite float, or None for anything else (bools, text, NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def headroom(measurement: Measurement) -> float | None:
    """How far a numeric value clears its threshold, as a fraction of the threshold
    (`(v - t) / t` for `>=`, `(t - v) / t` for `<=`); None where it does not apply."""
    value, threshold = number_of(measurement.value), number_of(measurement.threshold)
    if value is None or threshold is None or threshold == 0:
        return None
    if measurement.comparison == ">=":
        return (value - threshold) / abs(threshold)
    if measurement.comparison == "<=":
        return (threshold - value) / abs(threshold)
    return None


def format_value(value: Any, unit: str = "") -> str:
    """A value for display: integers plainly, other numbers with 4 significant digits."""
    if value is None:
        return "—"
    number = number_of(value)
    if number is None:
        text = str(value)
    elif number.is_integer() and abs(number) < 1e15:
        text = str(int(number))
    else:
        text = f"{number:.4g}"
    return f"{text} {unit}".strip()


def format_threshold(measurement: Measurement) -> str:
    """`>= 180 Gb/s`, `== 9000`, `in {a, b}`; empty where there is no threshold."""
    if measurement.threshold is None or measurement.comparison is None:
        return ""
    if isinstance(measurement.threshold, list):
        allowed = ", ".join(format_value(v) for v in measurement.threshold)
        return f"{measurement.comparison} {{{allowed}}}"
    return f"{measurement.comparison} {format_value(measurement.threshold, measurement.unit)}"


def format_margin(margin: float | None) -> str:
    """A margin as a signed percentage, `—` where there is none."""
    return "—" if margin is None else f"{margin * 100:+.1f} %"


def pair_nodes(subject: str) -> tuple[str, str] | None:
    """`("a", "b")` for a pair subject `a->b`, else None."""
    if "->" not in subject:
        return None
    source, _, target = subject.partition("->")
    return source.strip(), target.strip()
