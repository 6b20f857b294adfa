"""A node's eth0 (and, with two ERIs, its secondary ENI eth1): the veth pairs into the
bridge, their MTU and link state, eth0's counters, real RX drops.

eth1 is a second ENI as on Alibaba Cloud: its own MAC and its own address in
`SECONDARY_SUBNET`, reached over its own veth; `arp_ignore`/`arp_announce` keep each
address answered on its own interface only, so traffic to eth1's address crosses eth1. The
bridge knows each node MAC on its port statically (`pin_mac`), so a link that goes down and up
never makes the bridge flood its frames to the other nodes.

`inject_rx_drops` makes the node's eth0 drop frames for real: the host sends UDP datagrams
as large as the bridge MTU (9000) to the node; the veth hands each frame to eth0, whose
smaller MTU makes the kernel refuse it (is_skb_forwardable) and count it in eth0's RX
`dropped`. Kernel counters cannot be reset, so healing re-creates the veth pair
(`recreate_node_link`): same MAC, address and MTU, counters from zero.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from pathlib import Path

from pytest_hpcnet.lab import tuning
from pytest_hpcnet.lab.state import (
    BRIDGE,
    BRIDGE_ADDRESS,
    BRIDGE_MTU,
    EXTRA_SECONDARY_SUBNETS,
    EXTRA_SUBNETS,
    SECONDARY_SUBNET,
    SUBNET,
    LabNode,
)
from pytest_hpcnet.lab.system import LabError, sh

PRIMARY = "eth0"
SECONDARY = "eth1"
ONE_INTERFACE_ARP = {"net.ipv4.conf.all.arp_ignore": "1", "net.ipv4.conf.all.arp_announce": "2"}
"""Each address answered (and announced) on its own interface only, as ENIs behave."""

IP_MTU_DISCOVER = 10
IP_PMTUDISC_DO = 2
DROP_FRAMES = 16
DISCARD_PORT = 9
TEMP_MTU = 1500
"""The node's MTU while drops are injected when its own MTU equals the bridge's."""
IP_UDP_HEADERS = 28


def bridge_address_commands() -> list[list[str]]:
    """The host's side: its link-local /32 on the bridge and the nodes' /24s on-link behind it."""
    own = ["scope", "link", "src", BRIDGE_ADDRESS]
    routes = [SECONDARY_SUBNET, SUBNET, *EXTRA_SUBNETS, *EXTRA_SECONDARY_SUBNETS]
    return [
        ["ip", "addr", "add", f"{BRIDGE_ADDRESS}/32", "dev", BRIDGE],
        ["ip", "link", "set", BRIDGE, "up"],
        *(["ip", "route", "add", str(net), "dev", BRIDGE, *own] for net in routes),
    ]


def node_address_commands(node: LabNode) -> list[list[str]]:
    """eth0's /32 (so .0 and .255 are plain unicast), then on-link routes to the /24s and host."""
    ns, own = node.namespace, ["scope", "link", "src", node.address]
    return [
        ["ip", "-n", ns, "addr", "add", f"{node.address}/32", "dev", "eth0"],
        ["ip", "-n", ns, "link", "set", "eth0", "up"],
        *(["ip", "-n", ns, "route", "add", str(net), "dev", "eth0", *own]
          for net in (SUBNET, *EXTRA_SUBNETS)),
        ["ip", "-n", ns, "route", "add", f"{BRIDGE_ADDRESS}/32", "dev", "eth0", *own],
    ]  # fmt: skip


def create_node_link(node: LabNode, mtu: int) -> None:
    """The veth pair: host end in the bridge, `eth0` (fixed MAC, address, MTU) in the node."""
    ns, veth = node.namespace, node.host_veth
    peer = ["peer", "name", "eth0"]
    if node.mac:
        peer += ["address", node.mac]
    sh("ip", "link", "add", veth, "mtu", str(BRIDGE_MTU), "type", "veth", *peer, "netns", ns)
    sh("ip", "link", "set", veth, "master", node.bridge, "up")
    pin_mac(veth, node.mac)
    inside = [["link", "set", "eth0", "mtu", str(mtu)]]
    inside += [command[3:] for command in node_address_commands(node)]  # without `ip -n NS`
    sh("ip", "-n", ns, "-batch", "-", input="".join(" ".join(c) + "\n" for c in inside))


def pin_mac(veth: str, mac: str) -> None:
    """The bridge knows the ENI's MAC on its port for good, as a VPC vSwitch knows its ENIs:
    a learned entry is flushed when the link goes down, and until the ENI sent again frames to
    it would flood to every node (and oversized ones drop on all their links)."""
    if mac:
        sh("bridge", "fdb", "replace", mac, "dev", veth, "master", "static")


