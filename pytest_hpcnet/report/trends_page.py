"""The trends page: one self-contained HTML file (inline CSS and SVG, no script, no network)."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from jinja2 import Environment
from markupsafe import Markup, escape

from pytest_hpcnet.redact import redact
from pytest_hpcnet.report.certificate.format import SYMBOL, counted
from pytest_hpcnet.report.templates import page_environment
from pytest_hpcnet.report.trends import History, Series

WIDTH, HEIGHT, PAD = 300, 96, 6
LEFT, BOTTOM = 42, 16  # room for the value axis' labels and the run dates
OTHERS_SHOWN = 16  # per figure, beside every marked subject
MAX_TABLE_ROWS = 200  # regressions listed in the table (all are marked in the plots)
MARK_COLOURS = {"regression": "#c62828", "increase": "#ef6c00", "reset": "#1565c0"}


def _y(value: float, low: float, high: float) -> float:
    span = high - low or 1.0
    return PAD + (HEIGHT - BOTTOM - 2 * PAD) * (1 - (value - low) / span)


def threshold_of(series: Series) -> float | None:
    """The bound a level is judged against (none for counters, which show increases)."""
    return None if series.figure.counter else series.threshold


def scale(rows: list[Series]) -> tuple[float, float]:
    """One y range for every subject of a figure, so that noise looks like noise; it takes
    in the threshold, so that the line is on the plot."""
    values = [p.shown for s in rows for p in s.points if p.shown is not None]
    values += [t for t in (threshold_of(s) for s in rows) if t is not None]
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    if rows[0].figure.counter:
        low = min(low, 0.0)
    return (low - 1, high + 1) if high == low else (low, high)


def _tick(value: float) -> str:
    return f"{value:.4g}"


def sparkline(
    series: Series, run_ids: list[str], limits: tuple[float, float], dates: list[str] | None = None
) -> Markup:
    """One series as an inline SVG plot: a value axis with its range, the run dates under
    the time axis, the threshold as a dashed line, a line through the runs, marked points
    coloured, a tooltip each. A single run is no plot: its value is given as text."""
    shown = [p.shown for p in series.points]
    if all(v is None for v in shown) or len(shown) < 2:
        return Markup('<svg class="spark" width="0" height="0"></svg>')
    dates = dates or run_ids
    low, high = limits
    right = WIDTH - PAD
    step = (right - LEFT) / max(len(shown) - 1, 1)
    base = HEIGHT - BOTTOM
    unit = escape(series.unit)
    parts = [
        f'<svg class="spark" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-label="{escape(series.figure.label)} {escape(series.subject)}">',
        f'<line class="axis" x1="{LEFT}" y1="{PAD}" x2="{LEFT}" y2="{base}" stroke="#90a4ae"/>',
        f'<line class="axis" x1="{LEFT}" y1="{base}" x2="{right}" y2="{base}" stroke="#90a4ae"/>',
        f'<text class="tick" x="{LEFT - 3}" y="{_y(high, low, high) + 3:.1f}" '
        f'text-anchor="end">{escape(_tick(high))}</text>',
        f'<text class="tick" x="{LEFT - 3}" y="{_y(low, low, high) + 3:.1f}" '
        f'text-anchor="end">{escape(_tick(low))}</text>',
        f'<text class="tick unit" x="{LEFT - 3}" y="{(PAD + base) / 2 + 3:.1f}" '
        f'text-anchor="end">{unit}</text>',
        f'<text class="tick date" x="{LEFT}" y="{HEIGHT - 3}" text-anchor="start">'
        f"{escape(dates[0])}</text>",
        f'<text class="tick date" x="{right}" y="{HEIGHT - 3}" text-anchor="end">'
        f"{escape(dates[-1])}</text>",
    ]
    bound = threshold_of(series)
    if bound is not None:
        y = _y(bound, low, high)
        label = f"{SYMBOL.get(series.comparison or '', '')} {_tick(bound)}".strip()
        parts.append(
            f'<line class="threshold" x1="{LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" '
            f'stroke="#c62828" stroke-dasharray="4 3"><title>threshold {escape(label)} '
            f"{unit}</title></line>"
            f'<text class="tick threshold" x="{right}" y="{y - 2:.1f}" text-anchor="end" '
            f'fill="#c62828">{escape(label)}</text>'
        )
    line: list[str] = []
    segments: list[list[str]] = []
    for index, value in enumerate(shown):
        if value is None:
            if line:
                segments.append(line)
            line = []
            continue
        line.append(f"{LEFT + index * step:.1f},{_y(value, low, high):.1f}")
    if line:
        segments.append(line)
    for segment in segments:
        points = " ".join(segment)
        parts.append(
            f'<polyline fill="none" stroke="#607d8b" stroke-width="1.5" points="{points}"/>'
        )
    for index, point in enumerate(series.points):
        if point.shown is None:
            continue
        colour = MARK_COLOURS.get(point.mark, "#37474f")
        radius = 4.5 if point.mark else 2.5
        tip = f"{run_ids[index]} ({dates[index]}): {point.shown:g} {series.unit}"
        if point.note:
            tip += f" ({point.note})"
        parts.append(
            f'<circle class="pt {point.mark}" data-run="{escape(run_ids[index])}" '
            f'cx="{LEFT + index * step:.1f}" cy="{_y(point.shown, low, high):.1f}" r="{radius}" '
            f'fill="{colour}"><title>{escape(tip)}</title></circle>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _bound_text(series: Series) -> str:
    """`≥ 160 Gbit/s`: a series' threshold as the table shows it; "" without one."""
    bound = threshold_of(series)
    if bound is None:
        return ""
    return f"{SYMBOL.get(series.comparison or '', '')} {bound:g} {series.unit}".strip()


def _environment() -> Environment:
    return page_environment(
        {
            "num": lambda v: "—" if v is None else f"{v:g}",
            "seconds": lambda v: "—" if v is None else f"{v:.1f} s",
            "count": counted,
            "bound": _bound_text,
        }
    )


def render_trends(history: History, generated: datetime | None = None) -> str:
    """The page for a history (deterministic for a given history and time)."""
    run_ids = [r.run_id for r in history.runs]
    dates = [f"{r.started_at:%m-%d}" for r in history.runs]
    figures = []
    for figure in dict.fromkeys(s.figure for s in history.series):
        rows = [s for s in history.series if s.figure == figure]
        marked = [s for s in rows if s.marked]
        calm = [s for s in rows if not s.marked]
        limits = scale(rows)
        figures.append(
            {
                "figure": figure,
                "unit": rows[0].unit,
                "cards": [
                    (s, sparkline(s, run_ids, limits, dates)) for s in marked + calm[:OTHERS_SHOWN]
                ],
                "more": [s.subject for s in calm[OTHERS_SHOWN:]],
            }
        )
    moment = (generated or datetime.now(timezone.utc)).astimezone(timezone.utc)
    html = (
        _environment()
        .get_template("trends.html.j2")
        .render(
            history=history,
            figures=figures,
            regressions=history.regressions(),
            generated=f"{moment:%Y-%m-%d %H:%M:%S} UTC",
            colours=MARK_COLOURS,
            max_rows=MAX_TABLE_ROWS,
        )
    )
    return redact(html)


def write_trends(history: History, out: str | os.PathLike[str]) -> Path:
    """Write the page; returns its path."""
    path = Path(out)
    path.write_text(render_trends(history), encoding="utf-8")
    return path
