"""nccl-tests (`all_reduce_perf`, `alltoall_perf`, ...) output parser and typed result.

Units as nccl-tests prints them: sizes in bytes, times in microseconds, algbw and
busbw in GB/s (10^9 bytes/s). Handles old and new layouts (`error` or `#wrong`
column, with or without `root`/`Group`), mpirun `--tag-output` and `srun -l`
prefixes, interleaved NCCL INFO/WARN lines and runs that die without a table.
The command that launches the benchmark is built in `pytest_hpcnet.campaigns.nccl.launch`.

Fail closed: a table that stops before the requested maximum size, lacks the
`# Out of bounds values` / `# Avg bus bandwidth` footer, shows another number of
ranks (or hosts) than launched, a rank twice or missing, more than one table (independent
runs: nccl-tests built without MPI), or a `#wrong` cell that is not a non-negative count is
an `error`, never a measurement; `reason` says why a result is not ok in one line. #wrong
cells are checked one by one (`tally_wrong`), never summed past a bad one. What was
launched comes from `NcclExpected` (the caller) and, for the sizes, from the tool's own
`minBytes .. maxBytes` header.

The rows are held to the run asked (`row_problems`): the -b/-e/-f sizes each once and in
order, the op, a count that is the size in elements, times and bandwidths that are plain
ASCII numbers (no exponent, no non-ASCII digit, no nan/inf, not negative), algbw = size/time
and busbw = algbw x the collective's factor, an average that is the rows' average, and an
output whose last line is finished (a number cut mid-way is no measurement). A second
header or footer is two runs. `NcclResult.failed` tells a run the tool says failed (a
failure line, out-of-bounds values, a #wrong count) from an output that cannot be read or
is not the run launched: the judges fail the first and do not measure the second.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_hpcnet.probes.nccl_checks import (  # noqa: F401 - part of the parser's interface
    WrongCell,
    WrongTally,
    _row_cells,
    rank_problems,
    row_problems,
    separate_tables,
    size_series,
    tally_wrong,
)
from pytest_hpcnet.probes.nccl_table import NcclExpected, NcclRank, NcclRow
from pytest_hpcnet.probes.text import foreign_digits, strip_ansi

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kKmMgG]?)\s*$", re.A)


def nccl_size(text: str | int) -> int | None:
    """A nccl-tests size argument (`8`, `1K`, `128M`, `8G`: powers of 1024) in bytes, or None."""
    m = _SIZE_RE.match(str(text))
    if not m:
        return None
    return int(m.group(1)) * 1024 ** " KMG".index(m.group(2).upper() or " ")


@dataclass(frozen=True)
class NcclResult:
    """A nccl-tests run. `error` is set (to the tool's own lines) when there is no table."""

    rows: tuple[NcclRow, ...] = ()
    avg_busbw_gbs: float | None = None  # "# Avg bus bandwidth" as printed, GB/s
    busbw_at_max_size_gbs: float | None = None  # out-of-place busbw at the largest size
    max_size_bytes: int | None = None
    total_wrong: int | None = None  # sum of the #wrong counts (None: none, or one is not a count)
    wrong_found: tuple[str, ...] = ()  # "3 at 1048576 bytes (sum, out-of-place)", per cell
    wrong_unreadable: tuple[str, ...] = ()  # cells that are not a count ("-5 at ...")
    wrong_na: int = 0  # #wrong cells printed N/A (not checked)
    wrong_cells: int = 0  # #wrong cells in all
    wrong_column: str | None = None  # "#wrong" (counts) or "error" (old: max error)
    oob_values: int | None = None  # "# Out of bounds values : N OK|FAILED"
    oob_failed: bool | None = None
    ranks: tuple[NcclRank, ...] = ()
    tables: tuple[int, ...] = ()  # rank lines under each `# nThread ...` header, per table
    collective: str | None = None  # from "# Collective test starting: ..."
    tests_version: str | None = None  # "2.18.2" or rccl's "develop:33cc4df"
    nccl_version: int | None = None  # nccl-headers=23007
    n_gpus_per_thread: int | None = None
    min_bytes_asked: int | None = None  # header "minBytes"
    max_bytes_asked: int | None = None  # header "maxBytes" (nccl-tests may reduce it)
    step_factor: int | None = None  # header "step: 2(factor)"
    step_bytes: int | None = None  # header "step: 1048576(bytes)"
    validation: int | None = None  # header "validation: 1"
    failures: tuple[str, ...] = ()  # "Test failure" / "Test CUDA failure" lines
    warnings: tuple[str, ...] = ()  # NCCL WARN lines
    problems: tuple[str, ...] = ()
    error: str | None = None
    silent_nodes: tuple[str, ...] = ()
    """Launched nodes that stopped answering during the run (named by the campaign)."""

    @property
    def failed(self) -> bool:
        """The tool itself says the run failed: a failure line, out-of-bounds values FAILED,
        or a positive #wrong count. Any other `error` is an output that cannot be read or is
        not the run asked for: not measured, never a failure."""
        return bool(self.failures or self.oob_failed or self.wrong_found)

    @property
    def hosts(self) -> tuple[str, ...]:
        """Distinct hosts of the ranks, in rank order."""
        return tuple(dict.fromkeys(r.host for r in self.ranks))

    @property
    def reason(self) -> str | None:
        """Why the run is not ok, in one line; None when it is ok."""
        if self.error is not None:
            lines = [ln for ln in self.error.splitlines() if ln.strip()] or ["error"]
            more = f" (+{len(lines) - 1} more lines)" if len(lines) > 1 else ""
            return lines[0].strip() + more
        where = ""
        if self.wrong_found:
            more = len(self.wrong_found) - 1
            where = f": {self.wrong_found[0]}" + (f" (+{more} more)" if more else "")
        if self.oob_failed:
            return (
                f"Out of bounds values : {self.oob_values} FAILED ({self.total_wrong} #wrong)"
                + where
            )
        if self.total_wrong or self.wrong_found:
            return f"{self.total_wrong or 'some'} wrong values (#wrong){where}"
        if self.failures:
            # nccl-tests' own line names the rank's host; a launcher's banner may come first
            own = [f for f in self.failures if _TOOL_FAILURE_RE.search(f)]
            return (own or list(self.failures))[0]
        return None

    @property
    def ok(self) -> bool:
        """A complete table as launched, nothing wrong, no out-of-bounds values, no failures."""
        return self.reason is None


_PREFIX_RE = re.compile(r"^(?:\[\d+,\d+\]<(?:stdout|stderr)>:|\s*\d+:(?=\s))", re.A)
_RANK_RE = re.compile(
    r"#\s*Rank\s+(\d+)(?:\s+Group\s+(\d+))?(?:\s+Pid\s+(\d+))?\s+on\s+(\S+)\s+"
    r"device\s+(\d+)\s+\[([^\]]*)\]\s*(.*?)\s*$",
    re.A,
)
_VERSION_RE = re.compile(r"nccl-tests version\s+(\S+)(?:\s+nccl-headers=(\d+))?", re.A)
_RCCL_VERSION_RE = re.compile(r"rccl-tests:\s*Version\s+(\S+)", re.A)
_COLLECTIVE_RE = re.compile(r"Collective test starting:\s*(\S+)", re.A)
_AVG_RE = re.compile(r"Avg bus bandwidth\s*:\s*(\S+)", re.A)
_OOB_RE = re.compile(r"Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)", re.I | re.A)
_NGPUS_RE = re.compile(r"nGpus\s+(\d+)", re.A)
_BYTES_RE = re.compile(r"minBytes\s+(\d+)\s+maxBytes\s+(\d+)", re.A)
_STEP_RE = re.compile(r"step:\s*(\d+)\((factor|bytes)\)", re.A)
_VALIDATION_RE = re.compile(r"validation:\s*(\d+)", re.A)
_TOOL_FAILURE_RE = re.compile(r"Test (?:NCCL |CUDA )?failure", re.I)
"""nccl-tests' own failure line (`node03: Test NCCL failure common.cu:1279 ...`)."""
_FAILURE_RE = re.compile(r"failure|failed|\berror\b|abort|segmentation fault|killed", re.I)
_WARN_RE = re.compile(r"NCCL WARN|\bplm:\w+: Warning:")  # NCCL's, Open MPI launcher's
_INFO_RE = re.compile(r"NCCL INFO")


_NUM_RE = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)|[-+]?(?:nan|inf)", re.I | re.A)
_COUNT_RE = re.compile(r"[0-9]+", re.A)
_DIGIT_RE = re.compile(r"\d|^[-+]?(?:nan|inf)", re.I)  # any digit, ASCII or not


