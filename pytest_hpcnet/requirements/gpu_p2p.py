"""The judge of GPU-to-GPU bandwidth: every ordered GPU pair of a node, by the link
`nvidia-smi topo -m` reports between them (NVLink pairs against NVLink figures, PCIe pairs
against PCIe ones).

Each pair's nvbandwidth read-CE GB/s must reach `1 - peer_tolerance` of the median of the
node's pairs of the same link and of the cluster's, and the SKU figure where the profile
sets one (`expect.gpu_load.min_p2p_nvlink_gbs`, `min_p2p_pcie_gbs`; unset: peer-relative
only, and the verdict says so). A failure names both GPUs (index and bus id) and the link.
A node without nvbandwidth, or whose run or topology cannot be read, is not measured.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import GPU_QUERY, GpuQuery
from pytest_hpcnet.probes.gpu_load import GPU_ENGINES
from pytest_hpcnet.probes.gpu_p2p import (
    NVLINK,
    PCIE,
    READ_CE,
    BandwidthMatrix,
    NvbandwidthRun,
    pair_link,
)
from pytest_hpcnet.probes.gpu_p2p_torch import TORCH_COPY
from pytest_hpcnet.probes.gpu_topo import GPU_TOPO, Topology
from pytest_hpcnet.requirements.bounds import Bound, Ceiling, judge_figure, peer_bound
from pytest_hpcnet.requirements.verdict import (
    FAIL,
    NOT_MEASURED,
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

SECTIONS = ("gpu_p2p", GPU_TOPO.name, GPU_QUERY.name, GPU_ENGINES.name)
INSTALL_NVBANDWIDTH = (
    "install NVIDIA nvbandwidth (github.com/NVIDIA/nvbandwidth, built against the node's CUDA) "
    "on the node's PATH, or PyTorch with CUDA for python3 (the plugin's own copy program)"
)
FIX = (
    "a slow NVLink pair: check both GPUs' links (nvidia-smi nvlink -s / -e) and, on NVSwitch "
    "systems, nvidia-fabricmanager; a slow PCIe pair: check ACS and the switch "
    "(nvidia-smi topo -p2p r, lspci -vvv); reseat or replace the GPU or baseboard"
)
FLOOR_KEYS = {NVLINK: "min_p2p_nvlink_gbs", PCIE: "min_p2p_pcie_gbs"}


@dataclass(frozen=True)
class NodeP2p:
    """One node's GPU-to-GPU run and the topology it is judged against, or why there is none."""

    node: str
    run: NvbandwidthRun | None = None
    topo: Topology | None = None
    query: GpuQuery | None = None
    missing: str | None = None
    fix: str = ""


NO_PAIRS = "not applicable: no GPU pairs with peer access (expect.gpu_load.p2p, expect.gpu.count)"


def without_pairs(expect: Expectations) -> bool:
    """No GPU pair to measure: the profile leaves peer access out or expects fewer than two
    GPUs (the suite's not-applicable condition)."""
    return not expect.gpu_load.p2p or (expect.gpu.count or 0) < 2


def _matrix(run: NvbandwidthRun | None) -> BandwidthMatrix | None:
    """nvbandwidth's read-CE matrix, else the torch fallback's."""
    if run is None:
        return None
    return run.matrix(READ_CE) or run.matrix(TORCH_COPY)


def _pairs(p2p: NodeP2p) -> dict[tuple[int, int], tuple[str | None, str, float | None]]:
    """(row GPU, column GPU) -> (link class, topo cell, GB/s) of the node's matrix."""
    matrix = _matrix(p2p.run)
    if matrix is None or p2p.topo is None:
        return {}
    out = {}
    for row, column, value in matrix.cells:
        if row != column:
            cell = p2p.topo.link(f"GPU{row}", f"GPU{column}") or ""
            out[(row, column)] = (pair_link(cell), cell, value)
    return out


def _gpu(node: str, index: int, query: GpuQuery | None, with_node: bool = True) -> str:
    gpu = query.gpu(index) if query is not None else None
    bus = f" ({gpu.bus_id})" if gpu is not None and gpu.bus_id else ""
    return f"{node + ' ' if with_node else ''}GPU {index}{bus}"


def _unmeasured(p2p: NodeP2p) -> Verdict | None:
    kw = {"sections": SECTIONS, "subject": p2p.node}
    if p2p.missing:
        return not_measured(p2p.missing, p2p.fix, **kw)
    run = p2p.run
    if run is None:
        return not_measured("nvbandwidth did not run", **kw)
    if run.error:
        return not_measured(run.error, **kw)
    if READ_CE in run.waived:
        return None  # no peer access at all: the judge fails it, whatever the topology
    if run.problems:
        return not_measured(f"nvbandwidth output not read whole: {run.problems[0]}", **kw)
    if p2p.topo is None or p2p.topo.error:
        why = p2p.topo.error if p2p.topo is not None else "no topo -m in the facts"
        return not_measured(f"nvidia-smi topo -m unreadable, pairs not classed: {why}", **kw)
    return None


