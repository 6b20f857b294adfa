"""Parsers of perftest `ib_write_bw` / `ib_write_lat` output, and their typed results.

`parse_bandwidth` and `parse_latency` read either side's output, any layout: a table, or
the bare number of `--output=bandwidth|latency`. The commands are built in `perftest`.

Units: perftest prints bandwidth in MB/sec (2^20 bytes/s) unless `--report_gbits`
is given, then in Gb/sec (10^9 bits/s). Every bandwidth in a result is Gb/s
(10^9 bits/s): MB/sec * 2^20 * 8 / 1e9. Latencies are microseconds.

Fail closed: a table that stops before the largest size asked (`expected_size`, see
`perftest.largest_size`), has no closing rule after its last row (perftest prints one
when a run ends) or holds a `nan`/`inf` cell in any row is an `error`, never a
measurement. An output that is not the one run its command asked (`expected`, from
`perftest.expected_run`: another test, message size or iteration count, a second table, a
tool error or a bare number beside the table, a negative or implausible cell, a last line
cut mid-number without its line end) is `not_measured`: never a pass, never a failure.
Digits are ASCII only (`float()` would read `１２３`). Never raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pytest_hpcnet.probes.perftest import ExpectedRun
from pytest_hpcnet.probes.perftest_table import (
    BW_COLUMNS,
    LAT_COLUMNS,
    PLAUSIBLE_MAX,
    PerftestHeader,
    Table,
    bare_number,
    clean_lines,
    cut_short,
    header_of,
    scan_table,
    snippet,
    summarize_warnings,
    unusable,
)
from pytest_hpcnet.probes.text import ends_mid_line, foreign_digits, strip_ansi

MB_PER_SEC_TO_GBPS = 2**20 * 8 / 1e9
"""One perftest MB/sec (2^20 bytes/s) in Gb/s (10^9 bits/s)."""

MAX_GBPS = 100_000.0
"""No link carries more (100 Tb/s): a bandwidth above it is a misread, not measured."""

UNIT_MB = "MB/sec"
UNIT_GB = "Gb/sec"


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class BandwidthRow:
    """One row of a bandwidth table, in Gb/s whatever the printed unit."""

    msg_size: int
    iterations: int
    peak_gbps: float
    avg_gbps: float
    msg_rate_mpps: float | None = None
    min_gbps: float | None = None


@dataclass(frozen=True)
class BandwidthResult:
    """An `ib_*_bw` run. Headline = the largest-size row; `error` set when unusable."""

    rows: tuple[BandwidthRow, ...] = ()
    avg_gbps: float | None = None
    peak_gbps: float | None = None  # None where not measured (duration mode prints 0.00)
    msg_size: int | None = None
    unit_printed: str | None = None  # "MB/sec" or "Gb/sec"
    header: PerftestHeader = field(default_factory=PerftestHeader)
    warnings: tuple[str, ...] = ()  # e.g. distinct "Conflicting CPU frequency" lines
    problems: tuple[str, ...] = ()
    error: str | None = None
    not_measured: str | None = None
    """Why the output is not the one run asked (another test, size or iteration count, a
    second table, a tool error after the table, a last line cut): never a pass, never a
    failure. Its figures are withheld (`avg_gbps` None)."""

    @property
    def ok(self) -> bool:
        return self.error is None and self.not_measured is None and self.avg_gbps is not None


@dataclass(frozen=True)
class LatencyRow:
    """One row of a latency table (microseconds); None where the layout lacks the column."""

    msg_size: int
    iterations: int
    t_min_us: float | None = None
    t_max_us: float | None = None
    t_typical_us: float | None = None
    t_avg_us: float | None = None
    t_stdev_us: float | None = None
    p99_us: float | None = None
    p999_us: float | None = None


@dataclass(frozen=True)
class LatencyResult:
    """An `ib_*_lat` run. Headline = the smallest-size row; `error` set when unusable."""

    rows: tuple[LatencyRow, ...] = ()
    t_avg_us: float | None = None  # t_avg, else t_typical on layouts without t_avg
    t_typical_us: float | None = None
    t_min_us: float | None = None
    t_max_us: float | None = None
    p99_us: float | None = None
    p999_us: float | None = None
    msg_size: int | None = None
    header: PerftestHeader = field(default_factory=PerftestHeader)
    warnings: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    error: str | None = None
    not_measured: str | None = None
    """As `BandwidthResult.not_measured`; `t_avg_us` is then None."""

    @property
    def ok(self) -> bool:
        return self.error is None and self.not_measured is None and self.t_avg_us is not None


# --------------------------------------------------------------------------- parsing


def _cut_mid_line(text: str) -> str | None:
    last = ends_mid_line(strip_ansi(text))
    if last is not None and any(c.isdigit() for c in last):
        return f"output ends mid-line ({last.strip()[:60]!r} has no line terminator: cut?)"
    return None


def run_mismatch(
    table: Table, header: PerftestHeader, expected: ExpectedRun | None, kind: str
) -> str | None:
    """Why a scanned table is not the one run `expected` asked (`kind`: "bw" or "lat"
    is the parser's own layout), or None. Exactly one run per output."""
    why: list[str] = []
    if table.tables > 1 or len(table.tests) > 1:
        why.append(f"{max(table.tables, len(table.tests))} runs in one output (one asked)")
    if table.errors_after:
        why.append(f"tool error after the table: {table.errors_after[0][:120]}")
    elif table.errors and (table.rows or table.implausible):
        why.append(f"tool error beside the table: {table.errors[0][:120]}")
    if table.stray:
        why.append(f"a bare number beside the table: {table.stray[0][:40]}")
    if table.implausible:
        why.append(f"negative or implausible value in row: {table.implausible[0][:120]}")
    sizes_seen = [r.msg_size for r in table.rows]
    if len(set(sizes_seen)) < len(sizes_seen):
        why.append("two different rows for one message size")
    line = table.header_line
    if kind == "bw" and ("t_" in line or "usec" in line):
        why.append("a latency table where bandwidth was asked")
    if kind == "lat" and "BW" in line:
        why.append("a bandwidth table where latency was asked")
    titles = list(dict.fromkeys([*([header.test] if header.test else []), *table.tests]))
    if expected is not None:
        if expected.test and any(t != expected.test for t in titles):
            shown = next(t for t in titles if t != expected.test)
            why.append(f"the header says {shown!r}, {expected.test!r} asked")
        if expected.kind != kind:
            why.append(f"a {kind} parser for a {expected.kind} run")
        sizes = sorted({r.msg_size for r in table.rows})
        if expected.size is None and any(s < 2 or s & (s - 1) for s in sizes):
            why.append(f"rows of {', '.join(map(str, sizes))} bytes: `-a` sizes are powers of 2")
        if expected.size is not None and any(s != expected.size for s in sizes):
            why.append(f"rows of {', '.join(map(str, sizes))} bytes, {expected.size} asked")
        if expected.largest is not None and any(s > expected.largest for s in sizes):
            why.append(f"a row larger than the {expected.largest} bytes asked")
        counts = sorted({r.iterations for r in table.rows})
        if expected.iterations is not None and any(n != expected.iterations for n in counts):
            shown = ", ".join(map(str, counts))
            why.append(f"{shown} iterations, {expected.iterations} asked")
    return "; ".join(why) if why else None


def _without_rows(
    result: type,
    header: PerftestHeader,
    warnings: tuple[str, ...],
    errors: list[str],
    problems: list[str],
    had_columns: bool,
    text: str,
):
    """The result of an output with no table row: the tool's own error, else unparseable."""
    if errors:
        return result(header=header, warnings=warnings, error="\n".join(errors))
    what = "header but no result rows" if had_columns else "no result table"
    return result(
        header=header,
        warnings=warnings,
        problems=tuple(problems),
        error=f"unparseable output: {what} ({snippet(text)})",
    )


_BW_DUPLICATE = "duplicate row for {size} bytes dropped (server and client outputs interleaved)"
_LAT_DUPLICATE = "duplicate row for {size} bytes dropped"


def _bandwidth_unit(table: Table) -> str:
    return UNIT_GB if "Gb/sec" in table.header_line else UNIT_MB


def _bandwidth_row(table: Table, values: dict[str, str], numbers: dict[str, float]) -> BandwidthRow:
    factor = 1.0 if _bandwidth_unit(table) == UNIT_GB else MB_PER_SEC_TO_GBPS
    return BandwidthRow(
        msg_size=int(values["#bytes"]),
        iterations=int(float(values.get("#iterations", "0"))),
        peak_gbps=(numbers.get("BW peak") or 0.0) * factor,
        avg_gbps=(numbers["BW average"] or 0.0) * factor if "BW average" in numbers else math.nan,
        msg_rate_mpps=numbers.get("MsgRate"),
        min_gbps=numbers["BW min"] * factor if numbers.get("BW min") is not None else None,
    )


def _latency_row(table: Table, values: dict[str, str], numbers: dict[str, float]) -> LatencyRow:
    fields = {_LAT_FIELDS[k]: v for k, v in numbers.items() if k in _LAT_FIELDS}
    return LatencyRow(
        msg_size=int(values["#bytes"]),
        iterations=int(float(values.get("#iterations", "0"))),
        **fields,
    )


def parse_bandwidth(
    text: str,
    bare_unit: str = UNIT_MB,
    expected_size: int | None = None,
    expected: ExpectedRun | None = None,
) -> BandwidthResult:
    """Parse `ib_write_bw` (any `ib_*_bw`) output of either side, any layout.

    `bare_unit` is the unit of an `--output=bandwidth` bare number ("Gb/sec" when the
    run had `--report_gbits`). `expected_size` is the largest message size asked
    (`perftest.largest_size`); a table that stops before it, or is not closed, is an
    `error`. `expected` (`perftest.expected_run`) is what the command asked: an output of
    another run, or more than one, is `not_measured` (see `run_mismatch`).
    """
    text = text if isinstance(text, str) else ""
    lines = clean_lines(text)
    header = header_of(lines)
    if odd := foreign_digits(text):
        return BandwidthResult(header=header, not_measured=odd)
    bare = bare_number(lines)
    if bare is not None:
        factor = 1.0 if bare_unit == UNIT_GB else MB_PER_SEC_TO_GBPS
        if unusable(bare):
            return BandwidthResult(error=f"unparseable output: bandwidth {bare!r}")
        if cut_line := _cut_mid_line(text):
            return BandwidthResult(header=header, not_measured=cut_line)
        if bare * factor > MAX_GBPS:
            return BandwidthResult(header=header, not_measured=f"implausible bandwidth {bare:g}")
        return BandwidthResult(avg_gbps=bare * factor, unit_printed=bare_unit, header=header)

    table = scan_table(lines, BW_COLUMNS, _bandwidth_row, _BW_DUPLICATE)
    rows, closed = table.rows, table.closed
    warnings, errors, problems = table.warnings, table.errors, table.problems
    columns, unit = table.columns, _bandwidth_unit(table) if table.columns is not None else None
    warn = summarize_warnings(warnings)

    def result(**found: Any) -> BandwidthResult:
        return BandwidthResult(
            rows=tuple(rows), unit_printed=unit, header=header, warnings=warn,
            problems=tuple(problems), **found,
        )  # fmt: skip

    if nan_error := table.non_finite_error():
        return result(error=nan_error)
    if columns is not None and (other := run_mismatch(table, header, expected, "bw")):
        top_size = max((r.msg_size for r in rows), default=None)
        return result(msg_size=top_size, not_measured=other)
    if not rows:
        return _without_rows(BandwidthResult, header, warn, errors, problems, bool(columns), text)
    error_text = "\n".join(errors) if errors else None

    top = max(rows, key=lambda r: r.msg_size)
    if cut_line := _cut_mid_line(text):
        return result(msg_size=top.msg_size, not_measured=cut_line)
    cut = cut_short([r.msg_size for r in rows], closed, expected_size)
    if cut:
        return result(msg_size=top.msg_size, error=cut)
    if top.avg_gbps > MAX_GBPS or top.peak_gbps > MAX_GBPS:
        return result(
            msg_size=top.msg_size,
            not_measured=f"implausible bandwidth avg={top.avg_gbps:g} peak={top.peak_gbps:g} "
            f"Gb/s at {top.msg_size} bytes (misread)",
        )
    if unusable(top.avg_gbps) or unusable(top.peak_gbps):
        return result(
            msg_size=top.msg_size,
            error=f"unparseable output: bandwidth avg={top.avg_gbps} peak={top.peak_gbps} "
            f"at {top.msg_size} bytes",
        )
    peak: float | None = top.peak_gbps
    if peak == 0.0 and top.avg_gbps > 0.0:
        peak = None
        problems.append("peak bandwidth printed as 0.00 (not measured in duration mode)")
    if error_text:
        problems.extend(f"tool message: {e}" for e in errors)
    return result(avg_gbps=top.avg_gbps, peak_gbps=peak, msg_size=top.msg_size)


_LAT_FIELDS = {
    "t_min": "t_min_us",
    "t_max": "t_max_us",
    "t_typical": "t_typical_us",
    "t_avg": "t_avg_us",
    "t_stdev": "t_stdev_us",
    "99% percentile": "p99_us",
    "99.9% percentile": "p999_us",
}


def parse_latency(
    text: str, expected_size: int | None = None, expected: ExpectedRun | None = None
) -> LatencyResult:
    """Parse `ib_write_lat` (any `ib_*_lat`) output: tables of any layout, or a bare number.

    The headline is the smallest message size (the latency figure of interest);
    all rows are kept. `expected_size` is the largest message size asked; a table that
    stops before it, or is not closed, is an `error`; `expected` as in `parse_bandwidth`.
    """
    text = text if isinstance(text, str) else ""
    lines = clean_lines(text)
    header = header_of(lines)
    if odd := foreign_digits(text):
        return LatencyResult(header=header, not_measured=odd)
    bare = bare_number(lines)
    if bare is not None:
        if unusable(bare) or bare == 0:
            return LatencyResult(error=f"unparseable output: latency {bare!r}")
        if cut_line := _cut_mid_line(text):
            return LatencyResult(header=header, not_measured=cut_line)
        if bare > PLAUSIBLE_MAX:
            return LatencyResult(header=header, not_measured=f"implausible latency {bare:g}")
        return LatencyResult(t_avg_us=bare, header=header)

    table = scan_table(lines, LAT_COLUMNS, _latency_row, _LAT_DUPLICATE)
    rows, closed, columns = table.rows, table.closed, table.columns
    warnings, errors, problems = table.warnings, table.errors, table.problems
    warn = summarize_warnings(warnings)

    def result(**found: Any) -> LatencyResult:
        return LatencyResult(
            rows=tuple(rows), header=header, warnings=warn, problems=tuple(problems), **found
        )

    if nan_error := table.non_finite_error():
        return result(error=nan_error)
    if columns is not None and (other := run_mismatch(table, header, expected, "lat")):
        top_size = max((r.msg_size for r in rows), default=None)
        return result(msg_size=top_size, not_measured=other)
    if not rows:
        return _without_rows(LatencyResult, header, warn, errors, problems, bool(columns), text)
    error_text = "\n".join(errors) if errors else None

    head = min(rows, key=lambda r: r.msg_size)
    if cut_line := _cut_mid_line(text):
        return result(msg_size=head.msg_size, not_measured=cut_line)
    cut = cut_short([r.msg_size for r in rows], closed, expected_size)
    if cut:
        return result(msg_size=head.msg_size, error=cut)
    avg = head.t_avg_us if head.t_avg_us is not None else head.t_typical_us
    if avg is not None and head.t_avg_us is None:
        problems.append("layout without t_avg: t_typical used as the average")
    if unusable(avg) or avg == 0:
        return result(
            msg_size=head.msg_size,
            error=f"unparseable output: latency {avg!r} at {head.msg_size} bytes",
        )
    if error_text:
        problems.extend(f"tool message: {e}" for e in errors)
    return result(
        t_avg_us=avg,
        t_typical_us=head.t_typical_us,
        t_min_us=head.t_min_us,
        t_max_us=head.t_max_us,
        p99_us=head.p99_us,
        p999_us=head.p999_us,
        msg_size=head.msg_size,
    )
