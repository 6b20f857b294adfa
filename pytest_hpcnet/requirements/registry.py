"""The one catalogue of requirements.

Each requirement is declared here once: its judges, the facts sections they read, its figures
and its certificate group. The suites' `check` markers (`mark`), the certificate's requirement
table (`certificate_specs`), its GPU tables (`group_requirements`, `group_columns`), the
trends page (`trended_figures`), the merge's pair requirements (`pair_requirements`) and the
terminal summary (`title`) all read it; add a requirement here, then its judge, probe and
suite test (`tests/unit/test_registry_complete.py` checks each entry is whole).

The registry imports no judge: `judges` names each as `"module:function"` under
`pytest_hpcnet.requirements`, and `judge_functions` imports them on first use, so the report
and scope layers that read the catalogue pull in no judge. A facts section is named as its
probe declares it (`GPU_QUERY.name`) where the probe has a `Section` constant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Literal

import pytest

from pytest_hpcnet.probes.gpu import GPU_QUERY

if TYPE_CHECKING:
    from pytest_hpcnet.inventory.expectations import Expectations

Selector = Literal["static", "benchmark", "gpu_load"]
GPUS_UNDER_LOAD = "gpus_under_load"
"""The certificate group of the requirements whose measurements fill its per-GPU table."""
GPU_NODES = "gpu_nodes"
"""The certificate group of the per-node GPU requirements (its GPUs table: count, model,
driver, health, GPU-NIC map); the cluster-wide `versions` is in the versions table."""
JUDGES_PACKAGE = "pytest_hpcnet.requirements"
"""Where a requirement's `judges` references ("module:function") are looked up."""


