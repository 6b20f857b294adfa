"""The burn-in's timelines for the evidence page: per node, an inline SVG of temperature, SM
clock, power and TFLOPS (and copy bandwidth where the samples carry it) over the run, with
each failed measurement marked at its first time.

One node's 8 GPUs are drawn as a band (min to max across its GPUs) with the median as a
line, and each GPU with a failed measurement as its own coloured line: eight lines of
nearly the same values are unreadable, and the band still shows a GPU that strays. Each
line keeps at most `MAX_POINTS` points: time is cut into `BINS` bins and each bin keeps its
lowest and highest value (a spike survives), so a 24-hour run at 30 s (2,880 samples a
GPU) costs as much as a short one. The samples are the run folder's `burnin/NODE.jsonl`,
read with the probe's own parser; the failures are the judge's measurements. No script:
every figure drawn is a number formatted here, every text escaped.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from pytest_hpcnet.probes.burnin import NodeLines, Sample, parse_lines
from pytest_hpcnet.report.burnin_summary import (
    CHECK_ID,
    Failure,
    NodeSummary,
    burnin_summaries,
    clock,
)
from pytest_hpcnet.report.records import CheckRecord

FOLDER = "burnin"
"""The run folder's burn-in evidence (`campaigns/burnin.EVIDENCE`)."""
BINS = 150
MAX_POINTS = 2 * BINS
"""At most this many points per line or band edge drawn."""
MAX_TIMELINES = 24
"""Nodes drawn: those that failed or were not measured first, then passing ones."""
MAX_LABELS = 6
"""Failure labels written above a node's panels (every marker keeps its tooltip)."""
MAX_MARKED_GPUS = 4
WIDTH, LEFT, RIGHT = 720, 64, 8
PANEL_H, GAP, AXIS_H, LABEL_H = 56, 8, 14, 12
MAX_FILE_BYTES = 64 << 20
"""A node's samples file read at most (24 h of 8 GPUs at 30 s is about 5 MB)."""
COLOURS = ("#c62828", "#1565c0", "#ef6c00", "#6a1b9a")
"""The lines of GPUs with a failed measurement, in order of their first failure."""
BAND, MEDIAN, MARKER = "#cfd8dc", "#455a64", "#c62828"
_GPU = re.compile(r"GPU (\d+)$")


@dataclass(frozen=True)
class Quantity:
    """One panel: a title, its unit and how to read it off the samples (time, value)."""

    title: str
    unit: str
    read: Callable[[Sample], Iterable[tuple[float, float | None]]]


def _field(name: str) -> Callable[[Sample], Iterable[tuple[float, float | None]]]:
    return lambda s: [(s.t, getattr(s, name))]


def _windows(name: str) -> Callable[[Sample], Iterable[tuple[float, float | None]]]:
    return lambda s: [(s.t, getattr(w, name, None)) for w in s.windows]


QUANTITIES: tuple[Quantity, ...] = (
    Quantity("temperature", "C", _field("temp")),
    Quantity("SM clock", "MHz", _field("sm")),
    Quantity("power", "W", _field("power")),
    Quantity("GEMM", "TFLOPS", _windows("tflops")),
    Quantity("copy", "GB/s", _windows("copy_gbps")),
)
"""The panels, each drawn where any sample carries it (copy bandwidth per window: newer
programs' samples)."""


def read_samples(run_dir: Path, node: str) -> NodeLines | None:
    """The node's samples kept in `<run>/burnin/NODE.jsonl`; None where there is no such
    file or the name could leave the folder (a name comes from the evidence)."""
    folder = run_dir / FOLDER
    if not node or "/" in node or "\\" in node or "\0" in node or node.startswith("."):
        return None
    path = folder / f"{node}.jsonl"
    try:
        if path.resolve().parent != folder.resolve() or not path.is_file():
            return None
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES)
    except OSError:
        return None
    return parse_lines(data.decode("utf-8", errors="replace"))


