"""hpcnet lab emulation: what the emulated benchmarks on a node know of it (not real).

The node's address and its injected benchmark faults come from the lab's `lab.json`
(`latency`, `rdma-slow`, `nccl-slow`); `Pacer` and `delay` apply them in user space,
since the lab kernel has no netem and nothing here is real RDMA hardware.
Standard library only: it runs on the node with the system python3.
"""

from __future__ import annotations

import json
import re
import time

import hpcnet_lab_rdma as lab

_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmg]?)(bit|bps)?$", re.I)
_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}
BRIDGE_ADDRESS = "169.254.18.1"
"""`state.BRIDGE_ADDRESS` (this runs on the node, stdlib only)."""


_RECORD: list = [None, {}]
"""(lab.json's (inode, mtime, size), this node's record) as last read by this process."""


def _node_record() -> dict:
    """This node's record in lab.json, read again only when the file changed (faults apply
    at once: every save replaces it); a 1,024-node file is 0.5 MB, and a GPU program asks
    for its faults hundreds of times."""
    path = lab.state_dir() / "lab.json"
    try:
        stat = path.stat()
        key = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if key != _RECORD[0]:
            data = json.loads(path.read_text())
            name = lab.node_name()
            found = next((n for n in data.get("nodes", []) if n.get("name") == name), {})
            _RECORD[:] = [key, found]
    except (OSError, ValueError):
        return {}
    return _RECORD[1]


def faults() -> dict[str, str]:
    """This node's injected faults (id -> value), empty outside a lab."""
    return dict(_node_record().get("faults", {}))


def address() -> str:
    """This node's lab address (eth0), else the address routing to the lab bridge."""
    recorded = _node_record().get("address")
    if recorded:
        return str(recorded)
    import socket  # only here: the import costs every other tool call 2 ms

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((BRIDGE_ADDRESS, 9))
        return sock.getsockname()[0]


def rate_bps(text: str, default: float) -> float:
    """`200mbit`, `1gbit`, `500m` -> bits per second; `default` when unreadable."""
    m = _RATE_RE.match((text or "").strip())
    if not m:
        return default
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


def delay_s() -> float:
    """The one-way delay the `latency` fault adds to each message this node sends."""
    value = faults().get("latency", "")
    try:
        return max(0.0, float(value)) / 1000.0
    except ValueError:
        return 0.0


class Pacer:
    """Caps a byte stream to `bps` bits/s by sleeping (no cap when `bps` is None)."""

    def __init__(self, bps: float | None) -> None:
        self.bps = bps
        self.start = time.perf_counter()
        self.sent = 0

    def account(self, nbytes: int) -> None:
        """Count `nbytes` moved; sleep until the stream is back under its cap."""
        if not self.bps:
            return
        self.sent += nbytes
        ahead = self.sent * 8 / self.bps - (time.perf_counter() - self.start)
        if ahead > 0:
            time.sleep(min(ahead, 5.0))