def judge_gpu_p2p(p2p: NodeP2p, peers: dict[str, NodeP2p], expect: Expectations) -> Verdict:
    """Every GPU pair's copy bandwidth against the node's and the cluster's pairs over the
    same kind of link, and against the SKU figure for that link."""
    early = _unmeasured(p2p)
    if early is not None:
        return early
    run = p2p.run
    assert run is not None
    kw = {"sections": SECTIONS, "subject": p2p.node}
    if READ_CE in run.waived:
        why = f"nvbandwidth waived {READ_CE}: the GPUs have no peer access to each other"
        fix = "enable P2P (PCIe ACS off, IOMMU passthrough; nvidia-smi topo -p2p r shows it)"
        return failing(why, fix, **kw)
    matrix = _matrix(run)
    if matrix is None:
        return not_measured(f"no {READ_CE} matrix in nvbandwidth's output", **kw)
    pairs = _pairs(p2p)
    if not pairs:
        return not_measured(f"no GPU pair in the {matrix.testcase} matrix", **kw)
    tol = expect.gpu_load.peer_tolerance
    cluster: dict[str, list[float]] = {NVLINK: [], PCIE: []}
    for peer in peers.values():
        same_engine = (m := _matrix(peer.run)) is not None and m.testcase == matrix.testcase
        if same_engine and _unmeasured(peer) is None:
            for kind, _, value in _pairs(peer).values():
                if kind in cluster and value is not None:
                    cluster[kind].append(value)
    load = expect.gpu_load
    ceiling = Ceiling(load.max_p2p_gbs, "expect.gpu_load.max_p2p_gbs")
    node_bounds = {
        kind: peer_bound(
            [v for k, _, v in pairs.values() if k == kind],
            ceiling,
            tol,
            load.min_peer_gpus,
            f"node {kind} median",
        )
        for kind in (NVLINK, PCIE)
    }
    cluster_bounds = {
        kind: peer_bound(values, ceiling, tol, load.min_peer_gpus, f"cluster {kind} median")
        for kind, values in cluster.items()
    }
    measurements: list[Measurement] = []
    failures: list[str] = []
    notes: list[str] = []
    unclassed = []
    unjudged: list[str] = []
    listed = {g.index for g in p2p.query.gpus} if p2p.query and p2p.query.gpus else set()
    expected = sorted(listed | set(range(expect.gpu.count or 0)))
    floors = matrix.testcase == READ_CE  # the SKU figures are nvbandwidth's read-CE ones
    if not floors:
        notes.append(
            "a torch copy is judged against its peers only (SKU figures are nvbandwidth's)"
        )
    absent = [i for i in expected if i >= matrix.columns]
    if absent:
        names = ", ".join(_gpu(p2p.node, i, p2p.query) for i in absent)
        failures.append(f"{names}: not in nvbandwidth's {matrix.columns}-GPU matrix")
    for kind in (NVLINK, PCIE):
        if (
            floors
            and any(k == kind for k, _, _ in pairs.values())
            and getattr(expect.gpu_load, FLOOR_KEYS[kind]) is None
        ):
            notes.append(
                f"{kind} pairs: no SKU figure (expect.gpu_load.{FLOOR_KEYS[kind]}), "
                "peer-relative only"
            )
    for (a, b), (kind, cell, value) in sorted(pairs.items()):
        subject = f"GPU {a} -> GPU {b}"
        where = f"{_gpu(p2p.node, a, p2p.query)} -> {_gpu(p2p.node, b, p2p.query, False)}"
        if kind is None:
            unclassed.append(f"{subject} ({cell or 'no cell'})")
            continue
        floor = getattr(load, FLOOR_KEYS[kind]) if floors else None
        bounds = [node_bounds[kind][0], cluster_bounds[kind][0]]
        if floor is not None:
            bounds.append(Bound(floor, f"expect.gpu_load.{FLOOR_KEYS[kind]} (SKU)"))
        name = "p2p_nvlink_gbs" if kind == NVLINK else "p2p_pcie_gbs"
        judged = judge_figure(
            name,
            value,
            "GB/s",
            bounds,
            ceiling,
            subject,
            f"expect.gpu_load.{FLOOR_KEYS[kind]}",
            cluster_bounds[kind][1],
        )
        broken = (a, b) in matrix.no_peer or any((x, y) == (a, b) for x, y, _ in matrix.failed)
        if broken or value is None:
            measurements.append(replace(judged.measurement, outcome=FAIL))
        else:
            measurements.append(judged.measurement)
        if (a, b) in matrix.no_peer:
            failures.append(f"{where} over {kind} ({cell}): no peer access")
            continue
        error = next((why for x, y, why in matrix.failed if (x, y) == (a, b)), None)
        if error is not None:
            shown = error.replace("_", " ")
            failures.append(f"{where} over {kind} ({cell}): the copy failed: {shown}")
            continue
        if value is None:
            failures.append(f"{where} over {kind} ({cell}): no figure (N/A)")
            continue
        if judged.outcome == NOT_MEASURED:
            unjudged.append(f"{where} over {kind} ({cell}): {judged.reason.partition(': ')[2]}")
            continue
        low = [b.source for b in bounds if b is not None and value < b.value]
        if judged.outcome == FAIL:
            failures.append(
                f"{where} over {kind} ({cell}): {value:g} GB/s below {' and '.join(low)}"
            )
    if failures:
        return failing("; ".join(failures), FIX, measurements=tuple(measurements), **kw)
    if unclassed:
        why = f"topo -m gives no link for {', '.join(unclassed[:4])}"
        return not_measured(why, measurements=tuple(measurements), **kw)
    if unjudged:
        more = f" and {len(unjudged) - 4} more" if len(unjudged) > 4 else ""
        why = "; ".join(unjudged[:4]) + more
        return not_measured(why, measurements=tuple(measurements), **kw)
    counts = {k: sum(1 for x, _, _ in pairs.values() if x == k) for k in (NVLINK, PCIE)}
    shown = ", ".join(f"{n} over {k}" for k, n in counts.items() if n)
    note = f" ({'; '.join(notes)})" if notes else ""
    return passing(
        f"{len(pairs)} GPU pairs ({shown}) within {tol:.0%} of their peers{note}",
        measurements=tuple(measurements),
        **kw,
    )
