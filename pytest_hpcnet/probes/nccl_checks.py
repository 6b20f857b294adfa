"""The checks a parsed nccl-tests result must pass besides its table: every `#wrong` cell a
non-negative count (never summed so that values cancel), and ranks 0..N-1 in one table
on the launched hosts."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_hpcnet.probes.nccl_table import NcclExpected, NcclRank, NcclRow


@dataclass(frozen=True)
class WrongTally:
    """The #wrong cells of a run: each must be a non-negative whole count (never summed
    past a bad one, so `5` and `-5` cannot cancel out)."""

    cells: int = 0
    na: int = 0
    found: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = ()
    total: int = 0
    na_at: str = ""  # where the first N/A cell is

    @property
    def counted(self) -> int | None:
        """The total over the cells that are counts; None when none is, or any is not a count.
        N/A cells are left out here (alltoall prints in-place N/A under -c 1) and counted in
        `na`: an all-reduce judge requires none."""
        return self.total if self.cells > self.na and not self.unreadable else None

    def fields(self) -> dict[str, object]:
        """The `NcclResult` fields of this tally."""
        return {
            "total_wrong": self.counted,
            "wrong_found": self.found,
            "wrong_unreadable": self.unreadable,
            "wrong_na": self.na,
            "wrong_cells": self.cells,
        }


WrongCell = tuple[int, "str | None", str, "float | str | None"]
"""(size, redop, "out-of-place" | "in-place", value): None is N/A, a str is not a number."""


def tally_wrong(cells: Iterable[WrongCell]) -> WrongTally:
    """Check every #wrong cell: N/A, a count (positive ones named), or not a count."""
    n = na = total = 0
    found: list[str] = []
    bad: list[str] = []
    na_at = ""
    for size, redop, place, value in cells:
        n += 1
        where = f"{size} bytes ({redop or '?'}, {place})"
        if value is None:
            na += 1
            na_at = na_at or where
        elif isinstance(value, str):
            bad.append(f"{value} at {where}")
        elif not math.isfinite(value) or value < 0 or value != int(value):
            bad.append(f"{value:g} at {where}")
        elif value:
            total += int(value)
            found.append(f"{int(value)} at {where}")
    return WrongTally(n, na, tuple(found), tuple(bad), total, na_at)


def _row_cells(rows: Iterable[NcclRow]) -> list[WrongCell]:
    cells: list[WrongCell] = []
    for r in rows:
        cells.append((r.size_bytes, r.redop, "out-of-place", r.oop_wrong))
        if r.ip_time_us is not None:
            cells.append((r.size_bytes, r.redop, "in-place", r.ip_wrong))
    return cells


def separate_tables(tables: Sequence[int]) -> str | None:
    """Why more than one result table is not one job across the nodes; None for one."""
    if len(tables) <= 1:
        return None
    each = " + ".join(str(t) for t in tables)
    return (
        f"{len(tables)} separate result tables ({each} ranks): independent runs, not one job "
        "across the nodes (nccl-tests built without MPI?)"
    )


def _ranks_said(numbers: Sequence[int], what: str) -> str:
    shown = ", ".join(str(n) for n in numbers[:4]) + (", ..." if len(numbers) > 4 else "")
    return f"rank{'s' if len(numbers) > 1 else ''} {shown} {what}"


def _short(name: str) -> str:
    return name.strip().lower().split(".")[0]


def launched_node(host: str, nodes: Sequence[Sequence[str]]) -> int | None:
    """The index of the launched node a rank table's host is (any of its names, short)."""
    for i, names in enumerate(nodes):
        if _short(host) in {_short(n) for n in names if n}:
            return i
    return None


