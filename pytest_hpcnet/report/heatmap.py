"""The pair matrix of a pair check as an inline SVG heat map (rows: source, columns: target)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date
from typing import Any

from markupsafe import Markup, escape

from pytest_hpcnet.report.certificate.format import (
    format_threshold,
    format_value,
    headroom,
    number_of,
    pair_nodes,
)
from pytest_hpcnet.report.evidence import CheckRecord, Measurement, effective_verdict

MAX_HEATMAP_NODES = 16  # beyond this a matrix is illegible: the worst pairs are listed instead
MAX_WORST_PAIRS = 20
NEAR_BOUND = 0.05  # a pass within 5 % of its threshold is drawn pale green

#: (css colour, legend text) per cell state; the legend under each matrix lists them.
COLOURS: dict[str, tuple[str, str]] = {
    "pass": ("#2e9e4f", "pass"),
    "near": ("#a8dbb5", "pass, within 5 % of the threshold"),
    "fail": ("#d0303f", "fail"),
    "error": ("#e39a2d", "not judged (error)"),
    "not_measured": ("#e39a2d", "not measured"),
    "waived": ("#8a7fe0", "failed, waived"),
    "none": ("#e5e5e5", "no record (pair not probed)"),
}


def cell_state(measurement: Measurement, verdict: str) -> str:
    """The colour key of a cell: the verdict decides pass/fail; headroom only tells a pass
    that barely clears a `>=`/`<=` bound. An exact match (MTU 8500 == 8500) is a pass."""
    if verdict in ("fail", "error", "waived", "not_measured"):
        return verdict
    if verdict != "pass":
        return "none"
    margin = headroom(measurement)
    exact = number_of(measurement.value) == number_of(measurement.threshold)
    return "near" if margin is not None and margin < NEAR_BOUND and not exact else "pass"


def legend_html() -> Markup:
    """The colour legend of the heat maps (HTML, escaped)."""
    items = "".join(
        f'<span class="swatch" style="background:{colour}"></span>{escape(text)} '
        for colour, text in COLOURS.values()
    )
    return Markup(f'<p class="legend">{items}</p>')


def worst_pairs(
    pairs: Sequence[CheckRecord], metric: str, run_date: date, limit: int = MAX_WORST_PAIRS
) -> list[dict[str, Any]]:
    """The pairs with the least headroom on `metric` (failing ones first), for a cluster too
    large for a legible matrix."""
    rows = []
    for record in pairs:
        measurement = next((m for m in record.measured if m.name == metric), None)
        if measurement is None or number_of(measurement.value) is None:
            continue
        verdict = effective_verdict(record, run_date)
        margin = headroom(measurement)
        rows.append(
            {
                "subject": record.subject.replace("->", " → "),
                "value": format_value(measurement.value, measurement.unit),
                "threshold": format_threshold(measurement),
                "margin": margin,
                "verdict": verdict,
                "key": (verdict == "pass", margin if margin is not None else 0.0, record.subject),
            }
        )
    rows.sort(key=lambda row: row["key"])
    return [{k: v for k, v in row.items() if k != "key"} for row in rows[:limit]]


def headline_metric(records: Sequence[CheckRecord]) -> str | None:
    names = [m.name for r in records for m in r.measured if number_of(m.value) is not None]
    thresholded = [
        m.name
        for r in records
        for m in r.measured
        if number_of(m.value) is not None and m.comparison in (">=", "<=")
    ]
    return (thresholded or names or [None])[0]


def heatmap_svg(
    check_id: str,
    records: Sequence[CheckRecord],
    node_order: Sequence[str],
    suspects: Iterable[str],
    run_date: date,
) -> Markup | None:
    """An inline SVG matrix of one pair check (rows: source, columns: target).

    Cell colour follows the verdict (`cell_state`, `COLOURS`); suspect nodes are labelled
    in red with a marker. None where no pair has a number.
    """
    pairs = [r for r in records if r.check_id == check_id and r.kind == "pair"]
    metric = headline_metric(pairs)
    if metric is None:
        return None
    cells: dict[tuple[str, str], tuple[Measurement, str]] = {}
    for record in pairs:
        ends = pair_nodes(record.subject)
        measurement = next((m for m in record.measured if m.name == metric), None)
        if ends is None or measurement is None or number_of(measurement.value) is None:
            continue
        cells[ends] = (measurement, effective_verdict(record, run_date))
    if not cells:
        return None
    seen = {n for pair in cells for n in pair}
    names = [n for n in node_order if n in seen] + sorted(seen - set(node_order))
    suspect_set = set(suspects)
    size = 28  # callers draw at most MAX_HEATMAP_NODES: every cell labelled
    label_width = 8 + 7 * max(len(n) + 2 for n in names)
    left, top = label_width, label_width
    width = left + size * len(names) + label_width // 2 + 10
    height = top + size * len(names) + 10
    font = f' style="font-size:{min(9, size - 1)}px"'
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="heatmap" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'aria-label="{escape(check_id)} {escape(metric)} matrix">'
    ]
    for index, name in enumerate(names):
        mark = "⚠ " if name in suspect_set else ""
        css = "label suspect" if name in suspect_set else "label"
        y = top + index * size + size / 2 + 4
        x = left + index * size + size / 2
        parts.append(
            f'<text class="{css}"{font} x="{left - 6}" y="{y:.1f}" text-anchor="end">'
            f"{escape(mark + name)}</text>"
        )
        parts.append(
            f'<text class="{css}"{font} x="{x:.1f}" y="{top - 6}" text-anchor="start" '
            f'transform="rotate(-60 {x:.1f} {top - 6})">{escape(mark + name)}</text>'
        )
    for row, source in enumerate(names):
        for col, target in enumerate(names):
            x, y = left + col * size, top + row * size
            entry = cells.get((source, target))
            if entry is None and source == target:  # a node with itself: never a pair
                fill, title, text, stroke = "#ffffff", f"{source} (itself)", "", "#e5e5e5"
            elif entry is None:
                fill, title, text = COLOURS["none"][0], f"{source}->{target}: no record", ""
                stroke = "#ffffff"
            else:
                measurement, verdict = entry
                value = number_of(measurement.value) or 0.0
                fill = COLOURS[cell_state(measurement, verdict)][0]
                stroke = "#111111" if verdict in ("fail", "error") else "#ffffff"
                title = (
                    f"{source}->{target}: {format_value(measurement.value, measurement.unit)}"
                    f" ({verdict})"
                )
                text = format_value(value)
            parts.append(
                f'<g><title>{escape(title)}</title><rect x="{x}" y="{y}" width="{size}" '
                f'height="{size}" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>'
            )
            if text:
                parts.append(
                    f'<text class="cell" x="{x + size / 2:.1f}" y="{y + size / 2 + 3:.1f}" '
                    f'text-anchor="middle">{escape(text)}</text>'
                )
            parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))
