"""Faults injected into lab nodes for real, and healed exactly: `hpcnet lab fault|heal`.

Each fault is recorded in the node's `faults` (id -> what was injected) with what healing
restores in `undo`, so `heal` puts back exactly the value before the fault and `status`
lists what is active. Healing goes in reverse order of injection.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_hpcnet.lab import cgroups, firewall, links, shaping, tuning
from pytest_hpcnet.lab.emulation import log_xid, truncate_kernel_log, write_rdma_state
from pytest_hpcnet.lab.state import DEFAULT_STATE_DIR, LabNode, LabState, locked
from pytest_hpcnet.lab.system import LabError

DEFAULT_MTU = 1500
DEFAULT_VSWITCH = "vsw-lab-odd1"
DEFAULT_ZONE = "cn-lab-b"
DEFAULT_SYSCTL = "net.ipv4.tcp_rmem=4096 131072 6291456"
DEFAULT_LATENCY_MS = "5"
DEFAULT_RDMA_SLOW = "500mbit"
DEFAULT_NCCL_SLOW = "10"
DEFAULT_GPU = "3"
DEFAULT_XID = "94"
DEFAULT_DRIVER = "570.172.08"
_SYSCTL_RE = re.compile(r"^([a-z0-9_]+(?:\.[a-zA-Z0-9_-]+)+)=(.+)$")

Injector = Callable[[LabState, LabNode, str | None], tuple[str, str, str]]
"""(state, node, argument) -> (fault id, what was injected, what heal restores)."""
Healer = Callable[[LabState, LabNode, str, str], None]
"""(state, node, fault id, undo) -> None."""


@dataclass(frozen=True)
class FaultKind:
    """One kind of fault: how to inject it and how to heal it."""

    name: str
    usage: str
    summary: str
    inject: Injector
    heal: Healer
    needs_arg: bool = False


# --- eth0 -------------------------------------------------------------------


def _inject_mtu(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    if arg is not None and not arg.isdigit():
        raise LabError(f"MTU must be a number, got {arg!r}")
    mtu = int(arg) if arg else DEFAULT_MTU
    was = node.undo.get("mtu") or str(links.link_mtu(node))
    links.set_mtu(node, mtu)
    return "mtu", str(mtu), was


def _heal_mtu(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    links.set_mtu(node, int(undo or node.mtu))


def _inject_nic_errors(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    dropped = links.inject_rx_drops(node)
    return "nic-errors", f"rx_dropped={dropped}", ""


def _heal_nic_errors(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    from pytest_hpcnet.lab.cluster import ensure_sshd  # cluster imports this module's users

    links.recreate_node_link(node)
    ensure_sshd(state, node)


# --- firewall ---------------------------------------------------------------


def _firewall(action: str) -> tuple[Injector, Healer]:
    def inject(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
        proto, port = firewall.parse_target(arg)
        firewall.add_rule(node.namespace, action, proto, port)
        return f"{action}:{proto}/{port}", "", ""

    def heal(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
        proto, port = firewall.parse_target(fault_id.partition(":")[2])
        firewall.remove_rule(node.namespace, action, proto, port)

    return inject, heal


# --- eRDMA devices ----------------------------------------------------------


def _rdma(kind: str) -> tuple[Injector, Healer]:
    def inject(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
        node.faults[kind] = ""
        write_rdma_state(state, node)
        return kind, "", ""

    def heal(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
        node.faults.pop(kind, None)
        write_rdma_state(state, node)

    return inject, heal


# --- metadata ---------------------------------------------------------------


def _metadata(attr: str, default: str) -> tuple[Injector, Healer]:
    fault_id = attr.removesuffix("_id")

    def inject(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
        value = arg or default
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", value):
            raise LabError(f"not a usable {fault_id} id: {value!r}")
        was = node.undo.get(fault_id) or getattr(node, attr)
        setattr(node, attr, value)
        return fault_id, value, was

    def heal(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
        setattr(node, attr, undo)

    return inject, heal


def _inject_imds_token(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    was = node.undo.get("imds-token") or ("1" if node.metadata_token_required else "0")
    node.metadata_token_required = True
    return "imds-token", "required", was


def _heal_imds_token(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    node.metadata_token_required = undo == "1"


# --- sysctl -----------------------------------------------------------------


def _inject_sysctl(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    m = _SYSCTL_RE.match((arg or DEFAULT_SYSCTL).strip())
    if not m:
        raise LabError(f"expected KEY=VALUE such as {DEFAULT_SYSCTL!r}, got {arg!r}")
    key, value = m.group(1), " ".join(m.group(2).split())
    fault_id = f"sysctl:{key}"
    was = node.undo.get(fault_id) or tuning.read_sysctl(node.namespace, key)
    tuning.apply_sysctls(node.namespace, {key: value})
    return fault_id, value, was


def _heal_sysctl(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    tuning.apply_sysctls(node.namespace, {fault_id.partition(":")[2]: undo})


# --- benchmarks -------------------------------------------------------------


def _inject_slow(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    return "slow", shaping.limit(node, arg), ""


def _heal_slow(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    shaping.unlimit(node)


def _recorded(kind: str, default: str, pattern: str, what: str) -> tuple[Injector, Healer]:
    """A fault the emulated tools apply themselves: it only lives in lab.json."""

    def inject(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
        value = (arg or default).strip().lower()
        if not re.fullmatch(pattern, value):
            raise LabError(f"{kind}: expected {what}, got {arg!r}")
        return kind, value, ""

    def heal(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
        return None

    return inject, heal


def _inject_fio_slow(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    value = (arg or str(cgroups.DEFAULT_PERCENT)).strip().rstrip("%")
    if not value.isdigit() or not 1 <= int(value) <= 100:
        raise LabError(f"fio-slow: expected a CPU percentage 1..100, got {arg!r}")
    if not node.sshd_pid:
        raise LabError(f"{node.name}: sshd is not running")
    was = cgroups.limit(node.name, node.sshd_pid, int(value))
    return "fio-slow", f"{value}%", node.undo.get("fio-slow") or was


def _heal_fio_slow(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    cgroups.unlimit(node.name, undo)


# --- eRDMA depth (issue 16): one ERI of a node, and NCCL's transport ------------


def _eri(kind: str, rewrite: bool) -> tuple[Injector, Healer]:
    """A fault on one device (default the node's last: erdma_1 with two ERIs).

    `rewrite`: the device list changes (port state, GIDs), so rdma.json is rewritten;
    otherwise the emulated tools read the fault from lab.json themselves.
    """

    def inject(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
        names = [f"erdma_{i}" for i in range(max(1, state.eris))]
        value = (arg or names[-1]).strip()
        device, _, rate = value.partition("@")
        if device not in names or (rate and not re.fullmatch(_RATE, rate.lower())):
            raise LabError(f"{kind}: expected one of {', '.join(names)} (got {arg!r})")
        node.faults[kind] = value
        if rewrite:
            write_rdma_state(state, node)
        return kind, value, ""

    def heal(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
        node.faults.pop(kind, None)
        if rewrite:
            write_rdma_state(state, node)

    return inject, heal


def _inject_nccl_socket(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    return "nccl-socket", "", ""


def _heal_nothing(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    return None


def _inject_gpu_xid(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    value = (arg or DEFAULT_XID).strip()
    if not value.isdigit():
        raise LabError(f"gpu-xid: expected an XID number such as 79, got {arg!r}")
    size = log_xid(state, node, int(value))
    return "gpu-xid", value, str(size)  # inject() keeps the first injection's size as undo


def _heal_gpu_xid(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    truncate_kernel_log(state, node, int(undo or 0))


def _gpu(kind: str, summary: str) -> FaultKind:
    """A fault the emulated nvidia-smi applies to one GPU of the node (default GPU 3)."""
    return FaultKind(
        kind,
        f"{kind} NODE [GPU={DEFAULT_GPU}]",
        f"emulated nvidia-smi: {summary}",
        *_recorded(kind, DEFAULT_GPU, r"[0-7]", "a GPU index 0..7"),
    )


_NUMBER = r"\d+(?:\.\d+)?"
_RATE = r"\d+(?:\.\d+)?[kmg]?(?:bit)?"

KINDS: dict[str, FaultKind] = {
    k.name: k
    for k in (
        FaultKind("mtu", "mtu NODE [MTU]", "set eth0's MTU (default 1500)", _inject_mtu, _heal_mtu),
        FaultKind(
            "block",
            "block NODE PROTO/PORT",
            "iptables DROP of that destination port",
            *_firewall("block"),
            needs_arg=True,
        ),
        FaultKind(
            "reject",
            "reject NODE PROTO/PORT",
            "iptables REJECT (tcp-reset / icmp-port-unreachable)",
            *_firewall("reject"),
            needs_arg=True,
        ),
        FaultKind("no-rdma", "no-rdma NODE", "no eRDMA device", *_rdma("no-rdma")),
        FaultKind("port-down", "port-down NODE", "eRDMA port PORT_DOWN", *_rdma("port-down")),
        FaultKind(
            "vswitch",
            "vswitch NODE [ID]",
            f"metadata vswitch-id (default {DEFAULT_VSWITCH})",
            *_metadata("vswitch_id", DEFAULT_VSWITCH),
        ),
        FaultKind(
            "zone",
            "zone NODE [ID]",
            f"metadata zone-id (default {DEFAULT_ZONE})",
            *_metadata("zone_id", DEFAULT_ZONE),
        ),
        FaultKind(
            "imds-token",
            "imds-token NODE",
            "metadata GETs need a token (403 without)",
            _inject_imds_token,
            _heal_imds_token,
        ),
        FaultKind(
            "sysctl",
            "sysctl NODE [KEY=VALUE]",
            f"set a sysctl in the node (default {DEFAULT_SYSCTL})",
            _inject_sysctl,
            _heal_sysctl,
        ),
        FaultKind(
            "nic-errors",
            "nic-errors NODE",
            "eth0 RX dropped > 0 (oversized frames from the bridge)",
            _inject_nic_errors,
            _heal_nic_errors,
        ),
        FaultKind(
            "slow",
            "slow NODE [RATE]",
            f"tc tbf on eth0 and its host veth, both ways (default {shaping.DEFAULT_RATE})",
            _inject_slow,
            _heal_slow,
        ),
        FaultKind(
            "latency",
            "latency NODE [MS]",
            f"emulated: lab tools delay each message the node sends (default {DEFAULT_LATENCY_MS})",
            *_recorded("latency", DEFAULT_LATENCY_MS, _NUMBER, "milliseconds such as 5"),
        ),
        FaultKind(
            "rdma-slow",
            "rdma-slow NODE [RATE]",
            f"emulated perftest on the node paces itself (default {DEFAULT_RDMA_SLOW})",
            *_recorded("rdma-slow", DEFAULT_RDMA_SLOW, _RATE, "a rate such as 500mbit"),
        ),
        FaultKind(
            "nccl-slow",
            "nccl-slow NODE [FACTOR]",
            f"emulated all_reduce rank stretches each all-reduce (default x{DEFAULT_NCCL_SLOW})",
            *_recorded("nccl-slow", DEFAULT_NCCL_SLOW, _NUMBER, "a slowdown factor such as 4"),
        ),
        FaultKind(
            "fio-slow",
            "fio-slow NODE [PERCENT]",
            f"cpu cgroup caps the node's sshd tree, so fio (default {cgroups.DEFAULT_PERCENT}%)",
            _inject_fio_slow,
            _heal_fio_slow,
        ),
        # eRDMA depth (issue 16)
        FaultKind("eri-down", "eri-down NODE [DEV]", "one ERI port DOWN", *_eri("eri-down", True)),
        FaultKind(
            "eri-slow",
            "eri-slow NODE [DEV[@RATE]]",
            f"emulated perftest on one ERI paces itself (default {DEFAULT_RDMA_SLOW})",
            *_eri("eri-slow", False),
        ),
        FaultKind(
            "nccl-socket",
            "nccl-socket NODE",
            "emulated NCCL finds no IB device on the node: Using network Socket",
            _inject_nccl_socket,
            _heal_nothing,
        ),
        FaultKind(
            "gid-shift",
            "gid-shift NODE [DEV]",
            "an extra IPv6 GID moves one ERI's IPv4 GID from index 1 to 2",
            *_eri("gid-shift", True),
        ),
        FaultKind(
            "rate-limit-drops",
            "rate-limit-drops NODE [DEV]",
            "traffic on one ERI raises its hw_*bps_limit_drop_cnt counters",
            *_eri("rate-limit-drops", False),
        ),
        FaultKind(
            "eri-pcie-downgrade",
            "eri-pcie-downgrade NODE [DEV]",
            "one ERI's PCIe link in sysfs at x8 (max x16)",
            *_eri("eri-pcie-downgrade", True),
        ),
        # GPU node health (issue 15)
        _gpu("gpu-missing", "that GPU is not enumerated (7 GPUs)"),
        _gpu("gpu-ecc", "4 volatile uncorrected ECC errors and a pending row remap"),
        _gpu("gpu-throttle", "HW slowdown and HW thermal slowdown active"),
        _gpu("gpu-pcie-downgrade", "PCIe link gen4 x8 (max gen5 x16)"),
        FaultKind(
            "gpu-xid",
            f"gpu-xid NODE [XID={DEFAULT_XID}]",
            "an NVRM Xid line for GPU 3 in the node's emulated kernel log (dmesg, journalctl -k)",
            _inject_gpu_xid,
            _heal_gpu_xid,
        ),
        FaultKind(
            "driver-mismatch",
            f"driver-mismatch NODE [VERSION={DEFAULT_DRIVER}]",
            "emulated nvidia-smi reports another driver version",
            *_recorded("driver-mismatch", DEFAULT_DRIVER, r"\d+\.\d+(?:\.\d+)?", "a version"),
        ),
    )
}


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
    healed: list[str] = []
    with locked(state_dir):
        state = _load(state_dir)
        nodes = state.nodes if target == "all" else [_node(state, target)]
        try:
            for node in nodes:
                for fault_id in reversed(list(node.faults)):
                    _kind_of(fault_id).heal(state, node, fault_id, node.undo.get(fault_id, ""))
                    node.faults.pop(fault_id, None)
                    node.undo.pop(fault_id, None)
                    healed.append(f"{node.name}: {fault_id}")
        finally:
            state.save()
    return healed