def envelope(
    points: Sequence[tuple[float, float]], start: float, end: float
) -> list[tuple[float, float]]:
    """`points` (time order) cut to at most `MAX_POINTS`: per time bin its lowest and
    highest point, in time order, so no spike is lost."""
    if len(points) <= MAX_POINTS:
        return list(points)
    bins: dict[int, list[tuple[float, float]]] = {}
    for point in points:
        bins.setdefault(_bin(point[0], start, end), []).append(point)
    out: list[tuple[float, float]] = []
    for index in sorted(bins):
        group = bins[index]
        low = min(group, key=lambda p: p[1])
        high = max(group, key=lambda p: p[1])
        out.extend(sorted({low, high}))
    return out


def band(
    series: Sequence[Sequence[tuple[float, float]]], start: float, end: float
) -> list[tuple[float, float, float, float]]:
    """Across GPUs, per sample time (or per bin past `BINS` times): (time, min, median, max)."""
    values: dict[float, list[float]] = {}
    for points in series:
        for t, v in points:
            values.setdefault(t, []).append(v)
    times = sorted(values)
    if len(times) > BINS:
        binned: dict[int, list[tuple[float, float]]] = {}
        for t in times:
            binned.setdefault(_bin(t, start, end), []).extend((t, v) for v in values[t])
        return [
            (
                statistics.fmean(t for t, _ in group),
                min(v for _, v in group),
                statistics.median(v for _, v in group),
                max(v for _, v in group),
            )
            for _, group in sorted(binned.items())
        ]
    return [(t, min(values[t]), statistics.median(values[t]), max(values[t])) for t in times]


def _bin(t: float, start: float, end: float) -> int:
    span = end - start or 1.0
    return min(BINS - 1, max(0, int((t - start) / span * BINS)))


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _tick(value: float) -> str:
    return f"{value:.4g}"


def gpu_of(subject: str) -> int | None:
    """`GPU 3` -> 3."""
    found = _GPU.match(subject.strip())
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class Scale:
    """Maps seconds and a panel's values onto the drawing."""

    end: float
    top: float
    low: float
    high: float

    def x(self, t: float) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * min(max(t / (self.end or 1.0), 0.0), 1.0)

    def y(self, value: float) -> float:
        span = self.high - self.low or 1.0
        return self.top + PANEL_H * (1 - (value - self.low) / span)

    def point(self, t: float, value: float) -> str:
        return f"{_num(self.x(t))},{_num(self.y(value))}"


def _series(lines: NodeLines, quantity: Quantity) -> dict[int, list[tuple[float, float]]]:
    out: dict[int, list[tuple[float, float]]] = {}
    for sample in sorted(lines.samples, key=lambda s: (s.gpu, s.t)):
        for t, value in quantity.read(sample):
            if isinstance(value, int | float) and value == value and abs(value) != float("inf"):
                out.setdefault(sample.gpu, []).append((t, float(value)))
    return out


def _marked_gpus(failures: Sequence[Failure]) -> dict[int, str]:
    """The GPUs drawn on their own, each with its colour (first failure first)."""
    gpus: dict[int, str] = {}
    for failure in failures:
        gpu = gpu_of(failure.subject)
        if gpu is not None and gpu not in gpus and len(gpus) < MAX_MARKED_GPUS:
            gpus[gpu] = COLOURS[len(gpus)]
    return gpus


def _labels(failures: Sequence[Failure]) -> list[tuple[float, str]]:
    """One label per (time, GPU): `GPU 2 temperature, slowdown at t=5.1 s (0h00m05s)`."""
    grouped: dict[tuple[float, str], list[str]] = {}
    for failure in failures:
        if failure.t is not None:
            grouped.setdefault((failure.t, failure.subject), []).append(failure.quantity)
    return [
        (t, f"{subject} {', '.join(names)} at t={_num(t)} s ({clock(t)})".strip())
        for (t, subject), names in sorted(grouped.items())
    ]


