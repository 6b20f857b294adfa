"""Parsers of perftest `ib_write_bw` / `ib_write_lat` output, and their typed results.

`parse_bandwidth` and `parse_latency` read either side's output, any layout: a table, or
the bare number of `--output=bandwidth|latency`. The commands are built in `perftest`.

Units: perftest prints bandwidth in MB/sec (2^20 bytes/s) unless `--report_gbits`
is given, then in Gb/sec (10^9 bits/s). Every bandwidth in a result is Gb/s
(10^9 bits/s): MB/sec * 2^20 * 8 / 1e9. Latencies are microseconds.

Fail closed: a table that stops before the largest size asked (`expected_size`, see
`perftest.largest_size`), has no closing rule after its last row (perftest prints one
when a run ends) or holds a `nan`/`inf` cell in any row is an `error`, never a
measurement. Never raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pytest_hpcnet.probes.perftest_table import (
    BW_COLUMNS,
    LAT_COLUMNS,
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

MB_PER_SEC_TO_GBPS = 2**20 * 8 / 1e9
"""One perftest MB/sec (2^20 bytes/s) in Gb/s (10^9 bits/s)."""

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

    @property
    def ok(self) -> bool:
        return self.error is None and self.avg_gbps is not None


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

    @property
    def ok(self) -> bool:
        return self.error is None and self.t_avg_us is not None


# --------------------------------------------------------------------------- parsing


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
    text: str, bare_unit: str = UNIT_MB, expected_size: int | None = None
) -> BandwidthResult:
    """Parse `ib_write_bw` (any `ib_*_bw`) output of either side, any layout.

    `bare_unit` is the unit of an `--output=bandwidth` bare number ("Gb/sec" when the
    run had `--report_gbits`). `expected_size` is the largest message size asked
    (`perftest.largest_size`); a table that stops before it, or is not closed, is an
    `error`.
    """
    lines = clean_lines(text)
    header = header_of(lines)
    bare = bare_number(lines)
    if bare is not None:
        factor = 1.0 if bare_unit == UNIT_GB else MB_PER_SEC_TO_GBPS
        if unusable(bare):
            return BandwidthResult(error=f"unparseable output: bandwidth {bare!r}")
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
    if not rows:
        return _without_rows(BandwidthResult, header, warn, errors, problems, bool(columns), text)
    error_text = "\n".join(errors) if errors else None

    top = max(rows, key=lambda r: r.msg_size)
    cut = cut_short([r.msg_size for r in rows], closed, expected_size)
    if cut:
        return result(msg_size=top.msg_size, error=cut)
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


def parse_latency(text: str, expected_size: int | None = None) -> LatencyResult:
    """Parse `ib_write_lat` (any `ib_*_lat`) output: tables of any layout, or a bare number.

    The headline is the smallest message size (the latency figure of interest);
    all rows are kept. `expected_size` is the largest message size asked; a table that
    stops before it, or is not closed, is an `error`.
    """
    lines = clean_lines(text)
    header = header_of(lines)
    bare = bare_number(lines)
    if bare is not None:
        if unusable(bare) or bare == 0:
            return LatencyResult(error=f"unparseable output: latency {bare!r}")
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
    if not rows:
        return _without_rows(LatencyResult, header, warn, errors, problems, bool(columns), text)
    error_text = "\n".join(errors) if errors else None

    head = min(rows, key=lambda r: r.msg_size)
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
