"""A figure judged on both sides: an absolute floor, peer references, a physical ceiling.

`judge_figure` is how every judge with a floor and peers decides one figure:
- above its ceiling (the SKU's, link's or service's peak) or not finite, it is implausible:
  not measured, and never a peer reference (`peer_reference` leaves it out);
- the highest of its floor (a profile figure with its source) and its peer bounds (a
  fraction of the cluster median or the node's best) governs; below it fails;
- a peer bound needs enough independent peers (`min_peers`); with too few and no floor,
  the figure is measured but not judged: not measured, naming the key to set.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_hpcnet.requirements.verdict import (
    FAIL,
    NOT_MEASURED,
    PASS,
    Measurement,
    MeasurementOutcome,
    number,
)

PROFILE_FLOOR = "profile floor"
CLUSTER_MEDIAN = "cluster median"
NODE_BEST = "node best"
NODES_MEDIAN = "the nodes' median"


@dataclass(frozen=True)
class Bound:
    """One lower bound of a figure: its value, where it comes from and how it was set."""

    value: float
    source: str
    basis: str = PROFILE_FLOOR


@dataclass(frozen=True)
class Ceiling:
    """The most a figure can physically be, and where that figure is published."""

    value: float
    source: str


@dataclass(frozen=True)
class Figure:
    """A judged figure: its outcome, its measurement and the one-line reason."""

    outcome: MeasurementOutcome
    measurement: Measurement
    reason: str


def plausible(value: float | None, ceiling: Ceiling | None) -> bool:
    """A finite, non-negative number at or below its ceiling."""
    found = number(value)
    if found is None or found < 0:
        return False
    return ceiling is None or found <= ceiling.value


def peer_reference(values: Iterable[float | None], ceiling: Ceiling | None) -> list[float]:
    """The plausible figures among peers (an implausible one is no reference)."""
    return [float(v) for v in values if plausible(v, ceiling) and float(v) > 0]


def peer_bound(
    values: Iterable[float | None],
    ceiling: Ceiling | None,
    tolerance: float,
    min_peers: int,
    basis: str = CLUSTER_MEDIAN,
    best: bool = False,
) -> tuple[Bound | None, str]:
    """(1 - tolerance) x the median (or the best) of the plausible peer figures, with
    `min_peers` of them at least; else (None, why not)."""
    found = peer_reference(values, ceiling)
    if len(found) < min_peers:
        return None, f"{len(found)} peer figure(s), {min_peers} needed for a peer bound"
    reference = max(found) if best else statistics.median(found)
    bound = reference * (1 - tolerance)
    return Bound(bound, f"{1 - tolerance:.2f} x {basis} {reference:g}", basis), ""


def judge_figure(
    name: str,
    value: float | None,
    unit: str,
    bounds: Iterable[Bound | None],
    ceiling: Ceiling | None,
    subject: str = "",
    floor_key: str = "",
    unjudged: str = "",
) -> Figure:
    """One figure against the highest of its bounds and below its ceiling (module doc)."""
    given = [b for b in bounds if b is not None]
    top = max(given, key=lambda b: b.value) if given else None
    kw = {
        "subject": subject,
        "ceiling": ceiling.value if ceiling else None,
        "basis": top.basis if top else "",
    }
    bound = round(top.value, 4) if top else None
    source = top.source if top else floor_key
    label = f"{subject} {name}".strip()
    if number(value) is None:
        m = Measurement(name, value, unit, bound, ">=", source, outcome=NOT_MEASURED, **kw)
        return Figure(NOT_MEASURED, m, f"{label}: no figure read")
    if not plausible(value, ceiling):
        limit = f"above its ceiling {ceiling.value:g} {unit} ({ceiling.source})" if ceiling else ""
        why = limit if value >= 0 else "negative"
        m = Measurement(name, value, unit, bound, ">=", source, outcome=NOT_MEASURED, **kw)
        return Figure(NOT_MEASURED, m, f"{label} {value:g} {unit} is implausible ({why})")
    if top is None:
        m = Measurement(name, value, unit, None, None, source, outcome=NOT_MEASURED, **kw)
        why = unjudged or "no floor and too few peers"
        key = f"; set {floor_key}" if floor_key else ""
        return Figure(NOT_MEASURED, m, f"{label} {value:g} {unit} not judged ({why}{key})")
    outcome = PASS if value >= top.value else FAIL
    m = Measurement(name, value, unit, bound, ">=", source, outcome=outcome, **kw)
    if outcome == PASS:
        return Figure(PASS, m, "")
    return Figure(FAIL, m, f"{label} {value:g} {unit} below {top.value:g} ({top.source})")
