"""The one catalogue of requirements.

Each requirement is declared here once. The suites' `check` markers (`mark`), the
certificate's requirement table (`certificate_specs`), its GPUs-under-load table
(`group_requirements`, `group_columns`), the trends page (`trended_figures`) and the
terminal summary (`title`) all read it; add a requirement here, then its judge, probe and
suite test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pytest

if TYPE_CHECKING:
    from pytest_hpcnet.inventory.expectations import Expectations

Selector = Literal["static", "benchmark", "gpu_load"]
GPUS_UNDER_LOAD = "gpus_under_load"
"""The certificate group of the requirements whose measurements fill its per-GPU table."""


@dataclass(frozen=True)
class Figure:
    """A figure a requirement's judge records (the measurement's `name`): `trended` puts it on
    the trends page (a `counter`, a total since boot, as deltas between runs); `column` is its
    header in its group's certificate table, at `position` among the group's columns."""

    name: str
    label: str
    trended: bool = False
    counter: bool = False
    column: str | None = None
    position: int = 0


@dataclass(frozen=True)
class Requirement:
    """One acceptance requirement.

    `expects` names the inventory `expect.*` keys its judge reads; `marker` the suite marker
    that selects it; `row` whether the certificate's requirement table lists it (a row with
    no records shows "not run"); `within` the requirement whose exclusion leaves it out too
    (it reads that one's data, such as the cloud audit's snapshot); `figures` the figures its
    judge records that a page shows; `group` the certificate table its measurements fill."""

    id: str
    title: str
    expects: tuple[str, ...]
    marker: Selector
    row: bool = True
    within: str | None = None
    figures: tuple[Figure, ...] = ()
    group: str | None = None


REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement("reachability", "Nodes reachable over SSH", (), "static"),
    Requirement("erdma", "eRDMA devices", ("rdma",), "static"),
    Requirement("erdma_identity", "Every ERI present (by driver)", ("rdma", "erdma"), "static"),
    Requirement("erdma_driver", "eRDMA driver state", ("erdma",), "static"),
    Requirement("erdma_port", "eRDMA active MTU, GID index, NUMA", ("mtu", "erdma"), "static"),
    Requirement("erdma_gdr", "GPUDirect RDMA readiness", ("erdma",), "static"),
    Requirement("mtu", "Jumbo MTU", ("mtu", "jumbo_frames"), "static"),
    Requirement("path_mtu", "Path MTU", ("mtu",), "static"),
    Requirement("security_group", "Security group", ("ports",), "static"),
    Requirement("acl", "Network ACL", ("flows",), "static"),
    Requirement("cloud_audit", "Cloud control plane", ("ports", "flows", "rdma"), "static"),
    Requirement(
        "erdma_nic_index",
        "ERIs attached: count and distinct NIC indexes",
        ("erdma",),
        "static",
        within="cloud_audit",
    ),
    Requirement("placement", "Placement", ("placement",), "static"),
    Requirement(
        "instance_type", "Instance type matches the profile", ("instance_types",), "static"
    ),
    Requirement(
        "tuning",
        "Host tuning",
        ("sysctl", "nic_max_errors", "nic_max_dropped", "ping"),
        "static",
        figures=(
            Figure("errors", "NIC errors (new since the previous run)", trended=True, counter=True),
            Figure("dropped", "NIC drops (new since the previous run)", trended=True, counter=True),
        ),
    ),
    # GPU node health; a CPU-only profile (expect.gpu.count unset) skips them
    Requirement("gpu_inventory", "GPU count, model and driver modules", ("gpu",), "static"),
    Requirement("gpu_health", "GPU memory health (ECC, row remapping)", ("gpu",), "static"),
    Requirement("gpu_xid", "No GPU Xid errors since boot", ("gpu",), "static"),
    Requirement("gpu_clocks", "GPU clocks, persistence and MIG mode", ("gpu",), "static"),
    Requirement(
        "pcie_links", "PCIe links at full speed (GPUs, RDMA devices)", ("gpu", "rdma"), "static"
    ),
    Requirement("memlock", "Locked memory for NCCL (ulimit -l)", ("gpu",), "static"),
    Requirement("gpu_topology", "GPU-NIC topology (NUMA, NCCL_IB_HCA)", ("gpu",), "static"),
    Requirement("versions", "Driver and library versions agree", ("versions",), "static"),
    Requirement(
        "ib_write_bw",
        "RDMA write bandwidth (ib_write_bw)",
        ("ib_write_bw",),
        "benchmark",
        figures=(Figure("bw_avg", "ib_write_bw average bandwidth", trended=True),),
    ),
    Requirement(
        "ib_write_lat",
        "RDMA write latency (ib_write_lat)",
        ("ib_write_lat",),
        "benchmark",
        figures=(
            Figure("t_avg", "ib_write_lat average latency", trended=True),
            Figure("t_p99", "ib_write_lat p99 latency", trended=True),
        ),
    ),
    Requirement(
        "perftest_localization",
        "No suspect node in the pair schedule",
        ("ib_write_bw", "ib_write_lat"),
        "benchmark",
        row=False,
    ),
    Requirement("erdma_eri_bw", "Bandwidth of every ERI", ("erdma",), "benchmark"),
    Requirement("erdma_instance_bw", "All ERIs of a node at once", ("erdma",), "benchmark"),
    Requirement("erdma_gdr_bw", "GPUDirect RDMA bandwidth of every ERI", ("erdma",), "benchmark"),
    Requirement(
        "nccl_busbw",
        "NCCL bus bandwidth",
        ("nccl",),
        "benchmark",
        figures=(
            Figure("avg_busbw", "NCCL all_reduce average bus bandwidth", trended=True),
            Figure("busbw_largest", "NCCL all_reduce bus bandwidth, largest size", trended=True),
        ),
    ),
    Requirement("nccl_transport", "NCCL on eRDMA, no socket fallback", ("erdma",), "benchmark"),
    Requirement(
        "rdma_counters", "No RDMA/NIC error counter moved in benchmarks", ("erdma",), "benchmark"
    ),
    Requirement(
        "cpfs",
        "CPFS",
        ("cpfs",),
        "benchmark",
        figures=(
            Figure("write_bw", "CPFS write throughput per node", trended=True),
            Figure("read_bw", "CPFS read throughput per node", trended=True),
        ),
    ),
    # GPUs under load: every GPU of every node at once (campaigns/gpu_load)
    Requirement(
        "gpu_compute",
        "GPU compute under load (TFLOPS, clocks, throttling)",
        ("gpu_load",),
        "gpu_load",
        figures=(
            Figure("bf16_tflops", "GPU bf16 GEMM under load", True, column="bf16 TFLOPS"),
            Figure(
                "tf32_tflops", "GPU tf32 GEMM under load", True, column="tf32 TFLOPS", position=1
            ),
            Figure("sm_clock_mhz", "GPU SM clock under load", column="SM MHz", position=5),
            Figure("power_w_max", "GPU power under load", column="Power W", position=6),
            Figure("temperature_c_max", "GPU temperature under load", column="Temp C", position=7),
        ),
        group=GPUS_UNDER_LOAD,
    ),
    Requirement(
        "gpu_correctness",
        "GPU results agree across the cluster (checksum)",
        (),
        "gpu_load",
        group=GPUS_UNDER_LOAD,
    ),
    Requirement(
        "gpu_bandwidth",
        "GPU memory and host-link bandwidth under load",
        ("gpu_load",),
        "gpu_load",
        figures=(
            Figure(
                "hbm_gbs", "GPU memory (HBM) copy bandwidth", True, column="HBM GB/s", position=2
            ),
            Figure("h2d_gbs", "GPU host-to-device bandwidth", True, column="H2D GB/s", position=3),
            Figure("d2h_gbs", "GPU device-to-host bandwidth", True, column="D2H GB/s", position=4),
        ),
        group=GPUS_UNDER_LOAD,
    ),
    Requirement(
        "gpu_nvlink",
        "NVLink links up and error-free",
        ("gpu_load",),
        "gpu_load",
        group=GPUS_UNDER_LOAD,
    ),
    Requirement(
        "gpu_dcgm",
        "DCGM diagnostics pass on every GPU",
        ("gpu_load",),
        "gpu_load",
        group=GPUS_UNDER_LOAD,
    ),
    Requirement(
        "gpu_nccl_node",
        "Single-node NCCL all-reduce on every node",
        ("gpu_load",),
        "gpu_load",
        figures=(
            Figure(
                "busbw_largest",
                "Single-node all-reduce bus bandwidth, largest size",
                trended=True,
            ),
        ),
    ),
    Requirement(
        "gpu_p2p",
        "GPU-to-GPU bandwidth by link (NVLink, PCIe)",
        ("gpu_load",),
        "gpu_load",
        group=GPUS_UNDER_LOAD,
    ),
    Requirement(
        "gpu_fabric",
        "NVSwitch fabric and Fabric Manager ready",
        ("gpu_load",),
        "gpu_load",
        group=GPUS_UNDER_LOAD,
    ),
)

BY_ID: dict[str, Requirement] = {r.id: r for r in REQUIREMENTS}


def requirement(check_id: str) -> Requirement:
    """The registered requirement `check_id` (KeyError names the unknown id)."""
    try:
        return BY_ID[check_id]
    except KeyError:
        raise KeyError(f"no requirement {check_id!r} in the registry") from None


def title(check_id: str) -> str:
    """The requirement's title, or the id itself for a site's own unregistered check."""
    found = BY_ID.get(check_id)
    return found.title if found else check_id


def mark(check_id: str) -> pytest.MarkDecorator:
    """`pytest.mark.check(id, title)` for a registered requirement (what a suite test carries)."""
    return pytest.mark.check(check_id, requirement(check_id).title)


NOT_APPLICABLE_MARK = "not_applicable_when"


def not_applicable_when(
    ruled_out: Callable[[Expectations], object], reason: str
) -> pytest.MarkDecorator:
    """Mark a per-node test that the inventory's expectations alone rule out (`ruled_out(expect)`
    is true; `reason` starts `not applicable: `). A ruled-out test is collected once, as
    `[all-nodes]`, skipped with that reason, instead of once per node."""
    if not reason.startswith("not applicable: "):
        raise ValueError(f"a not-applicable reason starts 'not applicable: ': {reason!r}")
    return getattr(pytest.mark, NOT_APPLICABLE_MARK)(ruled_out, reason)


def not_applicable(definition: pytest.Item, expect: Expectations) -> str | None:
    """Why the expectations rule out this test everywhere (its `not_applicable_when`
    markers, nearest first), or None."""
    for marker in definition.iter_markers(NOT_APPLICABLE_MARK):
        ruled_out, reason = marker.args
        if ruled_out(expect):
            return reason
    return None


def certificate_specs(*, with_reachability: bool = True) -> tuple[tuple[str, str], ...]:
    """(id, title) of the certificate's requirement rows, in registry order."""
    return tuple(
        (r.id, r.title)
        for r in REQUIREMENTS
        if r.row and (with_reachability or r.id != "reachability")
    )


def trended_figures() -> tuple[tuple[str, Figure], ...]:
    """(requirement id, figure) of every figure the trends page follows, in registry order."""
    return tuple((r.id, f) for r in REQUIREMENTS for f in r.figures if f.trended)


def group_requirements(group: str) -> tuple[str, ...]:
    """The ids of the requirements whose measurements fill a certificate group's table."""
    return tuple(r.id for r in REQUIREMENTS if r.group == group)


def group_columns(group: str) -> tuple[Figure, ...]:
    """The figure columns of a certificate group's table, by position."""
    figures = (f for r in REQUIREMENTS if r.group == group for f in r.figures if f.column)
    return tuple(sorted(figures, key=lambda f: f.position))
