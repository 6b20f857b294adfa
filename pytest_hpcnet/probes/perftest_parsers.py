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
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_hpcnet.probes.text import strip_ansi

MB_PER_SEC_TO_GBPS = 2**20 * 8 / 1e9
"""One perftest MB/sec (2^20 bytes/s) in Gb/s (10^9 bits/s)."""

UNIT_MB = "MB/sec"
UNIT_GB = "Gb/sec"


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PerftestHeader:
    """Facts from perftest's header block (None where not printed)."""

    test: str | None = None  # "RDMA_Write BW Test"
    device: str | None = None
    link_type: str | None = None  # "IB" / "Ethernet"
    transport: str | None = None  # "Transport type"
    connection: str | None = None  # "RC", "DC", ...
    qps: int | None = None
    mtu: int | None = None  # bytes
    gid_index: int | None = None
    rdma_cm: bool | None = None
    data_exchange: str | None = None


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

_HEADER_KEYS = {
    "device": "device",
    "link type": "link_type",
    "transport type": "transport",
    "connection type": "connection",
    "number of qps": "qps",
    "mtu": "mtu",
    "gid index": "gid_index",
    "rdma_cm qps": "rdma_cm",
    "data ex. method": "data_exchange",
}
_PAIR_RE = re.compile(r"([A-Za-z][\w\-*. ]*?)\s*:\s*(\S+)")
_TEST_RE = re.compile(r"^\s*(\S.*\b(?:BW|Latency) Test)\s*$")
_WARNING_RE = re.compile(r"Conflicting CPU frequency|CPU Frequency is not max", re.I)
_ERROR_RE = re.compile(
    r"couldn'?t|could not|unable to|failed|failure|\berror\b|not found|no .*devices? found|"
    r"did not detect|if device exists|cannot|can't|invalid|unsupported|not supported|"
    r"timed out|refused|unrecognized option|usage:",
    re.I,
)
_NUMBER_RE = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$|^[-+]?(?:nan|inf)$", re.I)
_BW_COL_RE = re.compile(r"#bytes|#iterations|BW peak|BW average|MsgRate|BW min")
_LAT_COL_RE = re.compile(r"#bytes|#iterations|t_\w+?(?=\[)|99\.9% percentile|99% percentile")
_GID_LINE_RE = re.compile(r"^\s*GID:")
_RULE_RE = re.compile(r"^\s*[-*]{5,}\s*$|^\s*\*\s.*\*\s*$")
_CLOSING_RE = re.compile(r"^\s*-{5,}\s*$")


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
        error=f"unparseable output: {what} ({_snippet(text)})",
    )


def _clean_lines(text: str) -> list[str]:
    return strip_ansi(text).replace("\r", "").expandtabs(8).splitlines()


def _cut_short(sizes: list[int], closed: bool, expected_size: int | None) -> str | None:
    """Why a table is not a whole run (it stops before the size asked, or is not closed)."""
    top = max(sizes)
    why = []
    if expected_size is not None and top < expected_size:
        why.append(f"table ends at {top} bytes of {expected_size} asked")
    if not closed:
        why.append(f"no closing rule after the {top}-byte row")
    return "; ".join(why) + " (run cut short?)" if why else None


def _parse_header(lines: list[str]) -> PerftestHeader:
    facts: dict[str, object] = {}
    for line in lines:
        if "#bytes" in line:
            break
        m = _TEST_RE.match(line)
        if m and "test" not in facts:
            facts["test"] = m.group(1).strip()
            continue
        if "address" in line or _GID_LINE_RE.match(line):
            continue
        for key, value in _PAIR_RE.findall(line):
            name = _HEADER_KEYS.get(key.strip().lower())
            if name is None or name in facts:
                continue
            if name in ("qps", "gid_index", "mtu"):
                digits = re.match(r"\d+", value)
                if digits:
                    facts[name] = int(digits.group())
            elif name == "rdma_cm":
                facts[name] = value.upper() == "ON"
            else:
                facts[name] = value
    return PerftestHeader(**facts)  # type: ignore[arg-type]


def _float(token: str) -> float | None:
    if not _NUMBER_RE.match(token):
        return None
    return float(token)


def _classify_other(line: str, warnings: list[str], errors: list[str]) -> None:
    stripped = line.strip()
    if not stripped or _RULE_RE.match(line):
        return
    if _WARNING_RE.search(stripped):
        warnings.append(stripped)
    elif _ERROR_RE.search(stripped):
        errors.append(stripped)


def _summarize_warnings(lines: list[str]) -> tuple[str, ...]:
    """Warning lines condensed: repeated CPU-frequency lines become one entry with a count."""
    cpu = [ln for ln in lines if "CPU Frequency" in ln or "CPU frequency" in ln]
    others = [ln for ln in dict.fromkeys(lines) if ln not in cpu]
    summary = list(others)
    if cpu:
        summary.insert(0, f"CPU frequency not at max ({len(cpu)} warning lines), e.g.: {cpu[0]}")
    return tuple(summary)


