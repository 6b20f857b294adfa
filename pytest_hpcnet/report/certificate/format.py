"""How the certificate shows numbers, thresholds, margins and pair subjects."""

from __future__ import annotations

import re
from typing import Any

from pytest_hpcnet.report.evidence import Measurement
from pytest_hpcnet.requirements.verdict import number

number_of = number
"""A finite float, or None for anything else (bools, text, NaN): the judges' `number`."""


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


BYTE_UNITS = ("bytes", "byte", "B")
_BINARY = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20))
#: Units that are counted nouns, by their singular (`1 device`, `2 devices`).
_SINGULAR = {
    "bytes": "byte",
    "devices": "device",
    "GPUs": "GPU",
    "nodes": "node",
    "pairs": "pair",
    "errors": "error",
    "ports": "port",
    "packets": "packet",
    "flows": "flow",
    "links": "link",
    "ranks": "rank",
    "entries": "entry",
    "subjects": "subject",
    "records": "record",
    "checks": "check",
    "runs": "run",
}
SYMBOL = {">=": "≥", "<=": "≤", "==": "="}
"""How a comparison reads on a page."""


def _number_text(number: float) -> str:
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return f"{number:.4g}"


def counted(count: int, noun: str) -> str:
    """`1 device`, `2 devices`, `1 more record`: the noun's last word singular for one."""
    if count == 1:
        head, _, last = noun.rpartition(" ")
        noun = f"{head} {_SINGULAR.get(last, last)}".strip()
    return f"{count} {noun}"


def out_of_bound(measurement: Measurement) -> bool:
    """Whether the judge failed this measurement (its recorded outcome; never judged here)."""
    return measurement.outcome == "fail"


_TIMED = re.compile(r"(-?[0-9]+(?:\.[0-9]+)?)( at t=.*)", re.DOTALL)


def format_value(value: Any, unit: str = "") -> str:
    """A value for display: integers plainly, other numbers with 4 significant digits; bytes
    from 1 MiB up in binary units (`12 MiB`); a counted unit singular for one (`1 device`)."""
    if value is None:
        return "—"
    number = number_of(value)
    timed = _TIMED.fullmatch(value) if isinstance(value, str) and unit else None
    if timed:  # a failure at its time (`91.0 at t=5.1 s (...)`): the unit after the figure
        return f"{format_value(float(timed.group(1)), unit)}{timed.group(2)}"
    if number is None:
        return f"{value} {unit}".strip()
    if unit == "KiB" and abs(number) >= 1 << 10:
        number, unit = number * 1024, "bytes"
    if unit in BYTE_UNITS and abs(number) >= 1 << 20:
        name, size = next((n, s) for n, s in _BINARY if abs(number) >= s)
        return f"{_number_text(number / size)} {name}"
    if unit in _SINGULAR and number == 1:
        unit = _SINGULAR[unit]
    return f"{_number_text(number)} {unit}".strip()


def format_threshold(measurement: Measurement) -> str:
    """`≥ 180 Gb/s`, `= 9000 bytes`, `≥ 12 MiB`, `none` (`== 0` of a counted unit),
    `one of 4096, 8500`, `yes` / `no` for a truth value (never `= True`); empty where there
    is no threshold."""
    threshold, comparison = measurement.threshold, measurement.comparison
    if threshold is None or comparison is None:
        return ""
    if isinstance(threshold, list):
        allowed = ", ".join(_word(v) or format_value(v) for v in threshold)
        return f"one of {allowed}" + (f" {measurement.unit}" if measurement.unit else "")
    if comparison == "==" and _word(threshold):
        return _word(threshold)
    if comparison == "==" and number_of(threshold) == 0 and measurement.unit in _SINGULAR:
        return f"no {measurement.unit}"
    return f"{SYMBOL.get(comparison, comparison)} {format_value(threshold, measurement.unit)}"


def _word(value: Any) -> str:
    """`yes`, `no`, `none` for a bound that is a truth value or nothing; "" otherwise."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    return _WORDS.get(value.strip().lower(), "") if isinstance(value, str) else ""


#: Python's and YAML's words for truth values and nothing, as a bound reads on a page.
_WORDS = {"true": "yes", "false": "no", "none": "none", "null": "none"}


def format_margin(margin: float | None) -> str:
    """A margin as a signed percentage (no decimals from 100 % up), `—` where there is none."""
    if margin is None:
        return "—"
    return f"{margin * 100:+.0f} %" if abs(margin) >= 1 else f"{margin * 100:+.1f} %"


def pair_nodes(subject: str) -> tuple[str, str] | None:
    """`("a", "b")` for a pair subject `a->b`, else None."""
    if "->" not in subject:
        return None
    source, _, target = subject.partition("->")
    return source.strip(), target.strip()