def secondary_address_commands(node: LabNode) -> list[list[str]]:
    """eth1's /32, then the on-link route to the secondary ENIs' /24 from eth1's address."""
    ns, own = node.namespace, ["scope", "link", "src", node.secondary_address]
    return [
        ["ip", "-n", ns, "addr", "add", f"{node.secondary_address}/32", "dev", SECONDARY],
        ["ip", "-n", ns, "link", "set", SECONDARY, "up"],
        *(["ip", "-n", ns, "route", "add", str(net), "dev", SECONDARY, *own]
          for net in (SECONDARY_SUBNET, *EXTRA_SECONDARY_SUBNETS)),
    ]  # fmt: skip


def create_secondary_link(node: LabNode, mtu: int) -> None:
    """The secondary ENI: a veth pair, host end in the bridge, `eth1` (its own MAC, address
    and MTU) in the node; no-op when it exists."""
    ns, veth = node.namespace, node.host_veth_secondary
    if has_interface(node, SECONDARY):
        return
    tuning.apply_sysctls(ns, ONE_INTERFACE_ARP)
    peer = ["peer", "name", SECONDARY, "address", node.secondary_mac]
    sh("ip", "link", "add", veth, "mtu", str(BRIDGE_MTU), "type", "veth", *peer, "netns", ns)
    sh("ip", "link", "set", veth, "master", node.bridge, "up")
    pin_mac(veth, node.secondary_mac)
    inside = [["link", "set", SECONDARY, "mtu", str(mtu)]]
    inside += [command[3:] for command in secondary_address_commands(node)]
    sh("ip", "-n", ns, "-batch", "-", input="".join(" ".join(c) + "\n" for c in inside))


def remove_secondary_link(node: LabNode) -> None:
    """Delete the secondary ENI's veth pair (no-op when absent)."""
    sh("ip", "link", "del", node.host_veth_secondary, check=False)


def is_live(node: LabNode) -> bool:
    """The node belongs to a running lab (its namespace exists and `lab up` started its
    sshd): a state folder without one (a unit test's) never touches the network."""
    return bool(node.sshd_pid) and Path("/run/netns", node.namespace).exists()


def has_interface(node: LabNode, interface: str) -> bool:
    """The node has a link of that name."""
    proc = sh("ip", "-n", node.namespace, "link", "show", interface, check=False)
    return proc.returncode == 0


def set_link_up(node: LabNode, interface: str, up: bool) -> None:
    """Set one interface of the node down or up; up again, its routes come back too."""
    sh("ip", "-n", node.namespace, "link", "set", interface, "up" if up else "down")
    if up and interface == SECONDARY:
        for command in secondary_address_commands(node)[2:]:
            sh(*command, check=False)  # the kernel dropped the route with the link
    elif up:
        for command in node_address_commands(node)[2:]:
            sh(*command, check=False)


def link_info(node: LabNode, interface: str = PRIMARY) -> dict:
    """`ip -j -s link show IF` inside the node, as a dict."""
    proc = sh("ip", "-n", node.namespace, "-j", "-s", "link", "show", interface)
    return json.loads(proc.stdout)[0]


def link_mtu(node: LabNode, interface: str = PRIMARY) -> int:
    """The node's live MTU of `interface`."""
    return int(link_info(node, interface)["mtu"])


def set_mtu(node: LabNode, mtu: int, interface: str = PRIMARY) -> None:
    """Set the MTU of the node's `interface` (576 .. bridge MTU)."""
    if not 576 <= mtu <= BRIDGE_MTU:
        raise LabError(f"MTU must be between 576 and {BRIDGE_MTU}, got {mtu}")
    sh("ip", "-n", node.namespace, "link", "set", interface, "mtu", str(mtu))


def rx_dropped(node: LabNode, interface: str = PRIMARY) -> int:
    """An interface's RX dropped counter (eth0's by default)."""
    return int(link_info(node, interface).get("stats64", {}).get("rx", {}).get("dropped", 0))


def send_oversized(address: str, count: int) -> None:
    payload = b"\0" * (BRIDGE_MTU - IP_UDP_HEADERS)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
        for _ in range(count):
            with contextlib.suppress(OSError):
                sock.sendto(payload, (address, DISCARD_PORT))


def inject_rx_drops(node: LabNode, count: int = DROP_FRAMES) -> int:
    """Make eth0 drop `count` oversized frames for real; returns the new RX dropped count."""
    before = rx_dropped(node)
    mtu = link_mtu(node)
    if mtu >= BRIDGE_MTU:
        set_mtu(node, TEMP_MTU)
    try:
        send_oversized(node.address, count)
        deadline = time.monotonic() + 2.0
        after = rx_dropped(node)
        while after <= before and time.monotonic() < deadline:
            time.sleep(0.05)
            after = rx_dropped(node)
    finally:
        if mtu >= BRIDGE_MTU:
            set_mtu(node, mtu)
    if after <= before:
        raise LabError(f"{node.name}: eth0 dropped no frame (RX dropped stays {after})")
    return after


def recreate_node_link(node: LabNode) -> None:
    """Delete and re-add the node's veth pair with its current MTU: counters start at zero."""
    mtu = link_mtu(node)
    sh("ip", "link", "del", node.host_veth)
    create_node_link(node, mtu)
