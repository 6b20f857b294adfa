"""A node's eth0: the veth pair into the bridge, its MTU, its counters, real RX drops.

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

from pytest_hpcnet.lab.state import BRIDGE, BRIDGE_ADDRESS, BRIDGE_MTU, SUBNET, LabNode
from pytest_hpcnet.lab.system import LabError, sh

IP_MTU_DISCOVER = 10
IP_PMTUDISC_DO = 2
DROP_FRAMES = 16
DISCARD_PORT = 9
TEMP_MTU = 1500
"""The node's MTU while drops are injected when its own MTU equals the bridge's."""
IP_UDP_HEADERS = 28


def bridge_address_commands() -> list[list[str]]:
    """The host's side: its link-local /32 on the bridge and the nodes' /24 on-link behind it."""
    return [
        ["ip", "addr", "add", f"{BRIDGE_ADDRESS}/32", "dev", BRIDGE],
        ["ip", "link", "set", BRIDGE, "up"],
        ["ip", "route", "add", str(SUBNET), "dev", BRIDGE, "scope", "link", "src", BRIDGE_ADDRESS],
    ]


def node_address_commands(node: LabNode) -> list[list[str]]:
    """eth0's /32 (so .0 and .255 are plain unicast), then on-link routes to the /24 and host."""
    ns, own = node.namespace, ["scope", "link", "src", node.address]
    return [
        ["ip", "-n", ns, "addr", "add", f"{node.address}/32", "dev", "eth0"],
        ["ip", "-n", ns, "link", "set", "eth0", "up"],
        ["ip", "-n", ns, "route", "add", str(SUBNET), "dev", "eth0", *own],
        ["ip", "-n", ns, "route", "add", f"{BRIDGE_ADDRESS}/32", "dev", "eth0", *own],
    ]


def create_node_link(node: LabNode, mtu: int) -> None:
    """The veth pair: host end in the bridge, `eth0` (fixed MAC, address, MTU) in the node."""
    ns, veth = node.namespace, node.host_veth
    peer = ["peer", "name", "eth0"]
    if node.mac:
        peer += ["address", node.mac]
    sh("ip", "link", "add", veth, "mtu", str(BRIDGE_MTU), "type", "veth", *peer, "netns", ns)
    sh("ip", "link", "set", veth, "master", BRIDGE, "up")
    inside = [["link", "set", "eth0", "mtu", str(mtu)]]
    inside += [command[3:] for command in node_address_commands(node)]  # without `ip -n NS`
    sh("ip", "-n", ns, "-batch", "-", input="".join(" ".join(c) + "\n" for c in inside))


def link_info(node: LabNode) -> dict:
    """`ip -j -s link show eth0` inside the node, as a dict."""
    proc = sh("ip", "-n", node.namespace, "-j", "-s", "link", "show", "eth0")
    return json.loads(proc.stdout)[0]


def link_mtu(node: LabNode) -> int:
    """The node's live eth0 MTU."""
    return int(link_info(node)["mtu"])


def set_mtu(node: LabNode, mtu: int) -> None:
    """Set the node's eth0 MTU (576 .. bridge MTU)."""
    if not 576 <= mtu <= BRIDGE_MTU:
        raise LabError(f"MTU must be between 576 and {BRIDGE_MTU}, got {mtu}")
    sh("ip", "-n", node.namespace, "link", "set", "eth0", "mtu", str(mtu))


def rx_dropped(node: LabNode) -> int:
    """eth0's RX dropped counter."""
    return int(link_info(node).get("stats64", {}).get("rx", {}).get("dropped", 0))


def _send_oversized(address: str, count: int) -> None:
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
        _send_oversized(node.address, count)
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
