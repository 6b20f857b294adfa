"""The trends page: one self-contained HTML file (inline CSS and SVG, no script, no network)."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from pytest_hpcnet.redact import redact
from pytest_hpcnet.report.trends import History, Series

WIDTH, HEIGHT, PAD = 280, 64, 8
OTHERS_SHOWN = 16  # per figure, beside every marked subject
MAX_TABLE_ROWS = 200  # regressions listed in the table (all are marked in the plots)
MARK_COLOURS = {"regression": "#c62828", "increase": "#ef6c00", "reset": "#1565c0"}


def _y(value: float, low: float, high: float) -> float:
    span = high - low or 1.0
    return PAD + (HEIGHT - 2 * PAD) * (1 - (value - low) / span)


def scale(rows: list[Series]) -> tuple[float, float]:
    """One y range for every subject of a figure, so that noise looks like noise."""
    values = [p.shown for s in rows for p in s.points if p.shown is not None]
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    if rows[0].figure.counter:
        low = min(low, 0.0)
    return (low - 1, high + 1) if high == low else (low, high)


def sparkline(series: Series, run_ids: list[str], limits: tuple[float, float]) -> Markup:
    """One series as an inline SVG: a line per run, marked points coloured, a tooltip each."""
    shown = [p.shown for p in series.points]
    if all(v is None for v in shown):
        return Markup('<svg class="spark" width="0" height="0"></svg>')
    low, high = limits
    step = (WIDTH - 2 * PAD) / max(len(shown) - 1, 1)
    parts = [
        f'<svg class="spark" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-label="{escape(series.figure.label)} {escape(series.subject)}">'
    ]
    line: list[str] = []
    segments: list[list[str]] = []
    for index, value in enumerate(shown):
        if value is None:
            if line:
                segments.append(line)
            line = []
            continue
        line.append(f"{PAD + index * step:.1f},{_y(value, low, high):.1f}")
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
        tip = f"{run_ids[index]}: {point.shown:g} {series.unit}"
        if point.note:
            tip += f" ({point.note})"
        parts.append(
            f'<circle class="pt {point.mark}" data-run="{escape(run_ids[index])}" '
            f'cx="{PAD + index * step:.1f}" cy="{_y(point.shown, low, high):.1f}" r="{radius}" '
            f'fill="{colour}"><title>{escape(tip)}</title></circle>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("pytest_hpcnet", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = lambda v: "—" if v is None else f"{v:g}"
    return env


def render_trends(history: History, generated: datetime | None = None) -> str:
    """The page for a history (deterministic for a given history and time)."""
    run_ids = [r.run_id for r in history.runs]
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
                "cards": [(s, sparkline(s, run_ids, limits)) for s in marked + calm[:OTHERS_SHOWN]],
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
