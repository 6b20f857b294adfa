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

from pytest_hpcnet.probes.erdma import ERDMA_DRIVER_STATE, ERDMA_IDENTITY
from pytest_hpcnet.probes.erdma_gdr import ERDMA_GDR
from pytest_hpcnet.probes.fio import CPFS_MOUNT
from pytest_hpcnet.probes.firmware import BIOS, GPU_FIRMWARE, NIC_INFO
from pytest_hpcnet.probes.gpu import GPU_QUERY
from pytest_hpcnet.probes.gpu_fabric import GPU_FABRIC
from pytest_hpcnet.probes.gpu_host import GPU_DRIVER, GPU_MEMLOCK, GPU_MODULES
from pytest_hpcnet.probes.gpu_load import GPU_ENGINES
from pytest_hpcnet.probes.gpu_nvlink import NVLINK_ERRORS, NVLINK_STATUS
from pytest_hpcnet.probes.gpu_rdma import GPU_CUDA, RDMA_SYSFS
from pytest_hpcnet.probes.gpu_topo import GPU_TOPO
from pytest_hpcnet.probes.gpu_xid import GPU_KLOG, XID_MEANINGS, XID_SOURCE
from pytest_hpcnet.probes.host_hardware import HOST_HARDWARE
from pytest_hpcnet.probes.host_settings import HOST_SETTINGS
from pytest_hpcnet.probes.identity import HOSTNAME, KERNEL
from pytest_hpcnet.probes.links import ADDR, LINKS
from pytest_hpcnet.probes.metadata import METADATA
from pytest_hpcnet.probes.pcie_aer import PCIE_DEVICES
from pytest_hpcnet.probes.rdma import COMPAT_MODE, ERDMA_MODULE
from pytest_hpcnet.probes.rdma_parsers import IBV_DEVINFO, RDMA_LINK
from pytest_hpcnet.probes.sysctl import SYSCTL
from pytest_hpcnet.probes.timesync import TIMESYNC
from pytest_hpcnet.probes.versions import VERSIONS

if TYPE_CHECKING:
    from pytest_hpcnet.inventory.expectations import Expectations

Selector = Literal["static", "benchmark", "gpu_load", "burnin"]
Repair = Literal["config", "reset", "reboot", "replace"]
REPAIRS: tuple[Repair, ...] = ("config", "reset", "reboot", "replace")
"""Repair classes, least to most drastic: `config` (the operator fixes a setting; never
rebooted), `reset` (a GPU reset where no process holds the GPU), `reboot`, `replace` (a
ticket to the cloud provider)."""
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
class BoundKey:
    """A bound a requirement's judge reads from the expectations: `key` is its dotted path
    (`ib_write_bw.bound_gbps`; properties too), multiplied by the value at `scale` where the
    judge takes a share of a rated figure. The certificate shows it beside the requirement
    whatever the outcome, so one not measured still says what it would have been held to."""

    figure: str
    key: str
    comparison: str
    unit: str = ""
    scale: str = ""


@dataclass(frozen=True)
class FaultCode:
    """A stable code for one way a requirement fails (`HPCNET-GPU-ECC-DBE`): what it means,
    its repair class and what to do. docs/fault-codes.md lists every one."""

    code: str
    meaning: str
    repair: Repair
    action: str


_XID_REPAIR: dict[int, Repair] = {
    13: "reset",
    31: "reset",
    32: "reset",
    43: "reset",
    45: "reset",
    48: "reset",
    61: "reset",
    62: "reset",
    63: "reset",
    64: "replace",
    68: "reset",
    69: "reset",
    74: "reset",
    79: "reboot",
    92: "replace",
    94: "reset",
    95: "reset",
    119: "reboot",
    120: "reset",
    121: "reboot",
    154: "reboot",
}
"""The repair class of each Xid with a code of its own (NVIDIA's Xid catalog: reset the GPU,
reboot, or have it replaced); an application-caused Xid is reset, then allowed in the
inventory once its cause is read."""
_XID_ACTION: dict[Repair, str] = {
    "reset": "reset the GPU (`nvidia-smi -r`) once no process holds it; replace it if it recurs",
    "reboot": "reboot the instance; replace the GPU if it recurs",
    "replace": "open a ticket: the GPU must be replaced",
}
XID_CODE = "HPCNET-GPU-XID"
"""The default code of an Xid; a listed Xid has `HPCNET-GPU-XID-<n>`."""


def xid_code(xid: int) -> str:
    """The fault code of an Xid: its own where the registry declares one, else `XID_CODE`."""
    return f"{XID_CODE}-{xid}" if xid in _XID_REPAIR else XID_CODE