def host_problems(ranks: Sequence[NcclRank], expected: NcclExpected) -> list[str]:
    """Ranks on a host that was not launched, or a launched node without a rank."""
    if expected.hosts is None or not ranks:
        return []
    why: list[str] = []
    strangers = sorted({r.host for r in ranks if launched_node(r.host, expected.hosts) is None})
    if strangers:
        shown = ", ".join(strangers[:4]) + (", ..." if len(strangers) > 4 else "")
        why.append(f"ranks on {shown}, not a launched node")
    per = Counter(launched_node(r.host, expected.hosts) for r in ranks)
    absent = [names[0] for i, names in enumerate(expected.hosts) if i not in per and names]
    if absent:
        shown = ", ".join(absent[:4]) + (", ..." if len(absent) > 4 else "")
        why.append(f"no rank on {shown} in the rank table")
    nodes = len(expected.hosts)
    if expected.ranks and nodes and expected.ranks % nodes == 0 and not absent:
        each = expected.ranks // nodes
        uneven = [(expected.hosts[i][0], n) for i, n in per.items() if i is not None and n != each]
        if uneven:
            name, n = sorted(uneven)[0]
            why.append(f"{name} holds {n} ranks, {each} launched per node")
    return why


def rank_problems(
    ranks: Sequence[NcclRank], tables: Sequence[int], expected: NcclExpected
) -> list[str]:
    """Why the ranks printed are not one job of ranks 0..N-1, each once, on the hosts
    launched (empty when they are). N is `expected.ranks`, else the highest rank + 1."""
    why: list[str] = []
    if (apart := separate_tables(tables)) is not None:
        why.append(apart)
    if expected.ranks is not None and len(ranks) != expected.ranks:
        why.append(f"output shows {len(ranks)} ranks, {expected.ranks} launched")
    seen = Counter(r.rank for r in ranks)
    twice = sorted(n for n, c in seen.items() if c > 1)
    if twice:
        why.append(_ranks_said(twice, "listed twice"))
    size = expected.ranks if expected.ranks is not None else max(seen, default=-1) + 1
    if ranks:
        missing = [n for n in range(size) if n not in seen]
        beyond = sorted(n for n in seen if n >= size or n < 0)
        if missing:
            why.append(_ranks_said(missing, "missing"))
        if beyond:
            why.append(_ranks_said(beyond, f"outside 0..{size - 1}"))
    why += host_problems(ranks, expected)
    hosts = len(dict.fromkeys(r.host for r in ranks))
    if expected.nodes is not None and ranks and hosts != expected.nodes:
        why.append(
            f"ranks on {hosts} host{'s' if hosts != 1 else ''}, "
            f"{expected.nodes} node{'s' if expected.nodes != 1 else ''} launched"
        )
    return why


# -- the table's own figures: a row that cannot be what nccl-tests printed ----------------

MAX_TIME_US = 1e12
"""No nccl-tests size takes 11 days: a larger time is a misread cell."""
MAX_BW_GBS = 1e6
"""1 PB/s: no bus carries that; a larger bandwidth is a misread cell."""
WORD_BYTES = {
    "int8": 1, "uint8": 1, "char": 1, "half": 2, "float16": 2, "bfloat16": 2, "fp16": 2,
    "bf16": 2, "int32": 4, "uint32": 4, "int": 4, "float": 4, "float32": 4, "int64": 8,
    "uint64": 8, "double": 8, "float64": 8, "f8e4m3": 1, "f8e5m2": 1,
}  # fmt: skip
BUS_FACTOR = {
    "all_reduce_perf": lambda n: 2 * (n - 1) / n,
    "all_gather_perf": lambda n: (n - 1) / n,
    "reduce_scatter_perf": lambda n: (n - 1) / n,
    "alltoall_perf": lambda n: (n - 1) / n,
    "broadcast_perf": lambda n: 1.0,
    "reduce_perf": lambda n: 1.0,
    "sendrecv_perf": lambda n: 1.0,
}
"""busbw = algbw x factor(nranks), per collective (nccl-tests doc/PERFORMANCE.md)."""


def bus_factor(collective: str | None, nranks: int) -> float | None:
    """The collective's busbw/algbw factor at `nranks`; None when not known."""
    name = (collective or "").rsplit("/", 1)[-1].removesuffix("_mpi")
    name = name if name.endswith("_perf") else f"{name}_perf"
    factor = BUS_FACTOR.get(name)
    return factor(nranks) if factor is not None and nranks > 0 else None


def _close(shown: float, exact: float, places: float = 0.005) -> bool:
    """`shown` is `exact` as nccl-tests prints it (2 decimals), with room for the rounding
    of the time it was computed from."""
    return abs(shown - exact) <= 2 * places + 0.02 * abs(exact)


