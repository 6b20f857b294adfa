"""How each lab fault is injected for real and healed exactly: the injector and healer
functions (eth0, firewall, eRDMA devices, metadata, sysctl, benchmark pacing, one ERI, NCCL's
transport, the GPUs) that `faults.KINDS` names, and their defaults."""

from __future__ import annotations

import re
from collections.abc import Callable

from pytest_hpcnet.lab import cgroups, firewall, links, shaping, tuning
from pytest_hpcnet.lab.emulation import (
    log_sxid,
    log_xid,
    rdma_devices,
    truncate_kernel_log,
    write_rdma_state,
)
from pytest_hpcnet.lab.state import LabNode, LabState
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
DEFAULT_SXID = "22013"
DEFAULT_DRIVER = "570.172.08"
SYSCTL_RE = re.compile(r"^([a-z0-9_]+(?:\.[a-zA-Z0-9_-]+)+)=(.+)$")

Injector = Callable[[LabState, LabNode, str | None], tuple[str, str, str]]
"""(state, node, argument) -> (fault id, what was injected, what heal restores)."""
Healer = Callable[[LabState, LabNode, str, str], None]
"""(state, node, fault id, undo) -> None."""

NUMBER = r"\d+(?:\.\d+)?"
RATE = r"\d+(?:\.\d+)?[kmg]?(?:bit)?"


# --- eth0 -------------------------------------------------------------------


def _interface(node: LabNode, name: str) -> str:
    """A node interface named in a fault's argument (eth0, or eth1 with two ERIs)."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,15}", name) or not links.has_interface(node, name):
        raise LabError(f"{node.name} has no interface {name!r}")
    return name


def inject_mtu(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    """`MTU` on eth0, `MTU@eth1` on one ERI's own interface (fault id `mtu:eth1`)."""
    value, _, where = (arg or "").partition("@")
    if value and not value.isdigit():
        raise LabError(f"MTU must be a number (MTU or MTU@IFACE), got {arg!r}")
    mtu = int(value) if value else DEFAULT_MTU
    interface = _interface(node, where) if where else links.PRIMARY
    fault_id = "mtu" if interface == links.PRIMARY else f"mtu:{interface}"
    was = node.undo.get(fault_id) or str(links.link_mtu(node, interface))
    links.set_mtu(node, mtu, interface)
    return fault_id, str(mtu), was