def _num(token: str) -> float | None:
    """A cell as nccl-tests prints it (`%7.2f`, `%6.2f`, `%g`): ASCII digits and a point,
    or nan/inf; None for anything else (an exponent, a non-ASCII digit, a word)."""
    token = token.rstrip("*")
    if not _NUM_RE.fullmatch(token):
        return None
    return float(token)


_ERROR_RE = re.compile(r"[0-9]+(?:\.[0-9]*)?[eE][-+]?[0-9]+", re.A)


def _wrong(token: str) -> float | None:
    """A #wrong count, or the old layout's `error` (a max error, `2e-07`); None for N/A."""
    if token.upper() == "N/A":
        return None
    return float(token) if _ERROR_RE.fullmatch(token) else _num(token)


def _int_like(token: str) -> bool:
    return re.fullmatch(r"-?[0-9]+", token, re.A) is not None


def _parse_row(tokens: list[str], has_root: bool) -> NcclRow | None:
    """A data row, or None. Reads the measured columns from the right."""
    if not tokens or not _COUNT_RE.fullmatch(tokens[0]):
        return None
    for tail in (8, 4):
        head, rest = tokens[:-tail], tokens[-tail:]
        if not 3 <= len(head) <= 5 or not _COUNT_RE.fullmatch(head[1]):
            continue
        redop: str | None = None
        root: int | None = None
        extra = head[3:]
        if len(extra) == 2:
            redop, root = extra[0], int(extra[1]) if _int_like(extra[1]) else None
        elif len(extra) == 1:
            if _int_like(extra[0]) and has_root:
                root = int(extra[0])
            else:
                redop = extra[0]
        measured = [_num(t) for t in rest[0:3]]
        if tail == 8:
            measured += [_num(t) for t in rest[4:7]]
        if any(v is None for v in measured):
            continue
        if _wrong(rest[3]) is None and rest[3].upper() != "N/A":
            continue
        ip = (measured[3], measured[4], measured[5], _wrong(rest[7])) if tail == 8 else (None,) * 4
        return NcclRow(
            size_bytes=int(head[0]),
            count=int(head[1]),
            dtype=head[2],
            redop=redop,
            root=root,
            oop_time_us=measured[0],  # type: ignore[arg-type]
            oop_algbw_gbs=measured[1],  # type: ignore[arg-type]
            oop_busbw_gbs=measured[2],  # type: ignore[arg-type]
            oop_wrong=_wrong(rest[3]),
            ip_time_us=ip[0],
            ip_algbw_gbs=ip[1],
            ip_busbw_gbs=ip[2],
            ip_wrong=ip[3],
        )
    return None


