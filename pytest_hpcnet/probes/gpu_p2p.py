"""GPU-to-GPU bandwidth: `nvbandwidth -t device_to_device_memcpy_read_ce`, its matrix read.

The format as NVIDIA's tool prints it (tests/fixtures/gpu_load/nvbandwidth-*, provenance
there): a header (`nvbandwidth Version: v0.10.0`, `CUDA Runtime Version: 13.2 (13020)` or
`13000`, `Driver Version`, optionally a host name and `Device 0: NAME (BDF)` lines), then per
test `Running NAME.`, one or more matrices (`memcpy CE GPU(row) -> GPU(column) bandwidth
(GB/s)`, a line of column indexes, one row per source with `N/A` or `0.00` on the diagonal),
`SUM NAME value` and, from v0.10, `COEFFICIENT_OF_VARIATION`. `Waiving NAME.` means the test
cannot run here (no peer access between the GPUs). The parser never raises: a matrix cut
short is a `problems` entry, an abort (`ASSERT in expression`, `[cudaError...]`) an `error`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

READ_CE = "device_to_device_memcpy_read_ce"
"""Each GPU reads from every other with its copy engines: one figure per ordered pair."""
TIMEOUT_S = 300


def nvbandwidth_command(testcase: str = READ_CE) -> str:
    """One test of nvbandwidth on all the node's GPUs (its stderr with its stdout)."""
    return f"nvbandwidth -t {testcase} 2>&1"


_VERSION = re.compile(r"^nvbandwidth Version:\s*(\S+)")
_FIELD = re.compile(
    r"^(CUDA Runtime Version|CUDA Driver Version(?: \(API\))?|Driver Version):\s*(.+?)\s*$"
)
_RUNNING = re.compile(r"^Running (\w+)\.\s*$")
_WAIVING = re.compile(r"^Waiving (\w+)\.\s*$")
_WAIVED = re.compile(r"^Waived:\s*(\w*)\s*$")
"""v0.8's bare `Waived: ` line: a test of the suite that cannot run here (unnamed)."""
_TITLE = re.compile(
    r"^(?:memcpy \w+|memory latency \w+|[A-Z][\w ]*? Latency \w+) (\w+)\(row\) (<->|->|<-) "
    r"(\w+)\(column\) (.*?)(bandwidth \(GB/s\)|\(ns\))\s*$"
)
_LOCAL = re.compile(r"^memcpy local (\w+)\(column\) (.*?)bandwidth \(GB/s\)\s*$")
"""`device_local_copy`: one row, a column per GPU, no row device."""
# re.ASCII throughout: `\d` would match a full-width "１", which int() and float() read
_COLUMNS = re.compile(r"^\s*\d+(\s+\d+)*\s*$", re.A)
_ROW = re.compile(r"^\s*(\d+)((?:\s+\S+)+)\s*$", re.A)
_SUM = re.compile(r"^SUM (\w+) \d", re.A)
_FIGURE = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_FATAL = re.compile(r"ASSERT in expression|\[cuda\w*Error\w*\]|\bAborted\b|terminate called")


@dataclass(frozen=True)
class BandwidthMatrix:
    """One matrix of a test: (row, column) -> GB/s, None where `N/A` (the diagonal)."""

    testcase: str
    source: str
    """`GPU` or `CPU`: what the rows are."""
    arrow: str
    """`->` (row reads from or writes to column, as the title says), `<-` or `<->`."""
    part: str = ""
    """`Read1`, `Total` ... of a bidirectional test; empty otherwise."""
    cells: tuple[tuple[int, int, float | None], ...] = ()
    columns: int = 0
    rows: int = 0
    no_peer: tuple[tuple[int, int], ...] = ()
    """(row, column) pairs the engine found without peer access (the torch fallback says so)."""
    failed: tuple[tuple[int, int, str], ...] = ()
    """(row, column, error) of pairs whose copy failed (the torch fallback's `error=` lines)."""
    unit: str = "GB/s"
    """`GB/s`, or `ns` for a latency test."""

    def value(self, row: int, column: int) -> float | None:
        return next((v for r, c, v in self.cells if r == row and c == column), None)


@dataclass(frozen=True)
class NvbandwidthRun:
    """What one nvbandwidth run printed; `error` says why it cannot be judged."""

    version: str | None = None
    cuda_runtime: str | None = None
    driver: str | None = None
    matrices: tuple[BandwidthMatrix, ...] = ()
    waived: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    error: str | None = None
    ran: tuple[str, ...] = field(default=())

    def matrix(self, testcase: str, part: str = "") -> BandwidthMatrix | None:
        return next((m for m in self.matrices if m.testcase == testcase and m.part == part), None)


def _cell(word: str) -> float | str | None:
    """A cell's GB/s, None for `N/A`, or the word itself when it is not a finite figure."""
    if word == "N/A":
        return None
    if not _FIGURE.fullmatch(word):  # `1e300`, `-1`, `nan`, a full-width digit: not a figure
        return word
    value = float(word)
    return value if math.isfinite(value) else word


def _summed(version: str | None) -> bool:
    """Whether this version ends each test with a `SUM` line (v0.8 and v0.10 do; the README's
    pre-v0.5 example does not): without it, a matrix of such a run was cut off."""
    m = re.match(r"v?(\d+)\.(\d+)", version or "")
    return m is not None and (int(m.group(1)), int(m.group(2))) >= (0, 8)