def heal_mtu(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    interface = fault_id.partition(":")[2] or links.PRIMARY
    links.set_mtu(node, int(undo or node.mtu), interface)


def inject_nic_errors(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    dropped = links.inject_rx_drops(node)
    return "nic-errors", f"rx_dropped={dropped}", ""


def heal_nic_errors(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    from pytest_hpcnet.lab.cluster import ensure_sshd  # cluster imports this module's users

    links.recreate_node_link(node)
    ensure_sshd(state, node)


# --- firewall ---------------------------------------------------------------


def firewall_fault(action: str) -> tuple[Injector, Healer]:
    def inject(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
        proto, port, interface = firewall.parse_fault_target(arg)
        if interface:
            _interface(node, interface)
        firewall.add_rule(node.namespace, action, proto, port, interface)
        shown = port.replace(":", "-") + (f"@{interface}" if interface else "")
        return f"{action}:{proto}/{shown}", "", ""

    def heal(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
        proto, port, interface = firewall.parse_fault_target(fault_id.partition(":")[2])
        firewall.remove_rule(node.namespace, action, proto, port, interface)

    return inject, heal


# --- eRDMA devices ----------------------------------------------------------


def rdma_fault(kind: str) -> tuple[Injector, Healer]:
    def inject(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
        node.faults[kind] = ""
        write_rdma_state(state, node)
        return kind, "", ""

    def heal(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
        node.faults.pop(kind, None)
        write_rdma_state(state, node)

    return inject, heal


# --- metadata ---------------------------------------------------------------


def metadata_fault(attr: str, default: str) -> tuple[Injector, Healer]:
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


def inject_imds_token(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    was = node.undo.get("imds-token") or ("1" if node.metadata_token_required else "0")
    node.metadata_token_required = True
    return "imds-token", "required", was


def heal_imds_token(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    node.metadata_token_required = undo == "1"


# --- sysctl -----------------------------------------------------------------


def inject_sysctl(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    m = SYSCTL_RE.match((arg or DEFAULT_SYSCTL).strip())
    if not m:
        raise LabError(f"expected KEY=VALUE such as {DEFAULT_SYSCTL!r}, got {arg!r}")
    key, value = m.group(1), " ".join(m.group(2).split())
    fault_id = f"sysctl:{key}"
    was = node.undo.get(fault_id) or tuning.read_sysctl(node.namespace, key)
    tuning.apply_sysctls(node.namespace, {key: value})
    return fault_id, value, was


def heal_sysctl(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    tuning.apply_sysctls(node.namespace, {fault_id.partition(":")[2]: undo})


# --- benchmarks -------------------------------------------------------------


def inject_slow(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    return "slow", shaping.limit(node, arg), ""


def heal_slow(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    shaping.unlimit(node)


def recorded_fault(kind: str, default: str, pattern: str, what: str) -> tuple[Injector, Healer]:
    """A fault the emulated tools apply themselves: it only lives in lab.json."""

    def inject(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
        value = (arg or default).strip().lower()
        if not re.fullmatch(pattern, value):
            raise LabError(f"{kind}: expected {what}, got {arg!r}")
        return kind, value, ""

    def heal(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
        return None

    return inject, heal


def inject_fio_slow(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    value = (arg or str(cgroups.DEFAULT_PERCENT)).strip().rstrip("%")
    if not value.isdigit() or not 1 <= int(value) <= 100:
        raise LabError(f"fio-slow: expected a CPU percentage 1..100, got {arg!r}")
    if not node.sshd_pid:
        raise LabError(f"{node.name}: sshd is not running")
    was = cgroups.limit(node.name, node.sshd_pid, int(value))
    return "fio-slow", f"{value}%", node.undo.get("fio-slow") or was


def heal_fio_slow(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    cgroups.unlimit(node.name, undo)


# --- eRDMA depth: one ERI of a node, and NCCL's transport ------------


def eri_fault(kind: str, rewrite: bool) -> tuple[Injector, Healer]:
    """A fault on one device (default the node's last: erdma_1 with two ERIs), named by
    the device or by its interface (`eth1`: the ERI whose netdev it is). `eri-down` given
    an interface takes that link down for real (the ERI's port follows its netdev).

    `rewrite`: the device list changes (port state, GIDs), so rdma.json is rewritten;
    otherwise the emulated tools read the fault from lab.json themselves.
    """

    def inject(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
        on = {d["ports"][0]["netdev"]: d["name"] for d in rdma_devices(node, state.eris)}
        names = [f"erdma_{i}" for i in range(max(1, state.eris))]
        value = (arg or names[-1]).strip()
        device, _, rate = value.partition("@")
        if kind == "eri-down" and device in on:
            links.set_link_up(node, device, False)
            return kind, device, f"link:{device}"
        device = on.get(device, device)
        if device not in names or (rate and not re.fullmatch(RATE, rate.lower())):
            known = ", ".join([*names, *on])
            raise LabError(f"{kind}: expected one of {known} (got {arg!r})")
        value = device + (f"@{rate}" if rate else "")
        node.faults[kind] = value
        if rewrite:
            write_rdma_state(state, node)
        return kind, value, ""

    def heal(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
        if undo.startswith("link:"):
            links.set_link_up(node, undo.partition(":")[2], True)
            return
        node.faults.pop(kind, None)
        if rewrite:
            write_rdma_state(state, node)

    return inject, heal


def inject_nccl_socket(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    return "nccl-socket", "", ""


def inject_nccl_crash(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    return "nccl-crash", "", ""


def heal_nothing(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    return None


def inject_gpu_xid(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    value = (arg or DEFAULT_XID).strip()
    if not value.isdigit():
        raise LabError(f"gpu-xid: expected an XID number such as 79, got {arg!r}")
    size = log_xid(state, node, int(value))
    return "gpu-xid", value, str(size)  # inject() keeps the first injection's size as undo


def heal_gpu_xid(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
    truncate_kernel_log(state, node, int(undo or 0))


def inject_nvswitch_sxid(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
    value = (arg or DEFAULT_SXID).strip()
    if not value.isdigit():
        raise LabError(f"nvswitch-sxid: expected an SXid number such as 22013, got {arg!r}")
    size = log_sxid(state, node, int(value))
    return "nvswitch-sxid", value, str(size)


# --- the lab's control plane (cloud_world.py): a console rule, on its own or with iptables -----


def console_fault(kind: str, host_too: bool) -> tuple[Injector, Healer]:
    """A Drop rule for inbound PROTO/PORT[-PORT] at the node in the console's security group
    (`sg-lab0001`, read live by the lab's control plane); with `host_too` the node's iptables
    drops it as well, so both sides agree that the flow is shut."""

    def inject(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
        if "@" in (arg or ""):
            raise LabError(f"{kind}: a security group rule covers every interface (no @IFACE)")
        proto, port, _ = firewall.parse_fault_target(arg)
        if host_too:
            firewall.add_rule(node.namespace, "block", proto, port)
        return f"{kind}:{proto}/{port.replace(':', '-')}", "", ""

    def heal(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
        if host_too:
            proto, port, _ = firewall.parse_fault_target(fault_id.partition(":")[2])
            firewall.remove_rule(node.namespace, "block", proto, port)

    return inject, heal