def _bad(value: float | None) -> bool:
    return value is None or math.isnan(value) or math.isinf(value) or value < 0


def _non_finite(row: NcclRow) -> bool:
    """A cell of the row printed as nan/inf (a measurement or a #wrong count)."""
    cells = (
        row.oop_time_us,
        row.oop_algbw_gbs,
        row.oop_busbw_gbs,
        row.oop_wrong,
        row.ip_time_us,
        row.ip_algbw_gbs,
        row.ip_busbw_gbs,
        row.ip_wrong,
    )
    return any(v is not None and not math.isfinite(v) for v in cells)


def _header_facts(body: str, facts: dict[str, object]) -> None:
    """minBytes, maxBytes, step and validation from the `# nThread ...` header line."""
    if m := _BYTES_RE.search(body):
        facts["min_bytes_asked"], facts["max_bytes_asked"] = int(m.group(1)), int(m.group(2))
    if m := _STEP_RE.search(body):
        facts["step_factor" if m.group(2) == "factor" else "step_bytes"] = int(m.group(1))
    if m := _VALIDATION_RE.search(body):
        facts["validation"] = int(m.group(1))


def _mib(size: int) -> str:
    """`8388608 bytes (8 MiB)`; small sizes in bytes only."""
    return f"{size} bytes ({size / 2**20:g} MiB)" if size >= 2**20 else f"{size} bytes"


