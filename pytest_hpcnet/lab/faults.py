"""Faults injected into lab nodes for real, and healed exactly: `hpcnet lab fault|heal`.

Each fault is recorded in the node's `faults` (id -> what was injected) with what healing
restores in `undo`, so `heal` puts back exactly the value before the fault and `status`
lists what is active. Healing goes in reverse order of injection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_hpcnet.lab import burnin, cgroups, host_view, shaping
from pytest_hpcnet.lab import fault_actions as act
from pytest_hpcnet.lab.state import DEFAULT_STATE_DIR, LabNode, LabState, locked
from pytest_hpcnet.lab.system import LabError


@dataclass(frozen=True)
class FaultKind:
    """One kind of fault: how to inject it, how to heal it, and the requirements (registry
    ids) it fails on the node it is injected on (the lab tests that inject it see them fail;
    empty: a fault the suite must ride out)."""

    name: str
    usage: str
    summary: str
    inject: act.Injector
    heal: act.Healer
    needs_arg: bool = False
    breaks: tuple[str, ...] = ()


def _gpu(kind: str, summary: str, breaks: tuple[str, ...]) -> FaultKind:
    """A fault the emulated nvidia-smi applies to one GPU of the node (default GPU 3)."""
    return FaultKind(
        kind,
        f"{kind} NODE [GPU={act.DEFAULT_GPU}]",
        f"emulated nvidia-smi: {summary}",
        *act.recorded_fault(kind, act.DEFAULT_GPU, r"[0-7]", "a GPU index 0..7"),
        breaks=breaks,
    )


KINDS: dict[str, FaultKind] = {
    k.name: k
    for k in (
        FaultKind(
            "mtu",
            "mtu NODE [MTU][@IFACE]",
            "set eth0's MTU, or IFACE's (eth1: the second ERI's ENI) (default 1500)",
            act.inject_mtu,
            act.heal_mtu,
            breaks=("mtu", "path_mtu"),
        ),
        FaultKind(
            "block",
            "block NODE PROTO/PORT[-PORT][@IFACE]",
            "iptables DROP of that destination port (range), on IFACE only when given",
            *act.firewall_fault("block"),
            needs_arg=True,
            breaks=("security_group", "cloud_audit"),
        ),
        FaultKind(
            "reject",
            "reject NODE PROTO/PORT[-PORT][@IFACE]",
            "iptables REJECT (tcp-reset / icmp-port-unreachable)",
            *act.firewall_fault("reject"),
            needs_arg=True,
            breaks=("security_group", "cloud_audit"),
        ),
        FaultKind(
            "no-rdma",
            "no-rdma NODE",
            "no eRDMA device",
            *act.rdma_fault("no-rdma"),
            breaks=(
                "erdma",
                "erdma_identity",
                "erdma_driver",
                "erdma_port",
                "gpu_topology",
                "pcie_links",
                "mtu",
                "path_mtu",
            ),
        ),
        FaultKind(
            "port-down",
            "port-down NODE",
            "eRDMA port PORT_DOWN",
            *act.rdma_fault("port-down"),
            breaks=("erdma",),
        ),
        FaultKind(
            "vswitch",
            "vswitch NODE [ID]",
            f"metadata vswitch-id (default {act.DEFAULT_VSWITCH})",
            *act.metadata_fault("vswitch_id", act.DEFAULT_VSWITCH),
            breaks=("placement",),
        ),
        FaultKind(
            "zone",
            "zone NODE [ID]",
            f"metadata zone-id (default {act.DEFAULT_ZONE})",
            *act.metadata_fault("zone_id", act.DEFAULT_ZONE),
            breaks=("placement",),
        ),
        FaultKind(
            "imds-token",
            "imds-token NODE",
            "metadata GETs need a token (403 without)",
            act.inject_imds_token,
            act.heal_imds_token,
            breaks=(),
        ),
        FaultKind(
            "sysctl",
            "sysctl NODE [KEY=VALUE]",
            f"set a sysctl in the node (default {act.DEFAULT_SYSCTL})",
            act.inject_sysctl,
            act.heal_sysctl,
            breaks=("tuning",),
        ),
        FaultKind(
            "nic-errors",
            "nic-errors NODE",
            "eth0 RX dropped > 0 (oversized frames from the bridge)",
            act.inject_nic_errors,
            act.heal_nic_errors,
            breaks=("tuning",),
        ),
        FaultKind(
            "slow",
            "slow NODE [RATE]",
            f"tc tbf on eth0 and its host veth, both ways (default {shaping.DEFAULT_RATE})",
            act.inject_slow,
            act.heal_slow,
            breaks=("ib_write_bw", "erdma_eri_bw", "nccl_busbw", "perftest_localization"),
        ),
        FaultKind(
            "latency",
            "latency NODE [MS]",
            "emulated: lab tools delay each message the node sends "
            f"(default {act.DEFAULT_LATENCY_MS})",
            *act.recorded_fault(
                "latency", act.DEFAULT_LATENCY_MS, act.NUMBER, "milliseconds such as 5"
            ),
            breaks=("ib_write_lat",),
        ),
        FaultKind(
            "rdma-slow",
            "rdma-slow NODE [RATE]",
            f"emulated perftest on the node paces itself (default {act.DEFAULT_RDMA_SLOW})",
            *act.recorded_fault(
                "rdma-slow", act.DEFAULT_RDMA_SLOW, act.RATE, "a rate such as 500mbit"
            ),
            breaks=("ib_write_bw",),
        ),
        FaultKind(
            "nccl-slow",
            "nccl-slow NODE [FACTOR]",
            "emulated all_reduce rank stretches each all-reduce "
            f"(default x{act.DEFAULT_NCCL_SLOW})",
            *act.recorded_fault(
                "nccl-slow", act.DEFAULT_NCCL_SLOW, act.NUMBER, "a slowdown factor such as 4"
            ),
            breaks=("nccl_busbw",),
        ),
        FaultKind(
            "fio-slow",
            "fio-slow NODE [PERCENT]",
            f"cpu cgroup caps the node's sshd tree, so fio (default {cgroups.DEFAULT_PERCENT}%)",
            act.inject_fio_slow,
            act.heal_fio_slow,
            breaks=("cpfs",),
        ),
        # eRDMA depth
        FaultKind(
            "eri-down",
            "eri-down NODE [DEV|IFACE]",
            "one ERI port DOWN (IFACE: that ERI's interface taken down for real)",
            *act.eri_fault("eri-down", True),
            breaks=(
                "erdma",
                "erdma_eri_bw",
                "erdma_instance_bw",
                "perftest_localization",
                "nccl_transport",
            ),
        ),
        FaultKind(
            "eri-slow",
            "eri-slow NODE [DEV|IFACE[@RATE]]",
            f"emulated perftest on one ERI paces itself (default {act.DEFAULT_RDMA_SLOW})",
            *act.eri_fault("eri-slow", False),
            breaks=("erdma_eri_bw", "perftest_localization", "burnin_network"),
        ),
        FaultKind(
            "nccl-socket",
            "nccl-socket NODE",
            "emulated NCCL finds no IB device on the node: Using network Socket",
            act.inject_nccl_socket,
            act.heal_nothing,
            breaks=("nccl_transport",),
        ),
        FaultKind(
            "nccl-crash",
            "nccl-crash NODE",
            "emulated all_reduce rank prints `Test NCCL failure` after the whole table and "
            "dies of SIGSEGV (mpirun: exited on signal 11)",
            act.inject_nccl_crash,
            act.heal_nothing,
            breaks=("nccl_busbw",),
        ),
        FaultKind(
            "nccl-incast",
            "nccl-incast NODE [FACTOR]",
            "emulated alltoall and all-gather rank (many-to-one receives) stretched by FACTOR "
            f"(default x{act.DEFAULT_NCCL_SLOW}); all-reduce, reduce-scatter, sendrecv untouched",
            *act.recorded_fault(
                "nccl-incast", act.DEFAULT_NCCL_SLOW, act.NUMBER, "a slowdown factor such as 4"
            ),
            breaks=("nccl_alltoall", "nccl_all_gather"),
        ),
        FaultKind(
            "nccl-socket-one",
            "nccl-socket-one NODE [COLLECTIVE]",
            "emulated NCCL uses sockets on the node for one collective only (default alltoall; "
            "all_gather, reduce_scatter, sendrecv): `Using network Socket` in its launch",
            *act.recorded_fault(
                "nccl-socket-one",
                "alltoall",
                r"all_gather|reduce_scatter|alltoall|sendrecv",
                "a collective: all_gather, reduce_scatter, alltoall or sendrecv",
            ),
            breaks=("nccl_all_gather", "nccl_reduce_scatter", "nccl_alltoall", "nccl_sendrecv"),
        ),
        FaultKind(
            "nccl-rail-slow",
            "nccl-rail-slow NODE [DEV[@FACTOR]]",
            "emulated all_reduce rank stretched by FACTOR (default x10) where NCCL uses that "
            "ERI alone (its rail run); with every ERI the slow rail is averaged away",
            *act.eri_fault("nccl-rail-slow", False),
            breaks=("nccl_rail",),
        ),
        FaultKind(
            "nccl-net-slow",
            "nccl-net-slow NODE [FACTOR]",
            "emulated all_reduce rank stretched by FACTOR only in a network-only run (P2P and "
            f"SHM off; default x{act.DEFAULT_NCCL_SLOW}): the normal run passes",
            *act.recorded_fault(
                "nccl-net-slow", act.DEFAULT_NCCL_SLOW, act.NUMBER, "a slowdown factor such as 4"
            ),
            breaks=("nccl_network_only",),
        ),
        FaultKind(
            "gid-shift",
            "gid-shift NODE [DEV]",
            "an extra IPv6 GID moves one ERI's IPv4 GID from index 1 to 2",
            *act.eri_fault("gid-shift", True),
            breaks=("erdma_port",),
        ),
        FaultKind(
            "rate-limit-drops",
            "rate-limit-drops NODE [DEV]",
            "traffic on one ERI raises its hw_*bps_limit_drop_cnt counters",
            *act.eri_fault("rate-limit-drops", False),
            breaks=("rdma_counters",),
        ),
        FaultKind(
            "eri-pcie-downgrade",
            "eri-pcie-downgrade NODE [DEV]",
            "one ERI's PCIe link in sysfs at x8 (max x16)",
            *act.eri_fault("eri-pcie-downgrade", True),
            breaks=("pcie_links",),
        ),
        # GPU node health
        _gpu("gpu-missing", "that GPU is not enumerated (7 GPUs)", breaks=("gpu_inventory",)),
        _gpu(
            "gpu-ecc",
            "4 volatile uncorrected ECC errors and a pending row remap",
            breaks=("gpu_health",),
        ),
        _gpu("gpu-throttle", "HW slowdown and HW thermal slowdown active", breaks=("gpu_clocks",)),
        _gpu("gpu-pcie-downgrade", "PCIe link gen4 x8 (max gen5 x16)", breaks=("pcie_links",)),
        FaultKind(
            "gpu-xid",
            f"gpu-xid NODE [XID={act.DEFAULT_XID}]",
            "an NVRM Xid line for GPU 3 in the node's emulated kernel log (dmesg, journalctl -k)",
            act.inject_gpu_xid,
            act.heal_gpu_xid,
            breaks=("gpu_xid",),
        ),
        FaultKind(
            "nvswitch-sxid",
            f"nvswitch-sxid NODE [SXID={act.DEFAULT_SXID}]",
            "a non-fatal NVSwitch SXid event (its Data, severity and engine lines) in the "
            "node's emulated kernel log; the static Xid check reads GPU Xids only",
            act.inject_nvswitch_sxid,
            act.heal_gpu_xid,
            breaks=("burnin",),
        ),
        FaultKind(
            "driver-mismatch",
            f"driver-mismatch NODE [VERSION={act.DEFAULT_DRIVER}]",
            "emulated nvidia-smi reports another driver version",
            *act.recorded_fault(
                "driver-mismatch", act.DEFAULT_DRIVER, r"\d+\.\d+(?:\.\d+)?", "a version"
            ),
            breaks=("versions", "firmware"),  # the GSP firmware ships with the driver
        ),
        FaultKind(
            "vbios",
            "vbios NODE [GPU VALUE]",
            "emulated nvidia-smi reports another VBIOS on one GPU (default GPU 3 96.00.A5.00.1B)",
            *act.recorded_fault("vbios", "3 96.00.a5.00.1b", r"[0-7] [0-9a-z.]+", "GPU VALUE"),
            breaks=("firmware",),
        ),
        FaultKind(
            "power-cap",
            "power-cap NODE [GPU WATTS]",
            "emulated nvidia-smi enforces a lower power limit on one GPU (default GPU 3 at 500 W)",
            *act.recorded_fault("power-cap", "3 500", r"[0-7] [1-9][0-9]{1,3}", "GPU WATTS"),
            breaks=("gpu_power_limit",),
        ),
        FaultKind(
            "nic-firmware",
            "nic-firmware NODE [VALUE]",
            "emulated ethtool -i reports that firmware-version on the node's netdevs",
            *act.recorded_fault("nic-firmware", "1.2.3", r"[0-9a-z][0-9a-z._ -]*", "a version"),
            breaks=("firmware",),
        ),
    )
}


# GPUs under load: applied by the emulated torch (and nvidia-smi while a GPU is busy)
def _gpu_load(kind: str, summary: str, breaks: tuple[str, ...]) -> FaultKind:
    """A fault of one GPU under load only (default GPU 3); at rest it looks healthy."""
    return FaultKind(
        kind,
        f"{kind} NODE [GPU={act.DEFAULT_GPU}]",
        f"emulated torch: {summary}",
        *act.recorded_fault(kind, act.DEFAULT_GPU, r"[0-7]", "a GPU index 0..7"),
        breaks=breaks,
    )


KINDS.update(
    (k.name, k)
    for k in (
        _gpu_load("gpu-slow", "that GPU's GEMMs run at 0.6x", breaks=("gpu_compute",)),
        _gpu_load(
            "gpu-hot",
            "HW thermal slowdown at 91 C under load only, GEMMs at 0.7x",
            breaks=("gpu_compute",),
        ),
        _gpu_load(
            "gpu-checksum",
            "that GPU's products differ (silent data corruption)",
            breaks=("gpu_correctness",),
        ),
        _gpu_load(
            "gpu-hbm-slow", "that GPU's device-to-device copies at 0.5x", breaks=("gpu_bandwidth",)
        ),
        _gpu_load(
            "gpu-host-slow", "that GPU's host copies (H2D, D2H) at 0.5x", breaks=("gpu_bandwidth",)
        ),
        _gpu("nvlink-down", "NVLink links 4 and 5 of that GPU <inactive>", breaks=("gpu_nvlink",)),
        _gpu(
            "nvlink-errors",
            "NVLink link 2 of that GPU: 40 replay, 1 recovery, 12 CRC errors",
            breaks=("gpu_nvlink",),
        ),
        FaultKind(
            "nccl-node-slow",
            "nccl-node-slow NODE [FACTOR=4]",
            "emulated all_reduce_perf -g N on that node: its bus bandwidth divided by FACTOR",
            *act.recorded_fault("nccl-node-slow", "4", act.NUMBER, "a slowdown factor such as 4"),
            breaks=("gpu_nccl_node",),
        ),
        FaultKind(
            "dcgm-fail",
            f"dcgm-fail NODE [GPU={act.DEFAULT_GPU}]",
            "emulated dcgmi diag: that GPU fails the level's last hardware test",
            *act.recorded_fault("dcgm-fail", act.DEFAULT_GPU, r"[0-7]", "a GPU index 0..7"),
            breaks=("gpu_dcgm",),
        ),
    )
)


# The lab's control plane (cloud_world.py): the console and the host, together or apart
KINDS.update(
    (k.name, k)
    for k in (
        FaultKind(
            "sg-drop",
            "sg-drop NODE PROTO/PORT[-PORT]",
            "console only: a security group Drop rule for that port at the node (iptables "
            "still lets it in)",
            *act.console_fault("sg-drop", host_too=False),
            needs_arg=True,
            breaks=("cloud_audit",),
        ),
        FaultKind(
            "sg-block",
            "sg-block NODE PROTO/PORT[-PORT]",
            "console and host: the security group Drop rule and an iptables DROP of that port",
            *act.console_fault("sg-block", host_too=True),
            needs_arg=True,
            breaks=("cloud_audit", "security_group"),
        ),
        FaultKind(
            "nic-index",
            "nic-index NODE [INDEX=0]",
            "console: every ERI of the node attached on that NetworkCardIndex",
            *act.recorded_fault("nic-index", "0", r"[0-9]", "a NIC index 0..9"),
            breaks=("erdma_nic_index",),
        ),
    )
)


# The host itself: its /proc and sysfs view (lab/host_view.py) and the emulated chronyc
KINDS.update(
    (k.name, k)
    for k in (
        FaultKind(
            "memory",
            f"memory NODE [GIB={host_view.DEFAULTS['memory']}]",
            "MemTotal in the node's /proc/meminfo (a DIMM missing)",
            *host_view.view_fault("memory"),
            breaks=("host_hardware",),
        ),
        FaultKind(
            "aer",
            "aer NODE DEVICE fatal|nonfatal|correctable N",
            "N AER errors of that severity in the sysfs counters of DEVICE (gpuN, erdma_N)",
            *host_view.view_fault("aer"),
            needs_arg=True,
            breaks=("pcie_aer",),
        ),
        FaultKind(
            "clocksource",
            f"clocksource NODE [NAME={host_view.DEFAULTS['clocksource']}]",
            "the node's current clocksource in sysfs",
            *host_view.view_fault("clocksource"),
            breaks=("host_settings",),
        ),
        FaultKind(
            "governor",
            f"governor NODE [NAME={host_view.DEFAULTS['governor']}]",
            "every CPU's cpufreq scaling_governor in sysfs",
            *host_view.view_fault("governor"),
            breaks=("host_settings",),
        ),
        FaultKind(
            "software",
            f"software NODE [ITEM VERSION={host_view.DEFAULTS['software']}]",
            "another kernel or OS release (the node's /proc and /etc view), NCCL or "
            "rdma-core (the emulated dpkg-query) on the node",
            *host_view.view_fault("software"),
            breaks=("versions",),
        ),
        FaultKind(
            "clock-skew",
            "clock-skew NODE [SECONDS=2]",
            "emulated chronyc tracking: the system time that many seconds fast (- slow)",
            *act.recorded_fault("clock-skew", "2", r"-?\d+(?:\.\d+)?", "seconds such as 2"),
            breaks=("host_settings",),
        ),
    )
)


# GPU-to-GPU and NVSwitch (the GPU engineers' block): applied by the emulated tools
KINDS.update(
    (k.name, k)
    for k in (
        FaultKind(
            "p2p-slow",
            "p2p-slow NODE [PAIR=2-5]",
            "emulated nvbandwidth: that NVLink GPU pair (both ways) at 0.45x",
            *act.recorded_fault("p2p-slow", "2-5", r"[0-7]-[0-7]", "a GPU pair such as 2-5"),
            breaks=("gpu_p2p",),
        ),
        _gpu(
            "fabric-fail",
            "that GPU's NVSwitch fabric state In Progress (nvidia-smi -q)",
            breaks=("gpu_fabric",),
        ),
        FaultKind(
            "fabricmanager-down",
            "fabricmanager-down NODE [STATE=inactive]",
            "emulated systemctl: nvidia-fabricmanager not active (inactive or failed)",
            *act.recorded_fault(
                "fabricmanager-down", "inactive", r"inactive|failed", "inactive or failed"
            ),
            breaks=("gpu_fabric",),
        ),
    )
)


# Burn-in: faults that appear with time (lab/burnin.py), applied by the emulated tools
KINDS.update(
    (k.name, k)
    for k in (
        FaultKind(
            "burnin-throttle",
            "burnin-throttle NODE GPU AFTER_S",
            "emulated nvidia-smi and torch: HW thermal slowdown at 91 C, GEMMs at 0.7x, "
            "from AFTER_S seconds on",
            *burnin.timed_fault("burnin-throttle"),
            needs_arg=True,
            breaks=("burnin",),
        ),
        FaultKind(
            "burnin-ecc",
            "burnin-ecc NODE GPU AFTER_S",
            "emulated nvidia-smi: correctable ECC counting, one uncorrectable and a remapped "
            "row, from AFTER_S seconds on",
            *burnin.timed_fault("burnin-ecc"),
            needs_arg=True,
            breaks=("burnin",),
        ),
        FaultKind(
            "burnin-checksum",
            "burnin-checksum NODE GPU AFTER_WINDOWS",
            "emulated torch: that GPU's products differ after AFTER_WINDOWS burn-in windows",
            *burnin.timed_fault("burnin-checksum", windows=True),
            needs_arg=True,
            breaks=("burnin",),
        ),
        FaultKind(
            "burnin-flap",
            "burnin-flap NODE ERI PERIOD_S",
            "that ERI's link flaps from PERIOD_S on, every PERIOD_S: its netdev down for real "
            f"{burnin.FLAP_DOWN_S:g} s, a connect timeout counted (emulated rdma statistic), "
            "frames over its MTU dropped for real (RX dropped)",
            *burnin.flap_fault(),
            needs_arg=True,
            breaks=("burnin",),
        ),
    )
)


def _kind_of(fault_id: str) -> FaultKind:
    return KINDS[fault_id.partition(":")[0]]


def _load(state_dir: Path) -> LabState:
    state = LabState.load(state_dir)
    if state is None:
        raise LabError(f"no lab at {state_dir} (hpcnet lab up --nodes 4)")
    return state


def _node(state: LabState, name: str) -> LabNode:
    try:
        return state.node(name)
    except KeyError:
        names = ", ".join(n.name for n in state.nodes)
        raise LabError(f"unknown node {name!r} (the lab has {names})") from None


def inject(
    kind: str, node_name: str, arg: str | None = None, state_dir: Path = DEFAULT_STATE_DIR
) -> str:
    """Inject one fault for real and record it; returns a one-line description."""
    fault = KINDS.get(kind)
    if fault is None:
        raise LabError(f"unknown fault kind {kind!r} (kinds: {', '.join(KINDS)})")
    if fault.needs_arg and not arg:
        raise LabError(f"fault {kind} needs an argument: hpcnet lab fault {fault.usage}")
    with locked(state_dir):
        state = _load(state_dir)
        node = _node(state, node_name)
        fault_id, shown, undo = fault.inject(state, node, arg)
        node.faults[fault_id] = shown
        node.undo.setdefault(fault_id, undo)
        state.save()
    return f"{node.name}: {fault_id}{'=' + shown if shown else ''}"


def heal(target: str, state_dir: Path = DEFAULT_STATE_DIR) -> list[str]:
    """Heal every fault of one node (or `all`), newest first; returns what was healed."""
    return _heal(state_dir, target, lambda fault_id: True)


def _heal(state_dir: Path, target: str, which: Callable[[str], bool]) -> list[str]:
    """Heal the faults `which` picks on one node (or `all`), newest first, under the lab's
    lock; returns what was healed."""
    healed: list[str] = []
    with locked(state_dir):
        state = _load(state_dir)
        nodes = state.nodes if target == "all" else [_node(state, target)]
        try:
            for node in nodes:
                for fault_id in reversed(list(node.faults)):
                    if not which(fault_id):
                        continue
                    _kind_of(fault_id).heal(state, node, fault_id, node.undo.get(fault_id, ""))
                    node.faults.pop(fault_id, None)
                    node.undo.pop(fault_id, None)
                    healed.append(f"{node.name}: {fault_id}")
        finally:
            state.save()
    return healed


# Transient or persistent: what a reboot (the lab control plane's RebootInstance) clears
TRANSIENT = frozenset(
    {"gpu-xid", "nvswitch-sxid", "gpu-ecc", "gpu-hot", "fabric-fail", "fabricmanager-down"}
)
"""Faults a GPU reset or a reboot clears (an Xid or SXid in the kernel log of the last boot,
volatile ECC counts and a pending row remap, a hot GPU, a fabric not yet registered, a stopped
service); every other fault is persistent: it is there again after the reboot (a slow or
corrupting GPU, a link down, a throttled clock, a missing device, a setting)."""


def persistence(fault_id: str) -> str:
    """`transient` or `persistent` (a reboot clears the first kind only)."""
    return "transient" if fault_id.partition(":")[0] in TRANSIENT else "persistent"


def heal_transient(node_name: str, state_dir: Path = DEFAULT_STATE_DIR) -> list[str]:
    """Heal the node's transient faults, newest first (what its reboot clears); returns
    what was healed. Persistent faults stay."""
    return _heal(state_dir, node_name, lambda fault_id: persistence(fault_id) == "transient")
