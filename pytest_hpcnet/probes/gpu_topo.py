"""`nvidia-smi topo -m`: the GPU/NIC connection matrix, CPU and NUMA affinity, NIC names.

The header is tab-separated and underlined with ANSI codes (`ESC[4m` ... `ESC[0m`, see
tests/fixtures/samples/nvidia_smi/smi-topo.txt); rows carry one cell per device column,
then `CPU Affinity`, `NUMA Affinity` and (driver 535+) `GPU NUMA ID`, the last after an
empty cell. NIC rows stop after the matrix. A `NIC Legend` maps `NIC0` to `mlx5_0`/`erdma_0`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_hpcnet.probes.gpu import smi_state
from pytest_hpcnet.probes.sections import Section, on_gpu
from pytest_hpcnet.probes.text import strip_ansi

TOPO_COMMAND = "nvidia-smi topo -m 2>&1"

LINK_RANK = {"X": 0, "NV": 1, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6}
"""Nearer first, as the legend orders them (NV# = NVLink, best for GPU pairs)."""

_DEVICE_RE = re.compile(r"^(GPU|NIC|mlx5_|erdma_)\w*$")
_LEGEND_RE = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")


@dataclass(frozen=True)
class TopoRow:
    """One device row: its links to every device column and, for GPUs, its affinity."""

    device: str
    links: tuple[tuple[str, str], ...]
    cpu_affinity: str | None = None
    numa_affinity: str | None = None
    gpu_numa_id: str | None = None


@dataclass(frozen=True)
class Topology:
    """The matrix of one node; `error` says why it could not be read."""

    devices: tuple[str, ...] = ()
    rows: tuple[TopoRow, ...] = ()
    nic_names: tuple[tuple[str, str], ...] = ()
    """(`NIC0`, `erdma_0`) from the legend."""
    error: str | None = None

    def row(self, device: str) -> TopoRow | None:
        return next((r for r in self.rows if r.device == device), None)

    def link(self, a: str, b: str) -> str | None:
        row = self.row(a)
        return dict(row.links).get(b) if row else None

    def nic_name(self, column: str) -> str:
        return dict(self.nic_names).get(column, column)

    @property
    def gpus(self) -> tuple[TopoRow, ...]:
        return tuple(r for r in self.rows if r.device.startswith("GPU"))

    def nearest_nics(self, gpu: str) -> tuple[str, ...]:
        """The RDMA devices (legend names) nearest to `gpu`; () when it sees none."""
        row = self.row(gpu)
        if row is None:
            return ()
        nics = [(d, v) for d, v in row.links if not d.startswith("GPU")]
        ranked = [(_rank(v), d) for d, v in nics if _rank(v) is not None]
        if not ranked:
            return ()
        best = min(r for r, _ in ranked)
        return tuple(self.nic_name(d) for r, d in ranked if r == best)

    def nearest_gpu(self, nic: str) -> int | None:
        """The index of the GPU nearest to RDMA device `nic` (legend name; the lowest index
        among equals); None when no GPU sees it."""
        ranked = []
        for row in self.gpus:
            links = {self.nic_name(d): v for d, v in row.links if not d.startswith("GPU")}
            rank = _rank(links.get(nic, ""))
            if rank is not None and row.device[3:].isdigit():
                ranked.append((rank, int(row.device[3:])))
        return min(ranked)[1] if ranked else None


def _rank(link: str) -> int | None:
    word = link.strip()
    if word.startswith("NV"):
        return LINK_RANK["NV"]
    return LINK_RANK.get(word)


def parse_topo(text: str) -> Topology:
    """Parse `nvidia-smi topo -m`; fail closed on a missing header or a short GPU row."""
    state = smi_state(text)
    if state is not None:
        return Topology(error=state[1])
    lines = strip_ansi(text).splitlines()
    header_at = next(
        (i for i, ln in enumerate(lines) if "GPU0" in [c.strip() for c in ln.split("\t")[1:]]),
        None,
    )
    if header_at is None:
        return Topology(error="no topo -m header (GPU0 column) found")
    columns = [c.strip() for c in lines[header_at].split("\t")[1:]]
    devices = tuple(c for c in columns if _DEVICE_RE.match(c))
    tail = columns[len(devices) :]
    rows: list[TopoRow] = []
    problems: list[str] = []
    legend: list[tuple[str, str]] = []
    for line in lines[header_at + 1 :]:
        m = _LEGEND_RE.match(line)
        if m:
            legend.append((m.group(1), m.group(2)))
            continue
        cells = line.split("\t")
        name = cells[0].strip()
        if not _DEVICE_RE.match(name) or len(cells) < 2:
            continue
        matrix = [c.strip() for c in cells[1 : 1 + len(devices)]]
        if len(matrix) < len(devices):
            problems.append(f"{name}: {len(matrix)} of {len(devices)} matrix cells (cut short?)")
            continue
        rest = [c.strip() for c in cells[1 + len(devices) :]]
        affinity: dict[str, str | None] = {}
        if name.startswith("GPU") and tail:
            if not rest:
                problems.append(f"{name}: no CPU/NUMA affinity (cut short?)")
            # by position: an empty CPU Affinity cell (a VM that hides it) is still a cell
            for key, value in zip(("CPU Affinity", "NUMA Affinity"), rest, strict=False):
                if key in tail:
                    affinity[key] = value or None
            after = [c for c in rest[2:] if c]  # GPU NUMA ID follows an empty cell
            if "GPU NUMA ID" in tail and after:
                affinity["GPU NUMA ID"] = after[-1]
        rows.append(
            TopoRow(
                device=name,
                links=tuple(zip(devices, matrix, strict=True)),
                cpu_affinity=affinity.get("CPU Affinity"),
                numa_affinity=affinity.get("NUMA Affinity"),
                gpu_numa_id=affinity.get("GPU NUMA ID"),
            )
        )
    missing = [d for d in devices if d.startswith("GPU") and not any(r.device == d for r in rows)]
    if missing:
        problems.append(f"no row for {', '.join(missing)}")
    return Topology(
        devices=devices,
        rows=tuple(rows),
        nic_names=tuple(legend),
        error="; ".join(problems) or None,
    )


def hca_selects(hca: str | None, device: str) -> bool:
    """Whether NCCL_IB_HCA selects `device`: unset selects all; `^` excludes, `=` exact,
    otherwise prefixes; `:port` suffixes are ignored (NCCL's own rules)."""
    if not hca or not hca.strip():
        return True
    spec = hca.strip()
    exclude = spec.startswith("^")
    spec = spec.removeprefix("^")
    exact = spec.startswith("=")
    names = [n.split(":")[0].strip() for n in spec.removeprefix("=").split(",") if n.strip()]
    hit = any(device == n if exact else device.startswith(n) for n in names)
    return not hit if exclude else hit


GPU_TOPO: Section[Topology] = Section("gpu_topo", parse_topo, build=on_gpu(TOPO_COMMAND))