def timeline_svg(
    node: str, lines: NodeLines, failures: Sequence[Failure], duration_s: float | None = None
) -> Markup | None:
    """The node's timeline: one panel per quantity its samples carry, failures marked; None
    without a sample."""
    if not lines.samples:
        return None
    last = max([s.t for s in lines.samples] + [lines.end_t or 0.0])
    end = max(duration_s or 0.0, last, 1.0)
    panels = [(q, s) for q in QUANTITIES if (s := _series(lines, q))]
    labels = _labels(failures)
    shown = labels[:MAX_LABELS]
    strip = LABEL_H * (len(shown) + (len(labels) > MAX_LABELS)) + (4 if labels else 0)
    height = strip + len(panels) * (PANEL_H + GAP) + AXIS_H
    marked = _marked_gpus(failures)
    gpus = len({s.gpu for s in lines.samples})
    parts = [
        f'<svg class="burnin-timeline" width="100%" viewBox="0 0 {WIDTH} {height}" '
        f'preserveAspectRatio="xMinYMin meet" role="img" '
        f'aria-label="burn-in timeline of {escape(node)}" font-size="10" '
        f'font-family="sans-serif">'
    ]
    for index, (quantity, series) in enumerate(panels):
        top = strip + index * (PANEL_H + GAP)
        values = [v for points in series.values() for _, v in points]
        low, high = min(values), max(values)
        low, high = (low - 1, high + 1) if low == high else (low, high)
        scale = Scale(end, top, low, high)
        parts.append(_panel(quantity, series, scale, marked, gpus))
    bottom = strip + len(panels) * (PANEL_H + GAP)
    scale = Scale(end, strip, 0.0, 1.0)
    ruler = duration_s if duration_s and duration_s >= last * 0.9 else end
    for step in range(5):
        t = ruler * step / 4
        anchor = "start" if step == 0 else "end" if t >= end * 0.95 else "middle"
        parts.append(
            f'<text x="{_num(scale.x(t))}" y="{bottom + 6}" text-anchor="{anchor}" '
            f'fill="#546e7a">{escape(clock(t))}</text>'
        )
    for row, (t, text) in enumerate(shown):
        x = scale.x(t)
        anchor = "end" if x > WIDTH * 0.6 else "start"
        parts.append(
            f'<text class="failure-label" x="{_num(x)}" y="{LABEL_H * (row + 1) - 2}" '
            f'text-anchor="{anchor}" fill="{MARKER}">{escape(text)}</text>'
        )
    if len(labels) > MAX_LABELS:
        parts.append(
            f'<text x="{LEFT}" y="{LABEL_H * (len(shown) + 1) - 2}" fill="{MARKER}">'
            f"{escape(f'… and {len(labels) - MAX_LABELS} more (each marked; the table below)')}"
            "</text>"
        )
    for t, text in labels:
        x = _num(scale.x(t))
        parts.append(
            f'<line class="failure" data-t="{_num(t)}" x1="{x}" y1="{strip - 2}" x2="{x}" '
            f'y2="{bottom - GAP}" stroke="{MARKER}" stroke-width="1" stroke-dasharray="3 2">'
            f"<title>{escape(text)}</title></line>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _panel(
    quantity: Quantity,
    series: dict[int, list[tuple[float, float]]],
    scale: Scale,
    marked: dict[int, str],
    gpus: int,
) -> str:
    start, end = 0.0, scale.end
    right = WIDTH - RIGHT
    bottom = scale.top + PANEL_H
    parts = [
        f'<g class="panel" data-quantity="{escape(quantity.title)}">',
        f'<rect x="{LEFT}" y="{scale.top}" width="{right - LEFT}" height="{PANEL_H}" '
        f'fill="none" stroke="#b0bec5" stroke-width="0.5"/>',
        f'<text x="{LEFT - 3}" y="{_num(scale.top + 8)}" text-anchor="end">'
        f"{escape(_tick(scale.high))}</text>",
        f'<text x="{LEFT - 3}" y="{_num(bottom)}" text-anchor="end">'
        f"{escape(_tick(scale.low))}</text>",
        f'<text x="{LEFT - 3}" y="{_num(scale.top + PANEL_H / 2 + 3)}" text-anchor="end" '
        f'font-weight="bold">{escape(quantity.title)}</text>',
        f'<text x="{LEFT - 3}" y="{_num(scale.top + PANEL_H / 2 + 13)}" text-anchor="end" '
        f'fill="#546e7a">{escape(quantity.unit)}</text>',
    ]
    rows = band(list(series.values()), start, end)
    if len(series) > 1:
        edge = [scale.point(t, hi) for t, _, _, hi in rows]
        edge += [scale.point(t, lo) for t, lo, _, _ in reversed(rows)]
        parts.append(
            f'<polygon class="band" points="{" ".join(edge)}" fill="{BAND}" stroke="none">'
            f"<title>{escape(f'{quantity.title}: min to max of {gpus} GPUs')}</title></polygon>"
        )
    median = " ".join(scale.point(t, mid) for t, _, mid, _ in rows)
    parts.append(
        f'<polyline class="median" points="{median}" fill="none" stroke="{MEDIAN}" '
        f'stroke-width="1"/>'
    )
    for gpu, colour in marked.items():
        points = envelope(series.get(gpu, []), start, end)
        if points:
            drawn = " ".join(scale.point(t, v) for t, v in points)
            parts.append(
                f'<polyline class="gpu" data-gpu="{gpu}" points="{drawn}" fill="none" '
                f'stroke="{colour}" stroke-width="1.2"><title>GPU {gpu}</title></polyline>'
            )
    parts.append("</g>")
    return "".join(parts)