def _bare_number(lines: list[str]) -> float | None:
    """The value of an `--output=bandwidth|latency` run: one bare number, maybe warnings."""
    meaningful = [ln.strip() for ln in lines if ln.strip() and not _WARNING_RE.search(ln)]
    if len(meaningful) == 1 and _NUMBER_RE.match(meaningful[0]):
        return float(meaningful[0])
    return None


def _unusable(value: float | None) -> bool:
    return value is None or math.isnan(value) or math.isinf(value) or value < 0


def _snippet(text: str) -> str:
    flat = " ".join((text or "").split())
    return flat[:120] + ("..." if len(flat) > 120 else "") if flat else "empty output"


@dataclass
class _Table:
    """What a scan of perftest output found: its result rows and everything else."""

    rows: list = field(default_factory=list)
    columns: list[str] | None = None  # of the last `#bytes` header line
    header_line: str = ""
    closed: bool = False  # a closing rule after the last row
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    non_finite: list[str] = field(default_factory=list)  # rows with a nan/inf cell

    def non_finite_error(self) -> str | None:
        """The error of a table with a `nan`/`inf` cell: never a measurement."""
        if not self.non_finite:
            return None
        more = f" (+{len(self.non_finite) - 1} more)" if len(self.non_finite) > 1 else ""
        return f"unparseable output: non-finite value in row: {self.non_finite[0]}{more}"


def _scan_table(
    lines: list[str],
    column_re: re.Pattern[str],
    make_row: Callable[[_Table, dict[str, str], dict[str, Any]], Any],
    duplicate: str,
) -> _Table:
    """Scan the lines of a table layout: each data line with as many tokens as the header
    has columns becomes a row (`make_row(table, tokens by column, numbers by column)`); an
    unreadable, non-finite (`nan`, `inf`: also kept in `non_finite`), repeated (`duplicate`,
    formatted with `size`) or misshapen one is a problem;
    any other line is a tool warning, error or nothing (`_classify_other`)."""
    table = _Table()
    for line in lines:
        if "#bytes" in line:
            table.columns = column_re.findall(line)
            table.header_line = line
            continue
        tokens = line.split()
        if table.rows and _CLOSING_RE.match(line):
            table.closed = True
        data = bool(table.columns and tokens and _float(tokens[0]) is not None)
        if data:
            table.closed = False
        if data and not tokens[0].isdigit():  # #bytes as nan, inf, -1, 1e300: no size
            table.problems.append(f"unreadable row: {line.strip()}")
            if not math.isfinite(_float(tokens[0]) or 0.0):
                table.non_finite.append(line.strip())
            continue
        if data and len(tokens) == len(table.columns or ()):
            values = dict(zip(table.columns or (), tokens, strict=True))
            numbers = {k: _float(v) for k, v in values.items()}
            if any(v is None for v in numbers.values()):
                table.problems.append(f"unreadable row: {line.strip()}")
                continue
            if not all(math.isfinite(v) for v in numbers.values() if v is not None):
                table.problems.append(f"non-finite value in row: {line.strip()}")
                table.non_finite.append(line.strip())
                continue
            row = make_row(table, values, numbers)
            if row in table.rows:
                table.problems.append(duplicate.format(size=row.msg_size))
                continue
            table.rows.append(row)
            continue
        if data:
            table.problems.append(f"row with unexpected columns: {line.strip()}")
            continue
        _classify_other(line, table.warnings, table.errors)
    return table


_BW_DUPLICATE = "duplicate row for {size} bytes dropped (server and client outputs interleaved)"
_LAT_DUPLICATE = "duplicate row for {size} bytes dropped"


def _bandwidth_unit(table: _Table) -> str:
    return UNIT_GB if "Gb/sec" in table.header_line else UNIT_MB


def _bandwidth_row(
    table: _Table, values: dict[str, str], numbers: dict[str, float]
) -> BandwidthRow:
    factor = 1.0 if _bandwidth_unit(table) == UNIT_GB else MB_PER_SEC_TO_GBPS
    return BandwidthRow(
        msg_size=int(values["#bytes"]),
        iterations=int(float(values.get("#iterations", "0"))),
        peak_gbps=(numbers.get("BW peak") or 0.0) * factor,
        avg_gbps=(numbers["BW average"] or 0.0) * factor if "BW average" in numbers else math.nan,
        msg_rate_mpps=numbers.get("MsgRate"),
        min_gbps=numbers["BW min"] * factor if numbers.get("BW min") is not None else None,
    )