@dataclass(frozen=True)
class Figure:
    """A figure a requirement's judge records (the measurement's `name`, in `unit`): `trended`
    puts it on the trends page (a `counter`, a total since boot, as deltas between runs);
    `column` is its header in its group's certificate table, at `position` among the group's
    columns."""

    name: str
    label: str
    unit: str
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
    judge records that a page shows; `group` the certificate table its measurements fill;
    `judges` its judge functions, one per suite test that decides it ("module:function" under
    `pytest_hpcnet.requirements`); `sections` the facts sections its tests read (by the name
    each probe frames it under); `pair` whether a test of it is measured per node pair."""

    id: str
    title: str
    expects: tuple[str, ...]
    marker: Selector
    row: bool = True
    within: str | None = None
    figures: tuple[Figure, ...] = ()
    group: str | None = None
    judges: tuple[str, ...] = ()
    sections: tuple[str, ...] = ()
    pair: bool = False


COLLECTIVE_JUDGES = (
    "nccl_collectives:judge_collective_selected",
    "nccl_collectives:judge_collective_run",
    "nccl_collectives:judge_collective_correct",
    "nccl_collectives:judge_collective_transport",
    "nccl_collectives:judge_collective_busbw",
)
"""The judges of each collective beyond all-reduce (one suite test per collective)."""


REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement(
        "reachability",
        "Nodes reachable over SSH",
        (),
        "static",
        judges=("network:judge_reachability",),
        sections=("hostname", "kernel", "metadata"),
    ),
    Requirement(
        "erdma",
        "eRDMA devices",
        ("rdma",),
        "static",
        judges=(
            "rdma:judge_node_devices",
            "rdma:judge_node_ports",
            "rdma:judge_tools_agree",
            "rdma:judge_kernel_module",
            "rdma:judge_compat_mode",
        ),
        sections=("ibv_devinfo_v", "rdma_link", "erdma_module", "compat_mode"),
    ),
    Requirement(
        "erdma_identity",
        "Every ERI present (by driver)",
        ("rdma", "erdma"),
        "static",
        judges=("erdma:judge_erdma_identity",),
        sections=("erdma_identity",),
    ),
    Requirement(
        "erdma_driver",
        "eRDMA driver state",
        ("erdma",),
        "static",
        judges=("erdma:judge_erdma_driver",),
        sections=("erdma_driver",),
    ),
    Requirement(
        "erdma_port",
        "eRDMA active MTU, GID index, NUMA",
        ("mtu", "erdma"),
        "static",
        judges=("erdma:judge_eri_active_mtu", "erdma:judge_eri_gid", "erdma:judge_erdma_numa"),
        sections=("ibv_devinfo_v", "links", "rdma_link", "addr", "erdma_identity"),
    ),
    Requirement(
        "erdma_gdr",
        "GPUDirect RDMA readiness",
        ("erdma",),
        "static",
        judges=("erdma:judge_erdma_gdr",),
        sections=("erdma_gdr",),
    ),
    Requirement(
        "mtu",
        "Jumbo MTU",
        ("mtu", "jumbo_frames"),
        "static",
        judges=("mtu:judge_node_mtu", "mtu:judge_node_ll128_rule", "mtu:judge_same_interface_mtu"),
        sections=("links", "erdma_identity", "ibv_devinfo_v", "rdma_link"),
    ),
    Requirement(
        "path_mtu", "Path MTU", ("mtu",), "static", judges=("mtu:judge_pair_path_mtu",), pair=True
    ),
    Requirement(
        "security_group",
        "Security group",
        ("ports",),
        "static",
        judges=("network:judge_required_ports",),
        pair=True,
    ),
    Requirement("acl", "Network ACL", ("flows",), "static", judges=("network:judge_acl_flow",)),
    Requirement(
        "cloud_audit",
        "Cloud control plane",
        ("ports", "flows", "rdma"),
        "static",
        judges=(
            "cloud:judge_required_flows",
            "cloud:judge_planes_agree",
            "cloud:judge_listed_decision",
            "cloud:judge_external_decisions",
            "cloud:judge_instance_eri",
        ),
        pair=True,
    ),
    Requirement(
        "erdma_nic_index",
        "ERIs attached: count and distinct NIC indexes",
        ("erdma",),
        "static",
        within="cloud_audit",
        judges=("erdma:judge_eri_attachments",),
    ),
    Requirement(
        "placement",
        "Placement",
        ("placement",),
        "static",
        judges=("network:judge_placement",),
        sections=("metadata",),
    ),
    Requirement(
        "instance_type",
        "Instance type matches the profile",
        ("instance_types",),
        "static",
        judges=("instance_types:judge_instance_types",),
        sections=("metadata",),
    ),
    Requirement(
        "tuning",
        "Host tuning",
        ("sysctl", "nic_max_errors", "nic_max_dropped", "ping"),
        "static",
        figures=(
            Figure(
                "errors",
                "NIC errors (new since the previous run)",
                "packets",
                trended=True,
                counter=True,
            ),
            Figure(
                "dropped",
                "NIC drops (new since the previous run)",
                "packets",
                trended=True,
                counter=True,
            ),
        ),
        judges=("host:judge_sysctl", "host:judge_nic_counters", "host:judge_icmp_latency"),
        sections=("sysctl", "links"),
        pair=True,
    ),
    # GPU node health; a CPU-only profile (expect.gpu.count unset) skips them
    Requirement(
        "gpu_inventory",
        "GPU count, model and driver modules",
        ("gpu",),
        "static",
        group=GPU_NODES,
        judges=("gpu:judge_count_model", "gpu_node:judge_modules"),
        sections=(GPU_QUERY.name, "gpu_modules", "gpu_driver", "gpu_cuda"),
    ),
    Requirement(
        "gpu_health",
        "GPU memory health (ECC, row remapping)",
        ("gpu",),
        "static",
        group=GPU_NODES,
        judges=("gpu:judge_ecc",),
        sections=(GPU_QUERY.name, "gpu_driver", "gpu_cuda"),
    ),
    Requirement(
        "gpu_xid",
        "No GPU Xid errors since boot",
        ("gpu",),
        "static",
        group=GPU_NODES,
        judges=("gpu:judge_xid",),
        sections=("gpu_klog", GPU_QUERY.name, "gpu_driver", "gpu_cuda"),
    ),
    Requirement(
        "gpu_clocks",
        "GPU clocks, persistence and MIG mode",
        ("gpu",),
        "static",
        group=GPU_NODES,
        judges=("gpu:judge_throttle", "gpu:judge_persistence", "gpu:judge_mig"),
        sections=(GPU_QUERY.name, "gpu_driver", "gpu_cuda"),
    ),
    Requirement(
        "pcie_links",
        "PCIe links at full speed (GPUs, RDMA devices)",
        ("gpu", "rdma"),
        "static",
        group=GPU_NODES,
        judges=("gpu:judge_pcie", "gpu_node:judge_rdma_pcie"),
        sections=(GPU_QUERY.name, "rdma_sysfs", "gpu_driver", "gpu_cuda"),
    ),
    Requirement(
        "memlock",
        "Locked memory for NCCL (ulimit -l)",
        ("gpu",),
        "static",
        group=GPU_NODES,
        judges=("gpu_node:judge_memlock",),
        sections=("gpu_memlock", GPU_QUERY.name, "gpu_driver", "gpu_cuda"),
    ),
    Requirement(
        "gpu_topology",
        "GPU-NIC topology (NUMA, NCCL_IB_HCA)",
        ("gpu",),
        "static",
        group=GPU_NODES,
        judges=("gpu_node:judge_nccl_ib_hca", "gpu_node:judge_gpu_nic_numa"),
        sections=("gpu_topo", "rdma_sysfs", GPU_QUERY.name, "gpu_driver", "gpu_cuda"),
    ),
    Requirement(
        "versions",
        "Driver and library versions agree",
        ("versions",),
        "static",
        judges=("gpu_node:judge_versions",),
        sections=("versions", GPU_QUERY.name, "gpu_driver", "gpu_cuda"),
    ),
    Requirement(
        "ib_write_bw",
        "RDMA write bandwidth (ib_write_bw)",
        ("ib_write_bw",),
        "benchmark",
        figures=(Figure("bw_avg", "ib_write_bw average bandwidth", "Gbit/s", trended=True),),
        judges=("perftest:judge_pair_bandwidth",),
        pair=True,
    ),
    Requirement(
        "ib_write_lat",
        "RDMA write latency (ib_write_lat)",
        ("ib_write_lat",),
        "benchmark",
        figures=(
            Figure("t_avg", "ib_write_lat average latency", "usec", trended=True),
            Figure("t_p99", "ib_write_lat p99 latency", "usec", trended=True),
        ),
        judges=("perftest:judge_pair_latency",),
        pair=True,
    ),
    Requirement(
        "perftest_localization",
        "No suspect node in the pair schedule",
        ("ib_write_bw", "ib_write_lat"),
        "benchmark",
        row=False,
        judges=("perftest:judge_no_suspects",),
    ),
    Requirement(
        "erdma_eri_bw",
        "Bandwidth of every ERI",
        ("erdma",),
        "benchmark",
        judges=("perftest:judge_every_eri",),
        pair=True,
    ),
    Requirement(
        "erdma_instance_bw",
        "All ERIs of a node at once",
        ("erdma",),
        "benchmark",
        judges=("perftest:judge_eris_to_sum", "perftest:judge_all_eris_at_once"),
        sections=("erdma_identity", "ibv_devinfo_v"),
    ),
    Requirement(
        "erdma_gdr_bw",
        "GPUDirect RDMA bandwidth of every ERI",
        ("erdma",),
        "benchmark",
        judges=("perftest:judge_gdr_every_eri",),
    ),
    Requirement(
        "nccl_busbw",
        "NCCL bus bandwidth",
        ("nccl",),
        "benchmark",
        figures=(
            Figure("avg_busbw", "NCCL all_reduce average bus bandwidth", "GB/s", trended=True),
            Figure(
                "busbw_largest",
                "NCCL all_reduce bus bandwidth, largest size",
                "GB/s",
                trended=True,
            ),
        ),
        judges=(
            "nccl:judge_average_busbw",
            "nccl:judge_largest_busbw",
            "nccl:judge_no_wrong_values",
        ),
        sections=("hostname",),
    ),
    Requirement(
        "nccl_transport",
        "NCCL on eRDMA, no socket fallback",
        ("erdma",),
        "benchmark",
        judges=("nccl:judge_nccl_network_used", "nccl:judge_nccl_traffic"),
    ),
    Requirement(
        "nccl_all_gather",
        "NCCL all-gather across all nodes",
        ("nccl", "erdma"),
        "benchmark",
        figures=(
            Figure("avg_busbw", "NCCL all_gather average bus bandwidth", "GB/s", trended=True),
            Figure(
                "busbw_largest", "NCCL all_gather bus bandwidth, largest size", "GB/s", trended=True
            ),
        ),
        judges=COLLECTIVE_JUDGES,
        sections=("hostname",),
    ),
    Requirement(
        "nccl_reduce_scatter",
        "NCCL reduce-scatter across all nodes",
        ("nccl", "erdma"),
        "benchmark",
        figures=(
            Figure("avg_busbw", "NCCL reduce_scatter average bus bandwidth", "GB/s", trended=True),
            Figure(
                "busbw_largest",
                "NCCL reduce_scatter bus bandwidth, largest size",
                "GB/s",
                trended=True,
            ),
        ),
        judges=COLLECTIVE_JUDGES,
        sections=("hostname",),
    ),
    Requirement(
        "nccl_alltoall",
        "NCCL all-to-all across all nodes",
        ("nccl", "erdma"),
        "benchmark",
        figures=(
            Figure("avg_busbw", "NCCL alltoall average bus bandwidth", "GB/s", trended=True),
            Figure(
                "busbw_largest", "NCCL alltoall bus bandwidth, largest size", "GB/s", trended=True
            ),
        ),
        judges=COLLECTIVE_JUDGES,
        sections=("hostname",),
    ),
    Requirement(
        "nccl_sendrecv",
        "NCCL send/receive (ring neighbours) across all nodes",
        ("nccl", "erdma"),
        "benchmark",
        figures=(
            Figure("avg_busbw", "NCCL sendrecv average bus bandwidth", "GB/s", trended=True),
            Figure(
                "busbw_largest", "NCCL sendrecv bus bandwidth, largest size", "GB/s", trended=True
            ),
        ),
        judges=COLLECTIVE_JUDGES,
        sections=("hostname",),
    ),
    Requirement(
        "rdma_counters",
        "No RDMA/NIC error counter moved in benchmarks",
        ("erdma",),
        "benchmark",
        judges=("perftest:judge_counters_moved",),
    ),
    Requirement(
        "cpfs",
        "CPFS",
        ("cpfs",),
        "benchmark",
        figures=(
            Figure("write_bw", "CPFS write throughput per node", "MB/s", trended=True),
            Figure("read_bw", "CPFS read throughput per node", "MB/s", trended=True),
        ),
        judges=(
            "cpfs_mount:judge_cpfs_mount",
            "cpfs_fio:judge_node_fio",
            "cpfs_fio:judge_cpfs_aggregate",
        ),
        sections=("cpfs_mount",),
    ),
    # GPUs under load: every GPU of every node at once (campaigns/gpu_load)
    Requirement(
        "gpu_compute",
        "GPU compute under load (TFLOPS, clocks, throttling)",
        ("gpu_load",),
        "gpu_load",
        figures=(
            Figure(
                "bf16_tflops",
                "GPU bf16 GEMM under load",
                "TFLOPS",
                trended=True,
                column="bf16 TFLOPS",
            ),
            Figure(
                "tf32_tflops",
                "GPU tf32 GEMM under load",
                "TFLOPS",
                trended=True,
                column="tf32 TFLOPS",
                position=1,
            ),
            Figure("sm_clock_mhz", "GPU SM clock under load", "MHz", column="SM MHz", position=5),
            Figure("power_w_max", "GPU power under load", "W", column="Power W", position=6),
            Figure(
                "temperature_c_max",
                "GPU temperature under load",
                "C",
                column="Temp C",
                position=7,
            ),
        ),
        group=GPUS_UNDER_LOAD,
        judges=("gpu_load:judge_gpu_compute",),
        sections=("gpu_engines",),
    ),
    Requirement(
        "gpu_correctness",
        "GPU results agree across the cluster (checksum)",
        (),
        "gpu_load",
        group=GPUS_UNDER_LOAD,
        judges=("gpu_load:judge_gpu_correctness",),
        sections=("gpu_engines",),
    ),
    Requirement(
        "gpu_bandwidth",
        "GPU memory and host-link bandwidth under load",
        ("gpu_load",),
        "gpu_load",
        figures=(
            Figure(
                "hbm_gbs",
                "GPU memory (HBM) copy bandwidth",
                "GB/s",
                trended=True,
                column="HBM GB/s",
                position=2,
            ),
            Figure(
                "h2d_gbs",
                "GPU host-to-device bandwidth",
                "GB/s",
                trended=True,
                column="H2D GB/s",
                position=3,
            ),
            Figure(
                "d2h_gbs",
                "GPU device-to-host bandwidth",
                "GB/s",
                trended=True,
                column="D2H GB/s",
                position=4,
            ),
        ),
        group=GPUS_UNDER_LOAD,
        judges=("gpu_load:judge_gpu_bandwidth",),
        sections=("gpu_engines", GPU_QUERY.name),
    ),
    Requirement(
        "gpu_nvlink",
        "NVLink links up and error-free",
        ("gpu_load",),
        "gpu_load",
        group=GPUS_UNDER_LOAD,
        judges=("gpu_nvlink:judge_gpu_nvlink",),
        sections=("gpu_nvlink_status", "gpu_nvlink_errors", GPU_QUERY.name),
    ),
    Requirement(
        "gpu_dcgm",
        "DCGM diagnostics pass on every GPU",
        ("gpu_load",),
        "gpu_load",
        group=GPUS_UNDER_LOAD,
        judges=("gpu_dcgm:judge_gpu_dcgm",),
        sections=(GPU_QUERY.name, "gpu_engines"),
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
                "GB/s",
                trended=True,
            ),
        ),
        judges=("gpu_nccl_node:judge_gpu_nccl_node",),
        sections=("gpu_engines", GPU_QUERY.name),
    ),
    Requirement(
        "gpu_p2p",
        "GPU-to-GPU bandwidth by link (NVLink, PCIe)",
        ("gpu_load",),
        "gpu_load",
        group=GPUS_UNDER_LOAD,
        judges=("gpu_p2p:judge_gpu_p2p",),
        sections=("gpu_topo", GPU_QUERY.name, "gpu_engines"),
    ),
    Requirement(
        "gpu_fabric",
        "NVSwitch fabric and Fabric Manager ready",
        ("gpu_load",),
        "gpu_load",
        group=GPUS_UNDER_LOAD,
        judges=("gpu_fabric:judge_gpu_fabric",),
        sections=("gpu_fabric", GPU_QUERY.name),
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


def pair_requirements() -> tuple[str, ...]:
    """The ids of the requirements measured per node pair, in registry order."""
    return tuple(r.id for r in REQUIREMENTS if r.pair)


def judge_functions(check_id: str) -> tuple[Callable[..., object], ...]:
    """The requirement's judge functions, imported now (ImportError or AttributeError names a
    reference that no longer resolves)."""
    found = []
    for reference in requirement(check_id).judges:
        module, _, name = reference.partition(":")
        found.append(getattr(import_module(f"{JUDGES_PACKAGE}.{module}"), name))
    return tuple(found)