def legend(failures: Sequence[Failure], gpus: int) -> Markup:
    """What the lines are: the band, the median, each GPU drawn on its own (HTML)."""
    items = [
        f'<span class="swatch" style="background:{BAND}"></span>min to max of the {gpus} GPUs',
        f'<span class="swatch" style="background:{MEDIAN}"></span>median',
    ]
    items += [
        f'<span class="swatch" style="background:{colour}"></span>GPU {gpu}'
        for gpu, colour in _marked_gpus(failures).items()
    ]
    if any(f.t is not None for f in failures):
        items.append(f'<span style="color:{MARKER}">┆</span> first time of a failure')
    return Markup('<p class="legend">' + " · ".join(items) + "</p>")


def _order(summary: NodeSummary) -> int:
    return {"fail": 0, "not_measured": 1, "error": 2, "waived": 3}.get(summary.outcome, 4)


def burnin_section(
    run_dir: Path, records: Sequence[CheckRecord], run_date: date
) -> dict[str, Any] | None:
    """The evidence page's burn-in: every node's summary, the timelines of the first
    `MAX_TIMELINES` nodes (failed or not measured first), the nodes past them (`undrawn`) and
    those with no sample in the bundle (`missing`: none collected); None without a burn-in
    record."""
    summaries = burnin_summaries(records, run_date)
    if not summaries:
        return None
    nodes = []
    drawn = 0
    undrawn: list[str] = []
    missing: list[str] = []
    for summary in sorted(summaries, key=_order):
        entry: dict[str, Any] = {"summary": summary, "svg": None, "legend": None, "samples": 0}
        if drawn < MAX_TIMELINES:
            lines = read_samples(run_dir, summary.node)
            if lines is not None and lines.samples:
                entry["svg"] = timeline_svg(summary.node, lines, summary.failures, summary.asked_s)
                gpus = len({s.gpu for s in lines.samples})
                entry["legend"] = legend(summary.failures, gpus)
                entry["samples"] = len(lines.samples)
                drawn += 1
            else:
                missing.append(summary.node)
        elif summary.achieved_s:
            undrawn.append(summary.node)
        nodes.append(entry)
    asked = sorted({s.asked_s for s in summaries if s.asked_s is not None})
    return {
        "check_id": CHECK_ID,
        "nodes": nodes,
        "undrawn": undrawn,
        "missing": missing,
        "asked": asked,
    }