def _latency_row(table: _Table, values: dict[str, str], numbers: dict[str, float]) -> LatencyRow:
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
    lines = _clean_lines(text)
    header = _parse_header(lines)
    bare = _bare_number(lines)
    if bare is not None:
        factor = 1.0 if bare_unit == UNIT_GB else MB_PER_SEC_TO_GBPS
        if _unusable(bare):
            return BandwidthResult(error=f"unparseable output: bandwidth {bare!r}")
        return BandwidthResult(avg_gbps=bare * factor, unit_printed=bare_unit, header=header)

    table = _scan_table(lines, _BW_COL_RE, _bandwidth_row, _BW_DUPLICATE)
    rows, closed = table.rows, table.closed
    warnings, errors, problems = table.warnings, table.errors, table.problems
    columns, unit = table.columns, _bandwidth_unit(table) if table.columns is not None else None
    warn = _summarize_warnings(warnings)
    if nan_error := table.non_finite_error():
        return BandwidthResult(
            rows=tuple(rows),
            unit_printed=unit,
            header=header,
            warnings=warn,
            problems=tuple(problems),
            error=nan_error,
        )
    if not rows:
        return _without_rows(BandwidthResult, header, warn, errors, problems, bool(columns), text)
    error_text = "\n".join(errors) if errors else None

    top = max(rows, key=lambda r: r.msg_size)
    cut = _cut_short([r.msg_size for r in rows], closed, expected_size)
    if cut:
        return BandwidthResult(
            rows=tuple(rows),
            msg_size=top.msg_size,
            unit_printed=unit,
            header=header,
            warnings=warn,
            problems=tuple(problems),
            error=cut,
        )
    if _unusable(top.avg_gbps) or _unusable(top.peak_gbps):
        return BandwidthResult(
            rows=tuple(rows),
            msg_size=top.msg_size,
            unit_printed=unit,
            header=header,
            warnings=warn,
            problems=tuple(problems),
            error=f"unparseable output: bandwidth avg={top.avg_gbps} peak={top.peak_gbps} "
            f"at {top.msg_size} bytes",
        )
    peak: float | None = top.peak_gbps
    if peak == 0.0 and top.avg_gbps > 0.0:
        peak = None
        problems.append("peak bandwidth printed as 0.00 (not measured in duration mode)")
    if error_text:
        problems.extend(f"tool message: {e}" for e in errors)
    return BandwidthResult(
        rows=tuple(rows),
        avg_gbps=top.avg_gbps,
        peak_gbps=peak,
        msg_size=top.msg_size,
        unit_printed=unit,
        header=header,
        warnings=warn,
        problems=tuple(problems),
    )


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
    lines = _clean_lines(text)
    header = _parse_header(lines)
    bare = _bare_number(lines)
    if bare is not None:
        if _unusable(bare) or bare == 0:
            return LatencyResult(error=f"unparseable output: latency {bare!r}")
        return LatencyResult(t_avg_us=bare, header=header)

    table = _scan_table(lines, _LAT_COL_RE, _latency_row, _LAT_DUPLICATE)
    rows, closed, columns = table.rows, table.closed, table.columns
    warnings, errors, problems = table.warnings, table.errors, table.problems
    warn = _summarize_warnings(warnings)
    if nan_error := table.non_finite_error():
        return LatencyResult(
            rows=tuple(rows),
            header=header,
            warnings=warn,
            problems=tuple(problems),
            error=nan_error,
        )
    if not rows:
        return _without_rows(LatencyResult, header, warn, errors, problems, bool(columns), text)
    error_text = "\n".join(errors) if errors else None

    head = min(rows, key=lambda r: r.msg_size)
    cut = _cut_short([r.msg_size for r in rows], closed, expected_size)
    if cut:
        return LatencyResult(
            rows=tuple(rows),
            msg_size=head.msg_size,
            header=header,
            warnings=warn,
            problems=tuple(problems),
            error=cut,
        )
    avg = head.t_avg_us if head.t_avg_us is not None else head.t_typical_us
    if avg is not None and head.t_avg_us is None:
        problems.append("layout without t_avg: t_typical used as the average")
    if _unusable(avg) or avg == 0:
        return LatencyResult(
            rows=tuple(rows),
            msg_size=head.msg_size,
            header=header,
            warnings=warn,
            problems=tuple(problems),
            error=f"unparseable output: latency {avg!r} at {head.msg_size} bytes",
        )
    if error_text:
        problems.extend(f"tool message: {e}" for e in errors)
    return LatencyResult(
        rows=tuple(rows),
        t_avg_us=avg,
        t_typical_us=head.t_typical_us,
        t_min_us=head.t_min_us,
        t_max_us=head.t_max_us,
        p99_us=head.p99_us,
        p999_us=head.p999_us,
        msg_size=head.msg_size,
        header=header,
        warnings=warn,
        problems=tuple(problems),
    )