def parse_nvbandwidth(text: str) -> NvbandwidthRun:
    """Read nvbandwidth's text output (any version from v0.2 to v0.10)."""
    header: dict[str, str] = {}
    version = None
    matrices: list[BandwidthMatrix] = []
    waived: list[str] = []
    ran: list[str] = []
    sums: list[str] = []
    problems: list[str] = []
    fatal: str | None = None
    testcase: str | None = None
    current: dict | None = None
    opened: list[dict] = []
    local: re.Match | None = None

    def close() -> None:
        nonlocal current
        if current is None:
            return
        m = current
        current = None
        if m["columns"] is None:
            problems.append(f"{m['testcase']}: matrix without its column line (cut short?)")
            return
        square = m["source"] == "GPU" and m["target"] == "GPU"
        if m["bad"] or len(m["rows"]) < (m["columns"] if square else 1):
            got = len(m["rows"])
            problems.append(
                f"{m['testcase']} {m['part']}: {got} rows of {m['columns']} (cut short?)".replace(
                    "  ", " "
                )
            )
            return
        cells = tuple(c for row in m["rows"] for c in row)
        matrices.append(
            BandwidthMatrix(
                m["testcase"],
                m["source"],
                m["arrow"],
                m["part"],
                cells,
                m["columns"],
                len(m["rows"]),
                unit=m["unit"],
            )
        )

    for raw in text.splitlines():
        line = raw.rstrip()
        if fatal is None and _FATAL.search(line):
            fatal = line.strip()[:200]
        if m := _VERSION.match(line):
            version = m.group(1)
            continue
        if (m := _FIELD.match(line)) and current is None:
            header.setdefault(m.group(1).split(" (")[0], m.group(2))
            continue
        if m := _SUM.match(line):
            close()
            sums.append(m.group(1))
            continue
        if m := _RUNNING.match(line):
            close()
            testcase = m.group(1)
            ran.append(testcase)
            continue
        if m := _WAIVING.match(line):
            close()
            waived.append(m.group(1))
            continue
        if m := _WAIVED.match(line):
            close()
            # named, or right after its Running line with nothing yet: that test is waived;
            # otherwise a test of the suite the run did not announce
            unanswered = testcase is not None and ran and ran[-1] == testcase
            unanswered = unanswered and not any(x["testcase"] == testcase for x in opened)
            if m.group(1):
                waived.append(m.group(1))
            elif unanswered and testcase not in waived:
                waived.append(testcase)
            continue
        if (m := _TITLE.match(line)) or (local := _LOCAL.match(line)):
            close()
            name = testcase or "unnamed test"
            if m:
                source, arrow, target = m.group(1), m.group(2), m.group(3)
                part, unit = m.group(4).strip(), "ns" if m.group(5) == "(ns)" else "GB/s"
            else:
                source, arrow, target = "local", "", local.group(1)
                part, unit = local.group(2).strip(), "GB/s"
            current = {
                "testcase": name,
                "source": source,
                "target": target,
                "arrow": arrow,
                "part": part,
                "unit": unit,
                "columns": None,
                "rows": [],
                "bad": False,
            }
            opened.append(current)
            continue
        if current is None:
            continue
        if current["columns"] is None:
            if _COLUMNS.match(line):
                words = line.split()
                if words != [str(i) for i in range(len(words))]:
                    problems.append(f"column line not 0..n-1: {line.strip()[:80]}")
                current["columns"] = len(words)
            elif line.strip():
                close()
            continue
        row = _ROW.match(line)
        if row is None:
            close()
            continue
        index = int(row.group(1))
        words = row.group(2).split()
        values = [_cell(w) for w in words]
        unread = [w for w in values if isinstance(w, str)]
        if index != len(current["rows"]) or len(values) != current["columns"] or unread:
            what = f"unreadable cell {unread[0]!r}" if unread else "a short or misnumbered row"
            problems.append(f"{current['testcase']} row {index}: {what}")
            current["bad"] = True
            continue
        current["rows"].append(tuple((index, c, v) for c, v in enumerate(values)))
    close()
    if _summed(version):
        cut = [m for m in matrices if not any(x.startswith(m.testcase) for x in sums)]
        problems += [f"{m.testcase}: no SUM line after its matrix (cut short?)" for m in cut]
        matrices = [m for m in matrices if m not in cut]
    halves = {m.testcase for m in matrices if m.part} - {
        m.testcase for m in matrices if m.part == "Total"
    }
    problems += [
        f"{name}: a bidirectional test without its Total (cut short?)" for name in sorted(halves)
    ]
    matrices = [m for m in matrices if m.testcase not in halves]
    answered = (
        {m.testcase for m in matrices}
        | set(waived)
        | {p.split(" ")[0].rstrip(":") for p in problems}
    )
    problems += [
        f"{name}: no result after its Running line (cut short?)"
        for name in ran
        if name not in answered
    ]
    if fatal is not None:
        error = f"nvbandwidth aborted: {fatal}"
    elif not matrices and not waived:
        tail = next((x.strip() for x in reversed(text.splitlines()) if x.strip()), "no output")
        error = problems[0] if problems else f"no bandwidth matrix in the output ({tail[:160]})"
    else:
        error = None
    return NvbandwidthRun(
        version=version,
        cuda_runtime=header.get("CUDA Runtime Version"),
        driver=header.get("Driver Version"),
        matrices=tuple(matrices),
        waived=tuple(waived),
        problems=tuple(problems),
        error=error,
        ran=tuple(ran),
    )


NVLINK = "NVLink"
PCIE = "PCIe"


def pair_link(topo_cell: str | None) -> str | None:
    """`NVLink` for an `NV#` cell of `nvidia-smi topo -m`, `PCIe` for PIX/PXB/PHB/NODE/SYS,
    None when the cell is missing or unknown."""
    word = (topo_cell or "").strip()
    if re.fullmatch(r"NV\d+", word):
        return NVLINK
    if word in ("PIX", "PXB", "PHB", "NODE", "SYS"):
        return PCIE
    return None