def _last_step_floor(facts: dict[str, object], asked: int) -> int:
    """The size of the step before the last one nccl-tests runs for `asked` (rows above it
    belong to the last step, whatever rounding the collective applies)."""
    low = facts.get("min_bytes_asked")
    factor, step = facts.get("step_factor"), facts.get("step_bytes")
    if isinstance(low, int) and 0 < low <= asked:
        if isinstance(factor, int) and factor > 1:
            size = low
            while size * factor <= asked:
                size *= factor
            return size // factor
        if isinstance(step, int) and step > 0:
            return low + ((asked - low) // step) * step - step
    return asked // 2  # no header: assume nccl-tests' usual factor 2


def _incomplete(
    rows: list[NcclRow],
    facts: dict[str, object],
    saw_avg: bool,
    expected: NcclExpected,
    ranks: list[NcclRank],
    wrong_column: str | None,
    wrong: WrongTally,
    tables: Sequence[int] = (),
) -> list[str]:
    """Why a table is not the whole run that was launched (empty when it is)."""
    why: list[str] = []
    said = facts.get("collective")
    if isinstance(said, str) and expected.collective and _bare(said) != _bare(expected.collective):
        why.append(f"the output is {said}'s, {expected.collective} launched")
    top = max(r.size_bytes for r in rows)
    header_max = facts.get("max_bytes_asked")
    asked = expected.max_bytes if expected.max_bytes is not None else header_max
    if isinstance(header_max, int) and expected.max_bytes is not None and header_max != asked:
        why.append(
            f"nccl-tests ran up to maxBytes {_mib(header_max)}, {_mib(expected.max_bytes)} asked"
        )
    elif isinstance(asked, int) and top <= _last_step_floor(facts, asked):
        why.append(f"output ends at {_mib(top)} of {_mib(asked)} asked (run cut short?)")
    missing = [
        name
        for name, seen in (
            ("Out of bounds values", "oob_values" in facts),
            ("Avg bus bandwidth", saw_avg),
        )
        if not seen
    ]
    if missing:
        footer = " and ".join(f"'# {m}'" for m in missing)
        why.append(f"no {footer} footer after the {top}-byte row (run cut short?)")
    for key, name, flag in (("min_bytes_asked", "min_bytes", "minBytes"),
                            ("step_factor", "step_factor", "step"),
                            ("n_gpus_per_thread", "gpus_per_process", "nGpus")):  # fmt: skip
        said, wanted = facts.get(key), getattr(expected, name)
        if isinstance(said, int) and wanted is not None and said != wanted:
            why.append(f"nccl-tests ran with {flag} {said}, {wanted} asked")
    low, high = facts.get("min_bytes_asked"), facts.get("max_bytes_asked")
    if not isinstance(low, int) or not isinstance(high, int):
        low, high = expected.min_bytes, expected.max_bytes
    factor, step = facts.get("step_factor"), facts.get("step_bytes")
    if not isinstance(factor, int) and not isinstance(step, int):
        factor = expected.step_factor
    series = (
        size_series(low, high, factor, step if isinstance(step, int) else None)  # type: ignore[arg-type]
        if isinstance(low, int) and isinstance(high, int) and (factor or step)
        else None
    )
    nranks = len(ranks) or expected.ranks or 0
    collective = facts.get("collective") or expected.collective
    avg = facts.get("avg_busbw_gbs")
    why += row_problems(
        rows,
        collective if isinstance(collective, str) else None,
        nranks,
        series,
        expected.op,
        avg if isinstance(avg, float) else None,
    )
    why += rank_problems(ranks, tables, expected)
    cells = [c for r in rows for c in (r.oop_wrong, r.ip_wrong) if c is not None]
    if facts.get("validation") == 0 and cells:
        why.append("a #wrong/error value printed with validation off (validation: 0)")
    if any(not math.isfinite(c) or c < 0 for c in cells) and not wrong.unreadable:
        why.append("an error cell that is not a non-negative number")
    if wrong.unreadable:
        more = len(wrong.unreadable) - 1
        why.append(
            f"#wrong not a count: {wrong.unreadable[0]}" + (f" (+{more} more)" if more else "")
        )
    if expected.validation:
        if facts.get("validation") == 0:
            why.append("validation off in the output (validation: 0), -c 1 asked")
        elif wrong_column != "#wrong" or not wrong.cells or wrong.na == wrong.cells:
            why.append("no #wrong counts in the output, validation (-c 1) asked")
        elif wrong.na and not _inplace_unchecked(rows, collective):
            why.append(
                f"#wrong N/A in {wrong.na} of {wrong.cells} cells (first at {wrong.na_at}), "
                "validation (-c 1) asked"
            )
    return why


INPLACE_UNCHECKED = ("alltoall_perf", "sendrecv_perf")
"""The collectives whose in-place #wrong nccl-tests prints N/A under -c 1 (recorded outputs:
alltoall 2.18.3 and sendrecv, tests/fixtures/nccl_collectives): only their out-of-place cells
are checked, each of which must be a count."""


def _bare(name: str) -> str:
    """`/opt/nccl-tests/build/all_gather_perf_mpi` -> `all_gather_perf`."""
    return name.rsplit("/", 1)[-1].removesuffix("_mpi")


def _inplace_unchecked(rows: Sequence[NcclRow], collective: object) -> bool:
    """Every N/A #wrong cell is an in-place one of a collective that prints them so."""
    if not isinstance(collective, str) or _bare(collective) not in INPLACE_UNCHECKED:
        return False
    return all(r.oop_wrong is not None for r in rows)


def parse_nccl(text: str, expected: NcclExpected | None = None) -> NcclResult:
    """Parse the output of one nccl-tests/rccl-tests run (any collective).

    `expected` says what was launched (max size, ranks, nodes, validation); a table
    that does not cover it, or holds a row it cannot read or a nan/inf cell (a time, a
    bandwidth or a #wrong count), is an `error`. Never raises.
    """
    expected = expected or NcclExpected()
    rows: list[NcclRow] = []
    ranks: list[NcclRank] = []
    tables: list[list[NcclRank]] = []
    failures: list[str] = []
    warnings: list[str] = []
    problems: list[str] = []
    facts: dict[str, object] = {}
    has_root = False
    wrong_column: str | None = None
    saw_columns = False
    saw_avg = False
    bad_rows: list[str] = []  # unreadable or nan/inf rows: kept out, the run unparseable
    if odd := foreign_digits(text):
        bad_rows.append(odd)
    runs = {"version": 0, "avg": 0}  # a second header or footer: two runs in one output

    clean = strip_ansi(text or "").replace("\r", "")
    lines = clean.splitlines()
    cut = bool(lines) and not clean.endswith("\n")  # the last line stops mid-way
    for i, raw in enumerate(lines):
        line = _PREFIX_RE.sub("", raw, count=1).rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if cut and i == len(lines) - 1 and (saw_columns or "#" in stripped[:1]):
            if _FAILURE_RE.search(stripped) and not stripped.startswith("#"):
                failures.append(stripped)
            elif saw_columns or _AVG_RE.search(stripped) or _OOB_RE.search(stripped):
                bad_rows.append(f"last line cut mid-way: {stripped[:80]}")
                problems.append(bad_rows[-1])
            continue
        if stripped.startswith("#"):
            body = stripped.lstrip("#").strip()
            if m := _RANK_RE.match(stripped):
                rank = NcclRank(
                    rank=int(m.group(1)),
                    group=int(m.group(2)) if m.group(2) else None,
                    pid=int(m.group(3)) if m.group(3) else None,
                    host=m.group(4),
                    device=int(m.group(5)),
                    bus_id=m.group(6),
                    gpu=m.group(7),
                )
                if not tables:
                    tables.append([])
                if rank not in tables[-1]:  # one line printed twice is still one rank
                    tables[-1].append(rank)
                    ranks.append(rank)
            elif m := _VERSION_RE.search(body):
                runs["version"] += 1
                facts["tests_version"] = m.group(1)
                if m.group(2):
                    facts["nccl_version"] = int(m.group(2))
            elif m := _COLLECTIVE_RE.search(body):
                facts["collective"] = m.group(1)
            elif m := _AVG_RE.search(body):
                runs["avg"] += 1
                saw_avg = True
                value = _num(m.group(1))
                if value is None or _bad(value):
                    bad_rows.append(f"unreadable average bus bandwidth: {m.group(1)}")
                    problems.append(bad_rows[-1])
                else:
                    facts["avg_busbw_gbs"] = value
            elif m := _OOB_RE.search(body):
                facts["oob_values"] = int(m.group(1))
                # nccl-tests prints FAILED for any count above 0: a count with OK is misread
                facts["oob_failed"] = m.group(2).upper() == "FAILED" or int(m.group(1)) > 0
            elif (m := _NGPUS_RE.search(body)) and "nThread" in body:
                tables.append([])  # one header per table; a second is another, independent run
                facts["n_gpus_per_thread"] = int(m.group(1))
                _header_facts(body, facts)
            elif re.search(r"\bsize\b", body) and re.search(r"\bcount\b", body):
                saw_columns = True
                columns = body.split()
                has_root = "root" in columns
                wrong_column = (
                    "#wrong" if "#wrong" in columns else ("error" if "error" in columns else None)
                )
            continue
        if m := _RCCL_VERSION_RE.search(stripped):
            facts["tests_version"] = m.group(1)
            continue
        row = _parse_row(stripped.split(), has_root) if saw_columns else None
        if row is not None and _non_finite(row):
            bad_rows.append(f"non-finite value in row: {stripped}")
            problems.append(bad_rows[-1])
            continue
        if row is not None:
            rows.append(row)
            continue
        if _WARN_RE.search(stripped):
            warnings.append(stripped)
        elif _INFO_RE.search(stripped):
            continue
        elif _FAILURE_RE.search(stripped):
            failures.append(stripped)
        elif saw_columns and _DIGIT_RE.search(stripped.split()[0]):  # a size as nan, -1, ８
            bad_rows.append(f"unreadable row: {stripped}")
            problems.append(bad_rows[-1])
    if max(runs.values()) > 1:
        bad_rows.append(
            f"{runs['version']} nccl-tests headers and {runs['avg']} average lines: "
            "more than one run in one output"
        )
        problems.append(bad_rows[-1])

    common = {
        "ranks": tuple(ranks),
        "tables": tuple(len(t) for t in tables),
        "failures": tuple(failures),
        "warnings": tuple(warnings),
        **facts,
    }
    if not rows:
        tool_lines = failures + warnings
        if tool_lines:
            error = "\n".join(dict.fromkeys(tool_lines))
        else:
            what = "column header but no rows" if saw_columns else "no result table"
            flat = " ".join((text or "").split())[:120] or "empty output"
            error = f"unparseable output: {what} ({flat})"
        return NcclResult(problems=tuple(problems), error=error, **common)  # type: ignore[arg-type]

    top = max(rows, key=lambda r: r.size_bytes)
    if _bad(top.oop_busbw_gbs) or _bad(top.oop_algbw_gbs):
        return NcclResult(
            rows=tuple(rows),
            problems=tuple(problems),
            error=f"unparseable output: busbw {top.oop_busbw_gbs} at {top.size_bytes} bytes",
            **common,  # type: ignore[arg-type]
        )
    wrong = tally_wrong(_row_cells(rows)) if wrong_column == "#wrong" else WrongTally()
    why = _incomplete(rows, facts, saw_avg, expected, ranks, wrong_column, wrong, common["tables"])
    if bad_rows:  # the row it could not read may be the largest size, or count wrong values
        more = f" (+{len(bad_rows) - 1} more)" if len(bad_rows) > 1 else ""
        why.insert(0, f"unparseable output: {bad_rows[0]}{more}")
    if why and failures:
        why.append(failures[0])
    return NcclResult(
        rows=tuple(rows),
        error="; ".join(why) or None,
        busbw_at_max_size_gbs=top.oop_busbw_gbs,
        max_size_bytes=top.size_bytes,
        wrong_column=wrong_column,
        problems=tuple(problems),
        **wrong.fields(),  # type: ignore[arg-type]
        **common,  # type: ignore[arg-type]
    )
