"""nccl-tests' collectives beyond all-reduce, run in turn in one launch: what each one is,
the launch node's shell sequence that runs them, and the split of its output per collective.

Each collective's busbw is algbw times its own factor (nccl-tests doc/PERFORMANCE.md):
all_gather, reduce_scatter and alltoall (n-1)/n, sendrecv 1 (each rank sends to its ring
neighbour, as pipeline stages do). The sequence prints a begin and an end marker around each
launch (`#hpcnet-collective begin all_gather_perf` ... `#hpcnet-collective end
all_gather_perf exit 0`); `split_sequence` cuts the output at them, so each collective's
table is parsed alone (`parse_nccl`, held to the binary launched) and a collective whose end
marker is missing was cut short. Pure; never raises.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Collective:
    """One nccl-tests collective as the suite judges it."""

    key: str
    """Its key in `benchmarks.nccl.collectives.run` and `expect.nccl.collectives`."""
    binary: str
    requirement: str
    factor: str
    """busbw = algbw x this (nccl-tests doc/PERFORMANCE.md), n the ranks."""
    share: str
    """What each rank sends over the network per operation of size S (the traffic share)."""


COLLECTIVES: tuple[Collective, ...] = (
    Collective("all_gather", "all_gather_perf", "nccl_all_gather", "(n-1)/n", "S(n-1)/n"),
    Collective(
        "reduce_scatter", "reduce_scatter_perf", "nccl_reduce_scatter", "(n-1)/n", "S(n-1)/n"
    ),
    Collective("alltoall", "alltoall_perf", "nccl_alltoall", "(n-1)/n", "S(n-1)/n"),
    Collective("sendrecv", "sendrecv_perf", "nccl_sendrecv", "1", "S"),
)
BY_KEY = {c.key: c for c in COLLECTIVES}
BEGIN = "#hpcnet-collective begin"
END = "#hpcnet-collective end"
_MARK_RE = re.compile(
    r"^(?:\S*:\s*)?#hpcnet-collective (begin|end) (\S+)(?: exit (\d+))?\s*$", re.M | re.A
)


def sibling_binary(all_reduce: str, binary: str) -> str:
    """The collective's binary beside the inventory's all-reduce one (its folder and `_mpi`
    suffix kept): `/opt/nccl-tests/build/all_reduce_perf` -> `.../all_gather_perf`."""
    folder, _, name = all_reduce.rpartition("/")
    suffix = "_mpi" if name.endswith("_mpi") else ""
    return f"{folder}/{binary}{suffix}" if folder else f"{binary}{suffix}"


def sequence_command(launches: Sequence[tuple[str, str]]) -> str:
    """One shell sequence running each (binary, launch command) in turn, each between its
    markers with its exit status; the sequence exits with the first non-zero status."""
    parts = ["rc=0"]
    for binary, command in launches:
        name = shlex.quote(binary)
        parts.append(
            f"echo {shlex.quote(BEGIN)} {name}; ( {command} ) 2>&1; s=$?; "
            f"echo {shlex.quote(END)} {name} exit $s; [ $rc -eq 0 ] && rc=$s"
        )
    parts.append("exit $rc")
    return "; ".join(parts)


@dataclass(frozen=True)
class Segment:
    """One collective's part of the sequence's output."""

    binary: str
    text: str
    exit_status: int | None
    """None: no end marker (the sequence was cut or killed during this launch)."""


def split_sequence(text: str) -> dict[str, Segment]:
    """Each launched binary's output (begin marker to end marker), by binary name."""
    found: dict[str, Segment] = {}
    marks = list(_MARK_RE.finditer(text or ""))
    for i, m in enumerate(marks):
        if m.group(1) != "begin":
            continue
        binary = m.group(2)
        stop = marks[i + 1] if i + 1 < len(marks) else None
        ends = stop is not None and stop.group(1) == "end" and stop.group(2) == binary
        body = text[m.end() + 1 : stop.start() if stop is not None else len(text)]
        status = int(stop.group(3)) if ends and stop.group(3) is not None else None
        found[binary] = Segment(binary, body, status)
    return found


def debug_file(base: str, binary: str) -> str:
    """`NCCL_DEBUG_FILE` of one collective's launch: its own files, read back per node."""
    return f"{base}.{binary}.debug.%h.%p"


def debug_read_command(base: str) -> str:
    """Print each of the node's debug files of the sequence after a `#hpcnet-file <name>`
    line, then remove it; exit 0."""
    glob = shlex.quote(base) + ".*.debug.*"
    return (
        f'for f in {glob}; do [ -f "$f" ] || continue; echo "#hpcnet-file $f"; '
        'cat -- "$f"; echo; rm -f -- "$f"; done; true'
    )


_FILE_RE = re.compile(r"^#hpcnet-file \S*?\.([a-z_]+_perf(?:_mpi)?)\.debug\.\S*$", re.M | re.A)


def split_debug(text: str) -> dict[str, str]:
    """A node's read-back debug files, by the binary whose launch wrote them."""
    found: dict[str, str] = {}
    marks = list(_FILE_RE.finditer(text or ""))
    for i, m in enumerate(marks):
        stop = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        binary = m.group(1).removesuffix("_mpi")
        found[binary] = found.get(binary, "") + text[m.end() + 1 : stop]
    return found