def size_series(low: int, high: int, factor: int | None, step: int | None) -> list[int] | None:
    """The sizes nccl-tests steps through from -b to -e (by -f, else by -i); None unknown."""
    if not 0 < low <= high:
        return None
    out, size = [], low
    while size <= high and len(out) < 4096:
        out.append(size)
        if factor and factor > 1:
            size *= factor
        elif step and step > 0:
            size += step
        else:
            break
    return out if size > high or len(out) == 1 else None  # past 4096 steps: not checked


def row_problems(
    rows: Sequence[NcclRow],
    collective: str | None,
    nranks: int,
    series: Sequence[int] | None,
    op: str | None,
    avg: float | None,
) -> list[str]:
    """Why the rows are not one run of nccl-tests as asked (empty when they are): a size
    twice or out of order, sizes off the -b/-e/-f series, a count that is not the size in
    elements, another reduction op, a time or bandwidth that is not positive and finite or
    does not follow from the size and time, an average that is not the rows' average."""
    why: list[str] = []
    sizes = [r.size_bytes for r in rows]
    word = max((WORD_BYTES.get(r.dtype.lower(), 8) for r in rows), default=8)
    unit = word * max(nranks, 1)  # nccl-tests rounds a size down to whole elements per rank
    if series is not None:
        if len(rows) != len(series):
            why.append(f"{len(rows)} sizes printed, {len(series)} asked (-b/-e/-f)")
        else:
            for size, want in zip(sizes, series, strict=True):
                if not want - unit < size <= want and not (size == 0 and want < unit):
                    why.append(f"size {size} printed where {want} was asked")
                    break
    twice = sorted({s for s in sizes if s and sizes.count(s) > 1})
    if twice:
        why.append(f"size {twice[0]} printed {sizes.count(twice[0])} times (two runs?)")
    elif sizes != sorted(sizes):
        why.append("sizes out of order (two runs interleaved?)")
    factor = bus_factor(collective, nranks)
    for r in rows:
        if op is not None and r.redop is not None and r.redop != op:
            why.append(f"op {r.redop} at {r.size_bytes} bytes, {op} launched")
            break
    for r in rows:
        word = WORD_BYTES.get(r.dtype.lower())
        if word and r.size_bytes not in (r.count * word, r.count * word * max(nranks, 1)):
            why.append(f"count {r.count} x {word} bytes is not size {r.size_bytes}")
            break
    for r in rows:
        if (bad := _cell_problem(r, factor)) is not None:
            why.append(f"{bad} at {r.size_bytes} bytes")
            break
    cells = [b for r in rows for b in (r.oop_busbw_gbs, r.ip_busbw_gbs) if b is not None]
    if avg is not None and cells and not _close(avg, sum(cells) / len(cells), 0.003):
        why.append(
            f"average bus bandwidth {avg:g} is not the rows' average "
            f"{sum(cells) / len(cells):.3f} (a figure misread or cut)"
        )
    return why


def _cell_problem(r: NcclRow, factor: float | None) -> str | None:
    for place, time, alg, bus in (
        ("out-of-place", r.oop_time_us, r.oop_algbw_gbs, r.oop_busbw_gbs),
        ("in-place", r.ip_time_us, r.ip_algbw_gbs, r.ip_busbw_gbs),
    ):
        if time is None and alg is None and bus is None:
            continue
        if time is None or alg is None or bus is None:
            return f"{place} time/algbw/busbw incomplete"
        if not (0 < time <= MAX_TIME_US and 0 <= alg <= MAX_BW_GBS and 0 <= bus <= MAX_BW_GBS):
            return f"{place} time {time:g} us, algbw {alg:g}, busbw {bus:g} GB/s impossible"
        exact = r.size_bytes / time / 1e3
        if not _close(alg, exact):
            return f"{place} algbw {alg:g} GB/s is not size/time ({exact:.2f})"
        if factor is not None and not _close(bus, exact * factor):
            return f"{place} busbw {bus:g} GB/s is not algbw x {factor:g} ({exact * factor:.2f})"
    return None
