"""The scanning shared by the perftest parsers (`perftest_parsers`): perftest's header block,
its table layouts row by row, the bare number of `--output=...`, and the tool's own warning
and error lines. Pure functions; never raises.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_hpcnet.probes.text import strip_ansi


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
_NUMBER_RE = re.compile(
    r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$|^[-+]?(?:nan|inf)$", re.I | re.ASCII
)
PLAUSIBLE_MAX = 1e12
"""No perftest cell (bytes, iterations, Gb/s, MB/s, Mpps, usec) is larger: a bigger one is
a misread, never a measurement."""
BW_COLUMNS = re.compile(r"#bytes|#iterations|BW peak|BW average|MsgRate|BW min")
LAT_COLUMNS = re.compile(r"#bytes|#iterations|t_\w+?(?=\[)|99\.9% percentile|99% percentile")
_GID_LINE_RE = re.compile(r"^\s*GID:")
_RULE_RE = re.compile(r"^\s*[-*]{5,}\s*$|^\s*\*\s.*\*\s*$")
_CLOSING_RE = re.compile(r"^\s*-{5,}\s*$")


def clean_lines(text: str) -> list[str]:
    return strip_ansi(text).replace("\r", "").expandtabs(8).splitlines()


def cut_short(sizes: list[int], closed: bool, expected_size: int | None) -> str | None:
    """Why a table is not a whole run (it stops before the size asked, or is not closed)."""
    top = max(sizes)
    why = []
    if expected_size is not None and top < expected_size:
        why.append(f"table ends at {top} bytes of {expected_size} asked")
    if not closed:
        why.append(f"no closing rule after the {top}-byte row")
    return "; ".join(why) + " (run cut short?)" if why else None


def header_of(lines: list[str]) -> PerftestHeader:
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


def token_number(token: str) -> float | None:
    if not _NUMBER_RE.match(token):
        return None
    return float(token)


def classify_other(line: str, warnings: list[str], errors: list[str]) -> None:
    stripped = line.strip()
    if not stripped or _RULE_RE.match(line):
        return
    if _WARNING_RE.search(stripped):
        warnings.append(stripped)
    elif _ERROR_RE.search(stripped):
        errors.append(stripped)


def summarize_warnings(lines: list[str]) -> tuple[str, ...]:
    """Warning lines condensed: repeated CPU-frequency lines become one entry with a count."""
    cpu = [ln for ln in lines if "CPU Frequency" in ln or "CPU frequency" in ln]
    others = [ln for ln in dict.fromkeys(lines) if ln not in cpu]
    summary = list(others)
    if cpu:
        summary.insert(0, f"CPU frequency not at max ({len(cpu)} warning lines), e.g.: {cpu[0]}")
    return tuple(summary)


def bare_number(lines: list[str]) -> float | None:
    """The value of an `--output=bandwidth|latency` run: one bare number, maybe warnings."""
    meaningful = [ln.strip() for ln in lines if ln.strip() and not _WARNING_RE.search(ln)]
    if len(meaningful) == 1 and _NUMBER_RE.match(meaningful[0]):
        return float(meaningful[0])
    return None


def unusable(value: float | None) -> bool:
    return value is None or math.isnan(value) or math.isinf(value) or value < 0


def snippet(text: str) -> str:
    flat = " ".join((text or "").split())
    return flat[:120] + ("..." if len(flat) > 120 else "") if flat else "empty output"


@dataclass
class Table:
    """What a scan of perftest output found: its result rows and everything else."""

    rows: list = field(default_factory=list)
    columns: list[str] | None = None  # of the last `#bytes` header line
    header_line: str = ""
    closed: bool = False  # a closing rule after the last row
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    non_finite: list[str] = field(default_factory=list)  # rows with a nan/inf cell
    tables: int = 0  # `#bytes` header lines: one per run
    tests: list[str] = field(default_factory=list)  # test title lines (`RDMA_Write BW Test`)
    errors_after: list[str] = field(default_factory=list)  # tool errors after the first row
    stray: list[str] = field(default_factory=list)  # number-only lines outside the table
    implausible: list[str] = field(default_factory=list)  # rows with a negative/huge cell

    def non_finite_error(self) -> str | None:
        """The error of a table with a `nan`/`inf` cell: never a measurement."""
        if not self.non_finite:
            return None
        more = f" (+{len(self.non_finite) - 1} more)" if len(self.non_finite) > 1 else ""
        return f"unparseable output: non-finite value in row: {self.non_finite[0]}{more}"


def scan_table(
    lines: list[str],
    column_re: re.Pattern[str],
    make_row: Callable[[Table, dict[str, str], dict[str, Any]], Any],
    duplicate: str,
) -> Table:
    """Scan the lines of a table layout: each data line with as many tokens as the header
    has columns becomes a row (`make_row(table, tokens by column, numbers by column)`); an
    unreadable, non-finite (`nan`, `inf`: also kept in `non_finite`), repeated (`duplicate`,
    formatted with `size`) or misshapen one is a problem;
    any other line is a tool warning, error or nothing (`classify_other`)."""
    table = Table()
    for line in lines:
        if "#bytes" in line:
            table.columns = column_re.findall(line)
            table.header_line = line
            table.tables += 1
            continue
        if title := _TEST_RE.match(line):
            table.tests.append(title.group(1).strip())
            continue
        tokens = line.split()
        if table.rows and _CLOSING_RE.match(line):
            table.closed = True
        data = bool(table.columns and tokens and token_number(tokens[0]) is not None)
        if data:
            table.closed = False
        # #bytes as nan, inf, -1, 1e300 or in other digits (`６５５３６`): no size
        if data and not (tokens[0].isascii() and tokens[0].isdigit()):
            table.problems.append(f"unreadable row: {line.strip()}")
            if not math.isfinite(token_number(tokens[0]) or 0.0):
                table.non_finite.append(line.strip())
            continue
        if data and len(tokens) == len(table.columns or ()):
            values = dict(zip(table.columns or (), tokens, strict=True))
            numbers = {k: token_number(v) for k, v in values.items()}
            if any(v is None for v in numbers.values()):
                table.problems.append(f"unreadable row: {line.strip()}")
                continue
            if not all(math.isfinite(v) for v in numbers.values() if v is not None):
                table.problems.append(f"non-finite value in row: {line.strip()}")
                table.non_finite.append(line.strip())
                continue
            if any(v is not None and not 0 <= v <= PLAUSIBLE_MAX for v in numbers.values()):
                table.problems.append(f"unreadable row (negative or implausible): {line.strip()}")
                table.implausible.append(line.strip())
                continue
            size = values.get("#bytes", "")
            try:
                if not (size.isascii() and size.isdigit()):
                    raise ValueError(f"message size {size!r}")
                row = make_row(table, values, numbers)
            except (ValueError, KeyError, TypeError, OverflowError):  # a misshapen header
                table.problems.append(f"unreadable row: {line.strip()}")
                continue
            if row in table.rows:
                table.problems.append(duplicate.format(size=row.msg_size))
                continue
            table.rows.append(row)
            continue
        if data:
            table.problems.append(f"row with unexpected columns: {line.strip()}")
            continue
        if tokens and all(token_number(t) is not None for t in tokens):
            table.stray.append(line.strip())  # a bare number beside a table: another run's
            continue
        errors = len(table.errors)
        classify_other(line, table.warnings, table.errors)
        if table.rows and len(table.errors) > errors:
            table.errors_after.append(table.errors[-1])
    return table
