"""NVLink state and error counters: `nvidia-smi nvlink -s` and `nvidia-smi nvlink -e`.

Formats as published (tests/fixtures/gpu_load/, provenance there): a `GPU i: NAME (UUID:
...)` line per GPU, then `Link n: 26.562 GB/s` or `Link n: <inactive>` (indented with a TAB
and a space, or spaces), or `NVML: Unable to retrieve NVLink information as all links are
inActive`; `-e` gives `Link n: Replay Errors: 0`, `Recovery Errors`, `CRC Errors` per link.
Both ride the facts round trip (sections `gpu_nvlink_status`, `gpu_nvlink_errors`) where the
profile expects NVLink. Parsers never raise; an elided or unreadable line is a `problems` entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_hpcnet.inventory.expectations import Expectations

from pytest_hpcnet.probes.sections import Section, gpu_profile, when

STATUS_COMMAND = "nvidia-smi nvlink -s 2>&1"
ERRORS_COMMAND = "nvidia-smi nvlink -e 2>&1"

# re.ASCII: `\d` would match a full-width "１", which int() and float() read as 1
_GPU = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: .*\))?\s*$", re.A)
_LINK = re.compile(r"^\s*Link (\d+): (?:(\d+(?:\.\d+)?) GB/s|<inactive>)\s*$", re.I | re.A)
_ERRORS = re.compile(
    r"^\s*Link (\d+): (Replay|Recovery|CRC|CRC Flit|CRC Data) Errors: (\d+)\s*$", re.I | re.A
)
COUNTERS = ("replay", "recovery", "crc")
"""The counter kinds every link must report (`crc`: plain CRC, or both of older drivers'
CRC Flit and CRC Data counters, `crc_flit` / `crc_data`)."""
LINK_GBS = (
    (re.compile(r"B200|B300|GB200|GB300", re.I), 53.125, "NVLink 5"),
    (re.compile(r"H100|H200|H800|H20\b|GH200", re.I), 26.562, "NVLink 4"),
    (re.compile(r"A100|A800", re.I), 25.0, "NVLink 3"),
    (re.compile(r"V100", re.I), 25.781, "NVLink 2"),
)
"""Per-link GB/s as `nvidia-smi nvlink -s` prints a healthy link of each SKU, from the
recorded outputs in samples/nvlink (B300 53.125, H100/H800 26.562, A100 25, V100 25.781)."""


def sku_link_gbs(model: str | None) -> tuple[float, str] | None:
    """(GB/s per link, `NVLink 4`) for a GPU model name, or None when the SKU is not known."""
    for pattern, gbs, generation in LINK_GBS:
        if model and pattern.search(model):
            return gbs, generation
    return None


_ALL_DOWN = re.compile(r"all links are inactive", re.I)
_ELIDED = re.compile(r"^\s*(\.{3,}|\[\.\.\.\]|\.\.\.<snip>\.\.\.)\s*$")


@dataclass(frozen=True)
class GpuLinks:
    """One GPU's links: link -> GB/s, None where `<inactive>`."""

    index: int
    name: str
    links: dict[int, float | None] = field(default_factory=dict)
    all_inactive: bool = False

    @property
    def active(self) -> list[int]:
        return sorted(n for n, speed in self.links.items() if speed is not None)

    @property
    def inactive(self) -> list[int]:
        return sorted(n for n, speed in self.links.items() if speed is None)


@dataclass(frozen=True)
class NvlinkStatus:
    gpus: tuple[GpuLinks, ...] = ()
    problems: tuple[str, ...] = ()
    error: str | None = None

    def gpu(self, index: int) -> GpuLinks | None:
        return next((g for g in self.gpus if g.index == index), None)


