"""The `slow` fault: a real `tc tbf` rate limit on both ends of a node's veth pair.

The node's eth0 egress limits what it sends, the host-side veth egress (into the node)
limits what it receives, so both directions of every flow of the node are capped.
"""

from __future__ import annotations

import re

from pytest_hpcnet.lab.state import LabNode
from pytest_hpcnet.lab.system import LabError, sh

DEFAULT_RATE = "200mbit"
BURST = "256kb"
LATENCY = "50ms"
_RATE_RE = re.compile(r"^\d+(?:\.\d+)?(?:[kmg]?bit|[kmg]?bps)$", re.I)


def _tc(node: LabNode, host_side: bool, *args: str, check: bool = True):
    if host_side:
        return sh("tc", *args[:3], node.host_veth, *args[3:], check=check)
    return sh(
        "ip", "netns", "exec", node.namespace, "tc", *args[:3], "eth0", *args[3:], check=check
    )


def limit(node: LabNode, rate: str | None) -> str:
    """Cap the node's link to `rate` (tc units, e.g. 200mbit) both ways; returns the rate."""
    rate = (rate or DEFAULT_RATE).strip().lower()
    if not _RATE_RE.match(rate):
        raise LabError(f"RATE must be a tc rate such as 200mbit or 1gbit, got {rate!r}")
    for host_side in (False, True):
        _tc(
            node,
            host_side,
            "qdisc",
            "replace",
            "dev",
            "root",
            "tbf",
            "rate",
            rate,
            "burst",
            BURST,
            "latency",
            LATENCY,
        )
    return rate


def unlimit(node: LabNode) -> None:
    """Remove both tbf qdiscs (back to the default qdisc)."""
    for host_side in (False, True):
        _tc(node, host_side, "qdisc", "del", "dev", "root", check=False)
