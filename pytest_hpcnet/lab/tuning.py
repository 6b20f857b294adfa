"""The kernel tuning `lab up` applies inside each node namespace, and what the inventory expects.

Only keys that are per network namespace are set: on this kernel (6.18) `net.core.rmem_max`
and `net.core.wmem_max` are visible inside a namespace but read-only (mode 0444, writes fail
with EINVAL): they mirror the host's global value, so the lab neither sets nor expects them.
The congestion control is the first of `cubic`, `bbr` that a namespace may select: outside
the host namespace only algorithms in `net.ipv4.tcp_allowed_congestion_control` are allowed.

One host-wide key is raised for the lab's lifetime: `net.core.netdev_max_backlog`. Every lab
frame crosses two veths, and a veth hands frames to the receiving CPU's backlog queue; a
broadcast flooded by the bridge to N nodes at once overflows the default 1000 slots, and the
kernel counts each lost frame in the *receiving* eth0's RX `dropped` (measured: about 50 per
node on a 128-node static run, none with 30000 slots). `down` restores the host's value.

The ARP table's limits are raised too (`net.ipv4.neigh.default.gc_thresh1..3`): the kernel
has one ARP table for all namespaces, and each lab node holds entries for the host, its ring
partners, perftest and NCCL peers. A 256-node lab held 768 entries before its first probe
(default gc_thresh3 1024: past it the kernel logs "neighbour table overflow" and drops the
packet that needed the entry).
"""

from __future__ import annotations

from pathlib import Path

from pytest_hpcnet.lab.system import LabError, in_ns

BUFFERS = {
    "net.ipv4.tcp_rmem": "4096 87380 16777216",
    "net.ipv4.tcp_wmem": "4096 65536 16777216",
}
FLAGS = {"net.ipv4.tcp_window_scaling": "1"}
CONGESTION_KEY = "net.ipv4.tcp_congestion_control"
CONGESTION_PREFERENCE = ("cubic", "bbr", "reno")
ALLOWED_CONGESTION = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
HOST_BACKLOG = Path("/proc/sys/net/core/netdev_max_backlog")
BACKLOG_PER_NODE = 250
"""Backlog slots per lab node: a 128-node lab gets 32000 (30000 measured to drop nothing)."""
NEIGH = Path("/proc/sys/net/ipv4/neigh/default")
NEIGHBOURS_PER_NODE = (4, 8, 16)
"""gc_thresh1, gc_thresh2, gc_thresh3 per lab node (256 nodes: 1024, 2048, 4096)."""
GLOBAL_ONLY = ("net.core.rmem_max", "net.core.wmem_max")
"""Read-only inside a namespace here: not set, not expected."""


def congestion_control() -> str:
    """The congestion control every node gets: the preferred one a namespace may use."""
    try:
        allowed = ALLOWED_CONGESTION.read_text().split()
    except OSError:
        allowed = []
    return next((c for c in CONGESTION_PREFERENCE if c in allowed), "reno")


def tuned_sysctls() -> dict[str, str]:
    """Key -> value `lab up` sets in every node namespace."""
    return {**BUFFERS, **FLAGS, CONGESTION_KEY: congestion_control()}


def raise_host_backlog(count: int, path: Path = HOST_BACKLOG) -> int | None:
    """Raise the host's backlog for `count` nodes; the previous value if it was raised."""
    current = int(path.read_text())
    wanted = BACKLOG_PER_NODE * count
    if current >= wanted:
        return None
    path.write_text(f"{wanted}\n")
    return current


def restore_host_backlog(previous: int | None, path: Path = HOST_BACKLOG) -> None:
    """Put back the host's backlog that `raise_host_backlog` replaced (None: nothing to do)."""
    if previous is not None:
        path.write_text(f"{previous}\n")


def raise_host_neighbours(count: int, folder: Path = NEIGH) -> dict[str, int]:
    """Raise the ARP table's gc_thresh1..3 for `count` nodes; the values it replaced."""
    previous: dict[str, int] = {}
    for index, per_node in enumerate(NEIGHBOURS_PER_NODE, start=1):
        knob = folder / f"gc_thresh{index}"
        current = int(knob.read_text())
        if current < per_node * count:
            knob.write_text(f"{per_node * count}\n")
            previous[knob.name] = current
    return previous


def restore_host_neighbours(previous: dict[str, int], folder: Path = NEIGH) -> None:
    """Put back what `raise_host_neighbours` replaced (highest threshold first)."""
    for name in sorted(previous, reverse=True):
        (folder / name).write_text(f"{previous[name]}\n")


def apply_sysctls(namespace: str, values: dict[str, str]) -> None:
    """Set `values` inside the namespace (one `sysctl` run)."""
    in_ns(namespace, "sysctl", "-q", "-w", *(f"{k}={v}" for k, v in values.items()))


def read_sysctl(namespace: str, key: str) -> str:
    """The value of `key` inside the namespace, whitespace normalised; LabError if unknown."""
    proc = in_ns(namespace, "sysctl", "-n", key, check=False)
    if proc.returncode != 0:
        raise LabError(f"sysctl {key} is not readable in {namespace}")
    return " ".join(proc.stdout.split())


def sysctl_expectations(values: dict[str, str]) -> dict[str, dict[str, str] | None]:
    """The inventory's `expect.sysctl`: what the lab set (buffers `min`, the rest `equal`).

    The global-only keys map to None, which drops the plugin's default expectation of them.
    """
    expect: dict[str, dict[str, str] | None] = dict.fromkeys(GLOBAL_ONLY)
    for key, value in values.items():
        expect[key] = {"value": value, "mode": "min" if key in BUFFERS else "equal"}
    return expect
