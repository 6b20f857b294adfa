"""The checks a parsed nccl-tests result must pass besides its table: every `#wrong` cell a
non-negative count (never summed so that values cancel), and ranks 0..N-1 in one table
on the launched hosts."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_hpcnet.probes.nccl import NcclExpected, NcclRank, NcclRow


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
    hosts = len(dict.fromkeys(r.host for r in ranks))
    if expected.nodes is not None and ranks and hosts != expected.nodes:
        why.append(
            f"ranks on {hosts} host{'s' if hosts != 1 else ''}, "
            f"{expected.nodes} node{'s' if expected.nodes != 1 else ''} launched"
        )
    return why