@dataclass(frozen=True)
class NvlinkErrors:
    """GPU index -> link -> counter (`replay`, `recovery`, `crc`) -> count."""

    gpus: dict[int, dict[int, dict[str, int]]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    error: str | None = None


def _blocks(text: str) -> tuple[list[tuple[int, str, list[str]]], list[str]]:
    """(GPU index, name, its lines) in order, and the lines outside any GPU block (a GPU
    listed twice, as two outputs run together, is one of those)."""
    blocks: list[tuple[int, str, list[str]]] = []
    loose: list[str] = []
    for line in text.splitlines():
        head = _GPU.match(line)
        if head and any(b[0] == int(head.group(1)) for b in blocks):
            loose.append(f"GPU {head.group(1)} listed twice")
            blocks.append((-1, "", []))  # its lines are read nowhere
        elif head:
            blocks.append((int(head.group(1)), head.group(2), []))
        elif line.strip():
            (blocks[-1][2] if blocks else loose).append(line)
    return blocks, loose


def _unread(line: str, problems: list[str]) -> None:
    what = "elided by the author" if _ELIDED.match(line) else "unreadable"
    if len(problems) < 8:
        problems.append(f"{what}: {line.strip()[:120]}")


def parse_nvlink_status(text: str) -> NvlinkStatus:
    """Read `nvidia-smi nvlink -s`."""
    blocks, loose = _blocks(text)
    if not blocks:
        tail = next((x.strip() for x in reversed(loose) if x.strip()), "no output")
        return NvlinkStatus(error=f"no GPU in nvidia-smi nvlink -s ({tail[:200]})")
    problems: list[str] = []
    for line in loose:
        _unread(line, problems)
    gpus = []
    for index, name, lines in blocks:
        if index < 0:
            continue
        links: dict[int, float | None] = {}
        all_down = False
        for line in lines:
            m = _LINK.match(line)
            if m and int(m.group(1)) in links:
                _unread(f"link {m.group(1)} of GPU {index} listed twice", problems)
            elif m:
                links[int(m.group(1))] = float(m.group(2)) if m.group(2) else None
            elif _ALL_DOWN.search(line):
                all_down = True
            else:
                _unread(line, problems)
        gpus.append(GpuLinks(index, name, links, all_down))
    return NvlinkStatus(tuple(gpus), tuple(problems))


def parse_nvlink_errors(text: str) -> NvlinkErrors:
    """Read `nvidia-smi nvlink -e`."""
    blocks, loose = _blocks(text)
    if not blocks:
        tail = next((x.strip() for x in reversed(loose) if x.strip()), "no output")
        return NvlinkErrors(error=f"no GPU in nvidia-smi nvlink -e ({tail[:200]})")
    problems: list[str] = []
    for line in loose:
        _unread(line, problems)
    gpus: dict[int, dict[int, dict[str, int]]] = {}
    for index, _, lines in blocks:
        if index < 0:
            continue
        counters = gpus.setdefault(index, {})
        for line in lines:
            m = _ERRORS.match(line)
            kind = m.group(2).lower().replace(" ", "_") if m else ""
            if m and kind in counters.get(int(m.group(1)), {}):
                _unread(f"{kind} of link {m.group(1)} of GPU {index} listed twice", problems)
            elif m:
                counters.setdefault(int(m.group(1)), {})[kind] = int(m.group(3))
            elif not _ALL_DOWN.search(line):
                _unread(line, problems)
    return NvlinkErrors(gpus, tuple(problems))


def nvlink_expected(expect: Expectations) -> object:
    """The profile expects NVLink links on its GPUs (`gpu_load.nvlink_links`)."""
    return gpu_profile(expect) and expect.gpu_load.nvlink_links


NVLINK_STATUS: Section[NvlinkStatus] = Section(
    "gpu_nvlink_status", parse_nvlink_status, build=when(nvlink_expected, lambda e: STATUS_COMMAND)
)
NVLINK_ERRORS: Section[NvlinkErrors] = Section(
    "gpu_nvlink_errors", parse_nvlink_errors, build=when(nvlink_expected, lambda e: ERRORS_COMMAND)
)