XID_FAULTS: tuple[FaultCode, ...] = (
    FaultCode(XID_CODE, "an Xid without a code of its own", "reboot", f"read it in {XID_SOURCE}"),
    *(
        FaultCode(
            f"{XID_CODE}-{xid}",
            f"Xid {xid}: {XID_MEANINGS[xid]}",
            repair,
            f"{_XID_ACTION[repair]}; as {XID_SOURCE} says for Xid {xid}",
        )
        for xid, repair in _XID_REPAIR.items()
    ),
)


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
    each probe frames it under); `pair` whether a test of it is measured per node pair;
    `bounds` the absolute bounds its judges read from the expectations;
    `faults` the codes its failures carry, the first the default for a failure no judge
    named more precisely."""

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
    across_nodes: bool = False
    """Measured between nodes, across the cluster as one (the NCCL collectives, the perftest
    localization): not applicable on a one-node inventory."""
    bounds: tuple[BoundKey, ...] = ()
    faults: tuple[FaultCode, ...] = ()

    @property
    def default_fault(self) -> FaultCode | None:
        """The code of a failure no judge named more precisely (the first of `faults`)."""
        return self.faults[0] if self.faults else None


def collective_code(key: str, cause: str = "") -> str:
    """The fault code of a collective's failure (`HPCNET-NCCL-ALLTOALL-WRONG`): `cause` is
    "" (did not complete, or busbw below its bound), `WRONG`, `SOCKET` or `TRAFFIC`."""
    return "-".join(filter(None, ("HPCNET-NCCL", key.upper().replace("_", "-"), cause)))


def collective_faults(key: str) -> tuple[FaultCode, ...]:
    """The fault codes of one collective beyond all-reduce (its requirement's `faults`)."""
    name = key.replace("_", "-")
    return (
        FaultCode(
            collective_code(key),
            f"NCCL {name} did not complete, or its bus bandwidth is below the bound",
            "config",
            "check NCCL's settings and the bisection's suspect (a slow node or ERI: a ticket)",
        ),
        FaultCode(
            collective_code(key, "WRONG"),
            f"NCCL {name} reported wrong values (data corruption)",
            "replace",
            "drain the suspects and open a ticket",
        ),
        FaultCode(
            collective_code(key, "SOCKET"),
            f"NCCL {name} did not run over eRDMA on a node (socket fallback)",
            "config",
            "install the NCCL net plugin and set NCCL_IB_HCA on that node",
        ),
        FaultCode(
            collective_code(key, "TRAFFIC"),
            f"NCCL {name}: an ERI moved less than the collective's share (NCCL did not use it)",
            "config",
            "check NCCL_IB_HCA and that ERI's port and GID on that node",
        ),
    )


def collective_bounds(key: str) -> tuple[BoundKey, ...]:
    """The busbw floors of one collective (`expect.nccl.collectives.<key>`)."""
    at = f"nccl.collectives.{key}"
    return (
        BoundKey("avg_busbw", f"{at}.min_avg_busbw_gbs", ">=", "GB/s"),
        BoundKey("busbw_largest", f"{at}.min_busbw_largest_gbs", ">=", "GB/s"),
    )


COLLECTIVE_JUDGES = (
    "nccl_collectives:judge_collective_selected",
    "nccl_collectives:judge_collective_run",
    "nccl_collectives:judge_collective_correct",
    "nccl_collectives:judge_collective_transport",
    "nccl_collectives:judge_collective_busbw",
    "nccl_collectives:judge_collective_traffic",
)
"""The judges of each collective beyond all-reduce (one suite test per collective)."""


REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement(
        "reachability",
        "Nodes reachable over SSH",
        (),
        "static",
        faults=(
            FaultCode(
                "HPCNET-NODE-UNREACHABLE",
                "the node did not answer over SSH",
                "reboot",
                "check the instance in the ECS console and reboot it; "
                "if it does not come back, open a ticket",
            ),
        ),
        judges=("network:judge_reachability",),
        sections=(HOSTNAME.name, KERNEL.name, METADATA.name),
    ),
    Requirement(
        "erdma",
        "eRDMA devices",
        ("rdma",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-ERI-DEVICES",
                "fewer eRDMA devices than expected",
                "config",
                "attach the ERIs the profile expects (ECS console) and install the erdma driver",
            ),
            FaultCode(
                "HPCNET-ERI-PORT-DOWN",
                "an eRDMA port is not ACTIVE",
                "reboot",
                "reload the erdma driver or reboot; a port that stays down is a ticket",
            ),
            FaultCode(
                "HPCNET-ERI-TOOLS-DISAGREE",
                "ibv_devinfo and rdma link disagree on devices, ports or states",
                "reboot",
                "reload the erdma driver or reboot",
            ),
            FaultCode(
                "HPCNET-ERI-MODULE",
                "the eRDMA kernel module is not loaded",
                "config",
                "modprobe erdma and load it at boot",
            ),
            FaultCode(
                "HPCNET-ERI-COMPAT-MODE",
                "the eRDMA driver's compat_mode is not the expected one",
                "config",
                "set the erdma module parameter compat_mode and reload the driver",
            ),
        ),
        judges=(
            "rdma:judge_node_devices",
            "rdma:judge_node_ports",
            "rdma:judge_tools_agree",
            "rdma:judge_kernel_module",
            "rdma:judge_compat_mode",
        ),
        sections=(IBV_DEVINFO.name, RDMA_LINK.name, ERDMA_MODULE.name, COMPAT_MODE.name),
    ),
    Requirement(
        "erdma_identity",
        "Every ERI present (by driver)",
        ("rdma", "erdma"),
        "static",
        faults=(
            FaultCode(
                "HPCNET-ERI-MISSING",
                "an expected ERI is not present (by driver)",
                "config",
                "attach an ERI-enabled ENI per expected device; "
                "if attached and absent, open a ticket",
            ),
        ),
        judges=("erdma:judge_erdma_identity",),
        sections=(ERDMA_IDENTITY.name,),
        bounds=(BoundKey("eris", "erdma.eris", "==", "devices"),),
    ),
    Requirement(
        "erdma_driver",
        "eRDMA driver state",
        ("erdma",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-ERI-DRIVER",
                "the eRDMA driver's state is not the expected one",
                "config",
                "install the expected erdma driver version and parameters",
            ),
        ),
        judges=("erdma:judge_erdma_driver",),
        sections=(ERDMA_DRIVER_STATE.name,),
    ),
    Requirement(
        "erdma_port",
        "eRDMA active MTU, GID index, NUMA",
        ("mtu", "erdma"),
        "static",
        faults=(
            FaultCode(
                "HPCNET-ERI-PORT-CONFIG",
                "an ERI's active MTU, GID index or NUMA node is wrong",
                "config",
                "set the interface MTU, GID and NCCL NUMA mapping the profile expects",
            ),
        ),
        judges=("erdma:judge_eri_active_mtu", "erdma:judge_eri_gid", "erdma:judge_erdma_numa"),
        sections=(IBV_DEVINFO.name, LINKS.name, RDMA_LINK.name, ADDR.name, ERDMA_IDENTITY.name),
    ),
    Requirement(
        "erdma_gdr",
        "GPUDirect RDMA readiness",
        ("erdma",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-ERI-GDR",
                "GPUDirect RDMA is not ready (peer memory module)",
                "config",
                "load nvidia_peermem (or the eRDMA GDR module) at boot",
            ),
        ),
        judges=("erdma:judge_erdma_gdr",),
        sections=(ERDMA_GDR.name,),
    ),
    Requirement(
        "mtu",
        "Jumbo MTU",
        ("mtu", "jumbo_frames"),
        "static",
        faults=(
            FaultCode(
                "HPCNET-MTU",
                "an interface's MTU is not the expected jumbo MTU",
                "config",
                "set the interface MTU (and the ENI's) to the profile's value",
            ),
        ),
        judges=("mtu:judge_node_mtu", "mtu:judge_node_ll128_rule", "mtu:judge_same_interface_mtu"),
        sections=(LINKS.name, ERDMA_IDENTITY.name, IBV_DEVINFO.name, RDMA_LINK.name),
        bounds=(BoundKey("mtu", "mtu", "==", "bytes"),),
    ),
    Requirement(
        "path_mtu",
        "Path MTU",
        ("mtu",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-PATH-MTU",
                "the jumbo MTU does not pass between two nodes",
                "config",
                "set the MTU on both ends and on the path (VPC, security group ICMP)",
            ),
        ),
        judges=("mtu:judge_pair_path_mtu",),
        pair=True,
    ),
    Requirement(
        "security_group",
        "Security group",
        ("ports",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-SG-PORTS",
                "a required port is closed between two nodes",
                "config",
                "open the port in the security group",
            ),
        ),
        judges=("network:judge_required_ports",),
        pair=True,
    ),
    Requirement(
        "acl",
        "Network ACL",
        ("flows",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-ACL",
                "a network ACL blocks a required flow",
                "config",
                "allow the flow in the network ACL",
            ),
        ),
        judges=("network:judge_acl_flow",),
    ),
    Requirement(
        "cloud_audit",
        "Cloud control plane",
        ("ports", "flows", "rdma"),
        "static",
        faults=(
            FaultCode(
                "HPCNET-CLOUD-AUDIT",
                "the cloud control plane does not allow what the cluster needs",
                "config",
                "fix the security group, ACL or ERI settings the audit names",
            ),
        ),
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
        faults=(
            FaultCode(
                "HPCNET-ERI-NIC-INDEX",
                "ERIs missing or sharing a NIC index",
                "config",
                "attach one ERI per NIC index the instance type offers",
            ),
        ),
        within="cloud_audit",
        judges=("erdma:judge_eri_attachments",),
    ),
    Requirement(
        "placement",
        "Placement",
        ("placement",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-PLACEMENT",
                "a node is outside the expected zone or deployment set",
                "config",
                "re-create the instance in the expected zone or deployment set",
            ),
        ),
        judges=("network:judge_placement",),
        sections=(METADATA.name,),
    ),
    Requirement(
        "instance_type",
        "Instance type matches the profile",
        ("instance_types",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-INSTANCE-TYPE",
                "a node's instance type is not the profile's",
                "config",
                "use the profile's instance type or the matching profile",
            ),
        ),
        judges=("instance_types:judge_instance_types",),
        sections=(METADATA.name,),
    ),
    Requirement(
        "tuning",
        "Host tuning",
        ("sysctl", "nic_max_errors", "nic_max_dropped", "ping"),
        "static",
        faults=(
            FaultCode(
                "HPCNET-SYSCTL",
                "a kernel setting differs from the profile",
                "config",
                "set the sysctl (and persist it in /etc/sysctl.d)",
            ),
            FaultCode(
                "HPCNET-NIC-ERRORS",
                "NIC errors or drops grew past the bound",
                "replace",
                "check the link and open a ticket with the counters",
            ),
            FaultCode(
                "HPCNET-ICMP-LATENCY",
                "ICMP between two nodes is lost or slow",
                "replace",
                "check the placement and open a ticket with the ping evidence",
            ),
        ),
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
        sections=(SYSCTL.name, LINKS.name),
        pair=True,
        bounds=(
            BoundKey("errors", "nic_max_errors", "<=", "packets"),
            BoundKey("dropped", "nic_max_dropped", "<=", "packets"),
            BoundKey("rtt_avg", "ping.max_avg_ms", "<=", "ms"),
            BoundKey("rtt_max", "ping.max_ms", "<=", "ms"),
        ),
    ),
    Requirement(
        "host_hardware",
        "Host hardware (CPUs, memory, huge pages, local NVMe)",
        ("host",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-HOST-HARDWARE",
                "fewer CPUs or less memory than the instance type, another CPU model, or a "
                "local NVMe disk missing or short",
                "replace",
                "open a ticket naming the figure and the instance type's "
                "(a DIMM or disk is missing)",
            ),
            FaultCode(
                "HPCNET-HUGEPAGES",
                "fewer huge pages than the profile asks",
                "config",
                "reserve them (vm.nr_hugepages, or hugepages= on the kernel command line)",
            ),
        ),
        judges=("host_hardware:judge_host_hardware",),
        sections=(HOST_HARDWARE.name,),
    ),
    Requirement(
        "pcie_aer",
        "No PCIe AER errors (GPUs, ERIs, NVMe)",
        ("host",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-PCIE-AER",
                "a GPU, ERI or NVMe device counted a non-fatal or fatal PCIe error",
                "replace",
                "open a ticket naming the device, its bus id and the counter",
            ),
            FaultCode(
                "HPCNET-PCIE-AER-CORRECTABLE",
                "a device counted more correctable PCIe errors than the bound",
                "replace",
                "a marginal link: re-seat or replace (a ticket) if the count keeps rising",
            ),
        ),
        judges=("pcie_aer:judge_pcie_aer",),
        sections=(PCIE_DEVICES.name,),
    ),
    Requirement(
        "host_settings",
        "Host settings (clocksource, governor, NUMA balancing, THP, IOMMU, time sync)",
        ("host",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-HOST-SETTING",
                "a host setting (clocksource, governor, NUMA balancing, THP, IOMMU) differs "
                "from the profile",
                "config",
                "set it as the profile says (sysctl, kernel command line, cpupower) and "
                "reboot where needed",
            ),
            FaultCode(
                "HPCNET-TIME-SYNC",
                "the clock follows no time source or is off by more than the bound",
                "config",
                "start chronyd with Alibaba's NTP servers and let it step the clock",
            ),
        ),
        judges=("host_settings:judge_host_settings", "host_settings:judge_time_offset"),
        sections=(HOST_SETTINGS.name, TIMESYNC.name),
    ),
    # GPU node health; a CPU-only profile (expect.gpu.count unset) skips them
    Requirement(
        "gpu_inventory",
        "GPU count, model and driver modules",
        ("gpu",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-GPU-COUNT",
                "fewer GPUs than expected (one fell off the bus or is missing)",
                "replace",
                "reboot once; a GPU still missing is a ticket",
            ),
            FaultCode(
                "HPCNET-GPU-MODEL",
                "a GPU is not the profile's model",
                "config",
                "use the profile of this instance type",
            ),
            FaultCode(
                "HPCNET-GPU-MODULES",
                "an expected NVIDIA kernel module is not loaded",
                "config",
                "load the module (nvidia, nvidia_uvm, nvidia_peermem) at boot",
            ),
        ),
        group=GPU_NODES,
        judges=("gpu:judge_count_model", "gpu_node:judge_modules"),
        sections=(GPU_QUERY.name, GPU_MODULES.name, GPU_DRIVER.name, GPU_CUDA.name),
        bounds=(
            BoundKey("count", "gpu.count", "==", "GPUs"),
            BoundKey("model", "gpu.model", "=="),
        ),
    ),
    Requirement(
        "gpu_health",
        "GPU memory health (ECC, row remapping)",
        ("gpu",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-GPU-MEMORY",
                "GPU memory health failed",
                "reset",
                "reset the GPU (nvidia-smi -r); replace it if it fails again",
            ),
            FaultCode(
                "HPCNET-GPU-ECC-OFF",
                "ECC is disabled on a GPU",
                "config",
                "nvidia-smi -e 1, then reboot",
            ),
            FaultCode(
                "HPCNET-GPU-ECC-DBE",
                "volatile uncorrected (double-bit) ECC errors",
                "reset",
                "reset the GPU (nvidia-smi -r) so the row is remapped; replace it if they recur",
            ),
            FaultCode(
                "HPCNET-GPU-PAGE-RETIRE-PENDING",
                "a retired page is pending",
                "reboot",
                "reboot so the page is retired",
            ),
            FaultCode(
                "HPCNET-GPU-ROW-REMAP-PENDING",
                "a row remap is pending",
                "reset",
                "reset the GPU (nvidia-smi -r) so the remap takes effect",
            ),
            FaultCode(
                "HPCNET-GPU-ROW-REMAP-FAIL",
                "a row remap failed (no spare rows)",
                "replace",
                "open a ticket: the GPU must be replaced",
            ),
        ),
        group=GPU_NODES,
        judges=("gpu:judge_ecc",),
        sections=(GPU_QUERY.name, GPU_DRIVER.name, GPU_CUDA.name),
    ),
    Requirement(
        "gpu_xid",
        "No GPU Xid errors since boot",
        ("gpu",),
        "static",
        faults=XID_FAULTS,
        group=GPU_NODES,
        judges=("gpu:judge_xid",),
        sections=(GPU_KLOG.name, GPU_QUERY.name, GPU_DRIVER.name, GPU_CUDA.name),
    ),
    Requirement(
        "gpu_clocks",
        "GPU clocks, persistence and MIG mode",
        ("gpu",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-GPU-SLOWDOWN",
                "a hardware or thermal clock slowdown is active",
                "replace",
                "check cooling and power; a lasting slowdown is a ticket",
            ),
            FaultCode(
                "HPCNET-GPU-PERSISTENCE",
                "persistence mode differs from the profile",
                "config",
                "enable nvidia-persistenced at boot",
            ),
            FaultCode(
                "HPCNET-GPU-MIG",
                "MIG mode differs from the profile",
                "config",
                "nvidia-smi -mig 0|1, then reset the GPU",
            ),
        ),
        group=GPU_NODES,
        judges=("gpu:judge_throttle", "gpu:judge_persistence", "gpu:judge_mig"),
        sections=(GPU_QUERY.name, GPU_DRIVER.name, GPU_CUDA.name),
    ),
    Requirement(
        "gpu_power_limit",
        "GPU power limits at their default",
        ("gpu",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-GPU-POWER-CAP",
                "a GPU's enforced power limit is below its default (or the profile's figure)",
                "config",
                "nvidia-smi -i N -pl <default W> and remove what set it; a board that still "
                "limits the GPU is a ticket",
            ),
        ),
        group=GPU_NODES,
        figures=(Figure("power_limit_w", "Power limit", "W"),),
        bounds=(BoundKey("power_limit_w", "gpu.power_limit_w", ">=", "W"),),
        judges=("gpu_power:judge_power_limit",),
        sections=(GPU_QUERY.name, GPU_DRIVER.name, GPU_CUDA.name),
    ),
    Requirement(
        "pcie_links",
        "PCIe links at full speed (GPUs, RDMA devices, NVMe)",
        ("gpu", "rdma"),
        "static",
        faults=(
            FaultCode(
                "HPCNET-PCIE-DOWNGRADE",
                "a GPU or RDMA device's PCIe link runs below its generation or width",
                "replace",
                "re-check under load; a lasting downgrade is a ticket (riser, slot)",
            ),
        ),
        group=GPU_NODES,
        judges=("gpu:judge_pcie", "gpu_node:judge_rdma_pcie", "pcie_aer:judge_nvme_pcie"),
        sections=(
            GPU_QUERY.name,
            RDMA_SYSFS.name,
            GPU_DRIVER.name,
            GPU_CUDA.name,
            PCIE_DEVICES.name,
        ),
    ),
    Requirement(
        "memlock",
        "Locked memory for NCCL (ulimit -l)",
        ("gpu",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-MEMLOCK",
                "locked memory (ulimit -l) is too small for NCCL",
                "config",
                "set memlock unlimited in limits.conf and the scheduler",
            ),
        ),
        group=GPU_NODES,
        judges=("gpu_node:judge_memlock",),
        sections=(GPU_MEMLOCK.name, GPU_QUERY.name, GPU_DRIVER.name, GPU_CUDA.name),
    ),
    Requirement(
        "gpu_topology",
        "GPU-NIC topology (NUMA, NCCL_IB_HCA)",
        ("gpu",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-GPU-TOPOLOGY",
                "GPU-NIC NUMA mapping or NCCL_IB_HCA is wrong",
                "config",
                "set NCCL_IB_HCA and the GPU-NIC affinity the topology shows",
            ),
        ),
        group=GPU_NODES,
        judges=("gpu_node:judge_nccl_ib_hca", "gpu_node:judge_gpu_nic_numa"),
        sections=(GPU_TOPO.name, RDMA_SYSFS.name, GPU_QUERY.name, GPU_DRIVER.name, GPU_CUDA.name),
    ),
    Requirement(
        "versions",
        "Driver and library versions agree",
        ("versions",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-VERSIONS",
                "driver or library versions differ across the cluster",
                "config",
                "install the same driver, CUDA, NCCL and rdma-core everywhere",
            ),
        ),
        judges=("gpu_node:judge_versions",),
        sections=(VERSIONS.name, GPU_QUERY.name, GPU_DRIVER.name, GPU_CUDA.name),
    ),
    Requirement(
        "firmware",
        "GPU, NIC and BIOS firmware agree",
        ("versions",),
        "static",
        faults=(
            FaultCode(
                "HPCNET-FIRMWARE",
                "a GPU VBIOS, InfoROM or GSP firmware, an ECC mode, a NIC's driver or firmware "
                "or the BIOS differs from its instance type's majority or pin",
                "replace",
                "the cloud provider owns the instance's firmware: open a ticket naming the "
                "value and the one its peers run (an ECC mode is `config`: set it and reboot)",
            ),
            FaultCode(
                "HPCNET-ECC-MODE",
                "a GPU's ECC mode differs from its peers or the pin",
                "config",
                "enable ECC (`nvidia-smi -e 1`) and reboot",
            ),
        ),
        judges=("firmware:judge_firmware",),
        sections=(GPU_FIRMWARE.name, NIC_INFO.name, BIOS.name, METADATA.name),
    ),
    Requirement(
        "ib_write_bw",
        "RDMA write bandwidth (ib_write_bw)",
        ("ib_write_bw",),
        "benchmark",
        faults=(
            FaultCode(
                "HPCNET-RDMA-BW",
                "RDMA write bandwidth between two nodes is below the bound",
                "replace",
                "re-run; the suspect node named by localization gets a ticket",
            ),
        ),
        figures=(Figure("bw_avg", "ib_write_bw average bandwidth", "Gbit/s", trended=True),),
        judges=("perftest:judge_pair_bandwidth",),
        pair=True,
        bounds=(BoundKey("bw_avg", "ib_write_bw.bound_gbps", ">=", "Gbit/s"),),
    ),
    Requirement(
        "ib_write_lat",
        "RDMA write latency (ib_write_lat)",
        ("ib_write_lat",),
        "benchmark",
        faults=(
            FaultCode(
                "HPCNET-RDMA-LAT",
                "RDMA write latency between two nodes is above the bound",
                "replace",
                "re-run; the suspect node named by localization gets a ticket",
            ),
        ),
        figures=(
            Figure("t_avg", "ib_write_lat average latency", "usec", trended=True),
            Figure("t_p99", "ib_write_lat p99 latency", "usec", trended=True),
        ),
        judges=("perftest:judge_pair_latency",),
        pair=True,
        bounds=(
            BoundKey("t_avg", "ib_write_lat.max_avg_us", "<=", "usec"),
            BoundKey("t_p99", "ib_write_lat.max_p99_us", "<=", "usec"),
        ),
    ),
    Requirement(
        "perftest_localization",
        "No suspect node in the pair schedule",
        ("ib_write_bw", "ib_write_lat"),
        "benchmark",
        faults=(
            FaultCode(
                "HPCNET-RDMA-SUSPECT",
                "a node is the common end of failing pairs",
                "replace",
                "drain it and open a ticket with its pairs' evidence",
            ),
        ),
        row=False,
        judges=("perftest:judge_no_suspects",),
        across_nodes=True,
    ),
    Requirement(
        "erdma_eri_bw",
        "Bandwidth of every ERI",
        ("erdma",),
        "benchmark",
        faults=(
            FaultCode(
                "HPCNET-ERI-BW",
                "an ERI's bandwidth is below the bound",
                "replace",
                "re-run; a lasting shortfall is a ticket naming the ERI",
            ),
        ),
        judges=("perftest:judge_every_eri",),
        pair=True,
        bounds=(
            BoundKey("bw_avg", "erdma.per_eri_gbps", ">=", "Gbit/s", scale="erdma.bw_fraction"),
        ),
    ),
    Requirement(
        "erdma_instance_bw",
        "All ERIs of a node at once",
        ("erdma",),
        "benchmark",
        faults=(
            FaultCode(
                "HPCNET-ERI-INSTANCE-BW",
                "all ERIs at once fall short of the instance's bandwidth",
                "replace",
                "re-run; a lasting shortfall is a ticket",
            ),
        ),
        judges=("perftest:judge_eris_to_sum", "perftest:judge_all_eris_at_once"),
        sections=(ERDMA_IDENTITY.name, IBV_DEVINFO.name),
        bounds=(
            BoundKey("sum", "erdma.per_instance_gbps", ">=", "Gbit/s", scale="erdma.bw_fraction"),
        ),
    ),
    Requirement(
        "erdma_gdr_bw",
        "GPUDirect RDMA bandwidth of every ERI",
        ("erdma",),
        "benchmark",
        faults=(
            FaultCode(
                "HPCNET-ERI-GDR-BW",
                "GPUDirect RDMA bandwidth of an ERI is below the bound",
                "replace",
                "check erdma_gdr first; a lasting shortfall is a ticket",
            ),
        ),
        judges=("perftest:judge_gdr_every_eri",),
    ),
    Requirement(
        "nccl_busbw",
        "NCCL bus bandwidth",
        ("nccl",),
        "benchmark",
        faults=(
            FaultCode(
                "HPCNET-NCCL-BUSBW",
                "NCCL bus bandwidth is below the bound",
                "config",
                "check NCCL settings and the bisection's suspects",
            ),
            FaultCode(
                "HPCNET-NCCL-WRONG-VALUES",
                "NCCL reported wrong values (data corruption)",
                "replace",
                "drain the suspects and open a ticket",
            ),
        ),
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
        sections=(HOSTNAME.name,),
        bounds=(
            BoundKey("avg_busbw", "nccl.min_avg_busbw_gbs", ">=", "GB/s"),
            BoundKey("busbw_largest", "nccl.min_busbw_largest_gbs", ">=", "GB/s"),
        ),
        across_nodes=True,
    ),
    Requirement(
        "nccl_transport",
        "NCCL on eRDMA, no socket fallback",
        ("erdma",),
        "benchmark",
        faults=(
            FaultCode(
                "HPCNET-NCCL-SOCKET",
                "NCCL did not run over eRDMA (socket fallback)",
                "config",
                "install the NCCL net plugin and set NCCL_IB_HCA",
            ),
        ),
        judges=("nccl:judge_nccl_network_used", "nccl:judge_nccl_traffic"),
        across_nodes=True,
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
        faults=collective_faults("all_gather"),
        bounds=collective_bounds("all_gather"),
        judges=COLLECTIVE_JUDGES,
        sections=(HOSTNAME.name,),
        across_nodes=True,
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
        faults=collective_faults("reduce_scatter"),
        bounds=collective_bounds("reduce_scatter"),
        judges=COLLECTIVE_JUDGES,
        sections=(HOSTNAME.name,),
        across_nodes=True,
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
        faults=collective_faults("alltoall"),
        bounds=collective_bounds("alltoall"),
        judges=COLLECTIVE_JUDGES,
        sections=(HOSTNAME.name,),
        across_nodes=True,
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
        faults=collective_faults("sendrecv"),
        bounds=collective_bounds("sendrecv"),
        judges=COLLECTIVE_JUDGES,
        sections=(HOSTNAME.name,),
        across_nodes=True,
    ),
    Requirement(
        "nccl_rail",
        "NCCL on each ERI's rail alone",
        ("nccl", "erdma"),
        "benchmark",
        figures=(
            Figure("rail_avg_busbw", "NCCL all_reduce on one ERI, average", "GB/s", trended=True),
            Figure(
                "rail_busbw_largest",
                "NCCL all_reduce on one ERI, largest size",
                "GB/s",
                trended=True,
            ),
        ),
        faults=(
            FaultCode(
                "HPCNET-NCCL-RAIL",
                "one ERI's rail is slow or did not complete (named node and ERI)",
                "config",
                "check that ERI on the suspect node (ib_write_bw, port, PCIe link); a ticket",
            ),
        ),
        bounds=(
            BoundKey("rail_avg_busbw", "nccl.rail.min_avg_busbw_gbs", ">=", "GB/s"),
            BoundKey("rail_busbw_largest", "nccl.rail.min_busbw_largest_gbs", ">=", "GB/s"),
        ),
        judges=("nccl_rail:judge_rails_present", "nccl_rail:judge_nccl_rails"),
        sections=(HOSTNAME.name, GPU_TOPO.name),
        across_nodes=True,
    ),
    Requirement(
        "nccl_network_only",
        "NCCL with the network only (P2P, SHM, NVLS off)",
        ("nccl", "erdma"),
        "benchmark",
        figures=(
            Figure("network_only_avg_busbw", "NCCL network-only average", "GB/s", trended=True),
            Figure(
                "network_only_busbw_largest",
                "NCCL network-only bus bandwidth, largest size",
                "GB/s",
                trended=True,
            ),
        ),
        faults=(
            FaultCode(
                "HPCNET-NCCL-NETWORK-ONLY",
                "with P2P and SHM off, a node's ERIs carry less than its line rate share",
                "config",
                "check the suspect node's ERIs (ib_write_bw, ports, PCIe links); a ticket",
            ),
        ),
        judges=(
            "nccl_network_only:judge_network_only_expected",
            "nccl_network_only:judge_network_only",
        ),
        sections=(HOSTNAME.name,),
        across_nodes=True,
    ),
    Requirement(
        "rdma_counters",
        "No RDMA/NIC error counter moved in benchmarks",
        ("erdma",),
        "benchmark",
        faults=(
            FaultCode(
                "HPCNET-RDMA-COUNTERS",
                "an RDMA or NIC error counter moved during the benchmarks",
                "replace",
                "open a ticket with the counters",
            ),
        ),
        judges=("perftest:judge_counters_moved",),
    ),
    Requirement(
        "cpfs",
        "CPFS",
        ("cpfs",),
        "benchmark",
        faults=(
            FaultCode(
                "HPCNET-CPFS",
                "CPFS is not mounted as expected or below its throughput",
                "config",
                "mount CPFS with the expected options; check the file system's rated throughput",
            ),
        ),
        figures=(
            Figure("write_bw", "CPFS write throughput per node", "MB/s", trended=True),
            Figure("read_bw", "CPFS read throughput per node", "MB/s", trended=True),
        ),
        judges=(
            "cpfs_mount:judge_cpfs_mount",
            "cpfs_fio:judge_node_fio",
            "cpfs_fio:judge_cpfs_aggregate",
        ),
        sections=(CPFS_MOUNT.name,),
        bounds=(
            BoundKey("write_bw", "cpfs.min_write_mbs_per_node", ">=", "MB/s"),
            BoundKey("read_bw", "cpfs.min_read_mbs_per_node", ">=", "MB/s"),
        ),
    ),
    # GPUs under load: every GPU of every node at once (campaigns/gpu_load)
    Requirement(
        "gpu_compute",
        "GPU compute under load (TFLOPS, clocks, throttling)",
        ("gpu_load",),
        "gpu_load",
        faults=(
            FaultCode(
                "HPCNET-GPU-COMPUTE",
                "a GPU's compute under load is below the bound",
                "reset",
                "reset the GPU and re-run under load; replace it if it stays slow",
            ),
        ),
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
        sections=(GPU_ENGINES.name,),
        bounds=(
            BoundKey("bf16_tflops", "gpu_load.min_bf16_tflops", ">=", "TFLOPS"),
            BoundKey("tf32_tflops", "gpu_load.min_tf32_tflops", ">=", "TFLOPS"),
            BoundKey("temperature_c_max", "gpu_load.max_temperature_c", "<=", "C"),
        ),
    ),
    Requirement(
        "gpu_correctness",
        "GPU results agree across the cluster (checksum)",
        (),
        "gpu_load",
        faults=(
            FaultCode(
                "HPCNET-GPU-CHECKSUM",
                "a GPU's results disagree with the cluster's",
                "replace",
                "drain the node and open a ticket: silent data corruption",
            ),
        ),
        group=GPUS_UNDER_LOAD,
        judges=("gpu_load:judge_gpu_correctness",),
        sections=(GPU_ENGINES.name,),
    ),
    Requirement(
        "gpu_bandwidth",
        "GPU memory and host-link bandwidth under load",
        ("gpu_load",),
        "gpu_load",
        faults=(
            FaultCode(
                "HPCNET-GPU-BANDWIDTH",
                "GPU memory or host-link bandwidth under load is below the bound",
                "reset",
                "reset the GPU and re-run; replace it if it stays slow",
            ),
        ),
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
        sections=(GPU_ENGINES.name, GPU_QUERY.name),
        bounds=(
            BoundKey("hbm_gbs", "gpu_load.min_hbm_gbs", ">=", "GB/s"),
            BoundKey("h2d_gbs", "gpu_load.min_h2d_gbs", ">=", "GB/s"),
            BoundKey("d2h_gbs", "gpu_load.min_d2h_gbs", ">=", "GB/s"),
        ),
    ),
    Requirement(
        "gpu_nvlink",
        "NVLink links up and error-free",
        ("gpu_load",),
        "gpu_load",
        faults=(
            FaultCode(
                "HPCNET-GPU-NVLINK",
                "an NVLink link is down or counts errors",
                "reset",
                "reset the GPU; a link that stays down is a ticket",
            ),
        ),
        group=GPUS_UNDER_LOAD,
        judges=("gpu_nvlink:judge_gpu_nvlink",),
        sections=(NVLINK_STATUS.name, NVLINK_ERRORS.name, GPU_QUERY.name),
        bounds=(
            BoundKey("links", "gpu_load.nvlink_links", "==", "links"),
            BoundKey("errors", "gpu_load.nvlink_max_errors", "<=", "errors"),
        ),
    ),
    Requirement(
        "gpu_dcgm",
        "DCGM diagnostics pass on every GPU",
        ("gpu_load",),
        "gpu_load",
        faults=(
            FaultCode(
                "HPCNET-GPU-DCGM",
                "a DCGM diagnostic failed",
                "replace",
                "open a ticket with the DCGM output",
            ),
        ),
        group=GPUS_UNDER_LOAD,
        judges=("gpu_dcgm:judge_gpu_dcgm",),
        sections=(GPU_QUERY.name, GPU_ENGINES.name),
    ),
    Requirement(
        "gpu_nccl_node",
        "Single-node NCCL all-reduce on every node",
        ("gpu_load",),
        "gpu_load",
        faults=(
            FaultCode(
                "HPCNET-GPU-NCCL-NODE",
                "single-node all-reduce is below the bound or failed",
                "reset",
                "reset the GPUs and re-run; replace if it stays slow",
            ),
            FaultCode(
                "HPCNET-NCCL-TESTS-VERSION",
                "a node runs another nccl-tests version than the other nodes",
                "config",
                "build and install the same nccl-tests on every node",
            ),
        ),
        figures=(
            Figure(
                "busbw_largest",
                "Single-node all-reduce bus bandwidth, largest size",
                "GB/s",
                trended=True,
            ),
        ),
        judges=("gpu_nccl_node:judge_gpu_nccl_node",),
        sections=(GPU_ENGINES.name, GPU_QUERY.name),
        bounds=(BoundKey("busbw_largest", "gpu_load.min_node_busbw_gbs", ">=", "GB/s"),),
    ),
    Requirement(
        "gpu_p2p",
        "GPU-to-GPU bandwidth by link (NVLink, PCIe)",
        ("gpu_load",),
        "gpu_load",
        faults=(
            FaultCode(
                "HPCNET-GPU-P2P",
                "GPU-to-GPU bandwidth over a link is below the bound",
                "reset",
                "reset the GPUs and re-run; replace if it stays slow",
            ),
        ),
        group=GPUS_UNDER_LOAD,
        judges=("gpu_p2p:judge_gpu_p2p",),
        sections=(GPU_TOPO.name, GPU_QUERY.name, GPU_ENGINES.name),
        bounds=(
            BoundKey("nvlink", "gpu_load.min_p2p_nvlink_gbs", ">=", "GB/s"),
            BoundKey("pcie", "gpu_load.min_p2p_pcie_gbs", ">=", "GB/s"),
        ),
    ),
    Requirement(
        "gpu_fabric",
        "NVSwitch fabric and Fabric Manager ready",
        ("gpu_load",),
        "gpu_load",
        faults=(
            FaultCode(
                "HPCNET-GPU-FABRIC",
                "the NVSwitch fabric or Fabric Manager is not ready",
                "reboot",
                "restart nvidia-fabricmanager; reboot if the fabric stays down",
            ),
        ),
        group=GPUS_UNDER_LOAD,
        judges=("gpu_fabric:judge_gpu_fabric",),
        sections=(GPU_FABRIC.name, GPU_QUERY.name),
    ),
    Requirement(
        "burnin",
        "Burn-in: every GPU healthy for the whole duration",
        ("gpu_load",),
        "burnin",
        faults=(
            FaultCode(
                "HPCNET-BURNIN-XID",
                "a GPU logged an Xid during the burn-in",
                "reboot",
                "read the Xid in NVIDIA's catalog; reset or reboot, replace if it recurs",
            ),
            FaultCode(
                "HPCNET-BURNIN-ECC",
                "an uncorrectable ECC error during the burn-in",
                "replace",
                "open a ticket: the GPU must be replaced",
            ),
            FaultCode(
                "HPCNET-BURNIN-RETIRED",
                "a page retired or a row remapped during the burn-in",
                "reboot",
                "reboot to apply the remap; replace the GPU if it recurs",
            ),
            FaultCode(
                "HPCNET-BURNIN-THERMAL",
                "a GPU over its temperature ceiling or slowed down once soaked",
                "replace",
                "have the host's cooling and power checked (a ticket)",
            ),
            FaultCode(
                "HPCNET-BURNIN-DRIFT",
                "a GPU's GEMM throughput fell more than the drift bound over time",
                "reboot",
                "check clocks and cooling, reboot and burn in again; replace if it recurs",
            ),
            FaultCode(
                "HPCNET-BURNIN-CHECKSUM",
                "a GPU's result differed from its peers or its earlier windows",
                "replace",
                "open a ticket: silent data corruption, the GPU must be replaced",
            ),
            FaultCode(
                "HPCNET-BURNIN-COPY",
                "a GPU's device-to-device copy bandwidth fell more than the drift bound",
                "reboot",
                "check clocks and cooling, reboot and burn in again; replace if it recurs",
            ),
            FaultCode(
                "HPCNET-BURNIN-PCIE-LINK",
                "a GPU's PCIe link generation or width fell during the burn-in",
                "replace",
                "a ticket: reseat the GPU or have the slot or riser repaired",
            ),
            FaultCode(
                "HPCNET-BURNIN-AER",
                "a GPU or ERI counted a non-fatal or fatal PCIe error during the burn-in",
                "replace",
                "open a ticket naming the device, its counter and the time",
            ),
            FaultCode(
                "HPCNET-BURNIN-AER-CORRECTABLE",
                "a GPU or ERI counted more correctable PCIe errors than the bound in the burn-in",
                "replace",
                "a marginal link: re-seat or replace (a ticket) if the count keeps rising",
            ),
            FaultCode(
                "HPCNET-BURNIN-NVLINK",
                "a GPU's NVLink replay, recovery or CRC errors rose during the burn-in",
                "reset",
                "reset the GPU (nvidia-smi -r); reseat or replace GPU or baseboard if it recurs",
            ),
            FaultCode(
                "HPCNET-BURNIN-NETWORK",
                "an ERI or its NIC counted errors, drops or connect failures during the burn-in",
                "replace",
                "check the ERI's link; open a ticket with the counters and their times",
            ),
            FaultCode(
                "HPCNET-BURNIN-SXID",
                "an NVSwitch logged a fatal or non-fatal SXid during the burn-in",
                "reset",
                "look the SXid up in the Fabric Manager guide; reset the GPUs and switches or "
                "reboot, burn in again; a ticket for the baseboard if it recurs",
            ),
        ),
        judges=("burnin:judge_burnin",),
        sections=(GPU_QUERY.name, GPU_ENGINES.name),
    ),
    Requirement(
        "burnin_network",
        "Burn-in: network traffic within bounds in every round",
        ("ib_write_bw", "nccl"),
        "burnin",
        faults=(
            FaultCode(
                "HPCNET-BURNIN-NET-BW",
                "an ERI's ib_write_bw fell below the bound in a round during the burn-in",
                "replace",
                "re-run ib_write_bw on that pair and ERI; a lasting shortfall is a ticket",
            ),
            FaultCode(
                "HPCNET-BURNIN-NET-NCCL",
                "an all-reduce during the burn-in failed or fell below the NCCL bounds",
                "config",
                "check NCCL's settings and the pairs failing in the same round",
            ),
        ),
        judges=("burnin_network:judge_burnin_network",),
        bounds=(
            BoundKey("bw_avg", "ib_write_bw.bound_gbps", ">=", "Gbit/s"),
            BoundKey("avg_busbw", "nccl.min_avg_busbw_gbs", ">=", "GB/s"),
            BoundKey("busbw_largest", "nccl.min_busbw_largest_gbs", ">=", "GB/s"),
        ),
        across_nodes=True,
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


ONE_NODE = "not applicable: the inventory has one node, so nothing is measured between nodes"


def across_nodes_reason(check_id: str, nodes: int) -> str | None:
    """Why a requirement measured between nodes does not apply to `nodes` nodes, or None."""
    found = BY_ID.get(check_id)
    return ONE_NODE if found is not None and found.across_nodes and nodes < 2 else None


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


def expectation_at(expect: Expectations, key: str) -> object:
    """The expectations' value at a dotted path (`ib_write_bw.bound_gbps`)."""
    found: object = expect
    for part in key.split("."):
        found = getattr(found, part)
    return found


def planned_bounds(expect: Expectations) -> dict[str, list[dict[str, object]]]:
    """Each requirement's absolute bounds as the run's expectations set them (None: unset,
    the figure is measured and not judged by it): the run summary's `bounds`, which the
    certificate shows for a requirement whatever its outcome."""
    planned: dict[str, list[dict[str, object]]] = {}
    for req in REQUIREMENTS:
        for bound in req.bounds:
            value = expectation_at(expect, bound.key)
            if value is not None and bound.scale:
                value = float(value) * float(expectation_at(expect, bound.scale))  # type: ignore[arg-type]
            planned.setdefault(req.id, []).append(
                {
                    "figure": bound.figure,
                    "value": value,
                    "comparison": bound.comparison,
                    "unit": bound.unit,
                    "key": bound.key + (f" x {bound.scale}" if bound.scale else ""),
                }
            )
    return planned


def judge_functions(check_id: str) -> tuple[Callable[..., object], ...]:
    """The requirement's judge functions, imported now (ImportError or AttributeError names a
    reference that no longer resolves)."""
    found = []
    for reference in requirement(check_id).judges:
        module, _, name = reference.partition(":")
        found.append(getattr(import_module(f"{JUDGES_PACKAGE}.{module}"), name))
    return tuple(found)


def default_code(check_id: str) -> str:
    """The code of a failure of `check_id` that no judge named more precisely; "" for a
    site's own unregistered check or a requirement that declares none."""
    found = BY_ID.get(check_id)
    default = found.default_fault if found else None
    return default.code if default else ""


def fault_codes() -> dict[str, tuple[str, FaultCode]]:
    """Every declared code: (requirement id, its `FaultCode`), in registry order."""
    return {f.code: (r.id, f) for r in REQUIREMENTS for f in r.faults}


def fault(code: str) -> FaultCode | None:
    """The declared `FaultCode` of `code`, or None."""
    found = fault_codes().get(code)
    return found[1] if found else None
