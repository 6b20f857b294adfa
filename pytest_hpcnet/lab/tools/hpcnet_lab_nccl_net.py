"""What NCCL says in the lab's emulated nccl-tests: the network it picks on this node (IB over
the node's active emulated eRDMA devices that NCCL_IB_HCA admits, else Socket) and the
`NCCL INFO` lines it prints while picking it (NCCL_DEBUG=INFO). Standard library only.
"""

from __future__ import annotations

import os
import sys
import threading

import hpcnet_lab_node as node
import hpcnet_lab_rdma as lab

NCCL_VERSION = "2.19.3"
RAIL_SLOW = 10.0
"""`nccl-rail-slow` without a factor."""


def _hca_match(name: str, spec: str) -> bool:
    """NCCL_IB_HCA: comma list of prefixes (`=` exact, `^` excludes, `:port` ignored)."""
    if not spec:
        return True
    exclude, spec = spec.startswith("^"), spec.lstrip("^")
    exact, spec = spec.startswith("="), spec.lstrip("=")
    names = [item.split(":")[0] for item in spec.split(",") if item]
    hit = any(name == n if exact else name.startswith(n) for n in names)
    return hit != exclude


def nccl_network(binary: str = "all_reduce_perf") -> tuple[str, list[dict]]:
    """("IB", devices) or ("Socket", []) as NCCL would choose on this node for `binary`
    (the `nccl-socket-one` fault drops the node to sockets for its one collective)."""
    devices = [
        d
        for d in lab.load_devices()
        if any(p.get("state") == "ACTIVE" for p in d.get("ports", []))
        and _hca_match(d["name"], os.environ.get("NCCL_IB_HCA", ""))
    ]
    socket_only = os.environ.get("NCCL_NET") == "Socket" or os.environ.get("NCCL_IB_DISABLE") == "1"
    one = node.faults().get("nccl-socket-one")
    socket_only = socket_only or (one is not None and binary.startswith(f"{one}_perf"))
    if "nccl-socket" in node.faults() or not devices or socket_only:
        return "Socket", []
    return "IB", devices


def rail_slow(devices: list[dict]) -> float:
    """How many times as long this rank's all-reduce takes under `nccl-rail-slow DEV[@FACTOR]`:
    FACTOR where NCCL uses that ERI alone (a rail run, NCCL_IB_HCA==DEV), else 1 (with more
    ERIs the other ones' channels carry the traffic: the slow rail is averaged away)."""
    value = node.faults().get("nccl-rail-slow")
    if not value:
        return 1.0
    device, _, factor = value.partition("@")
    if [d["name"] for d in devices] != [device]:
        return 1.0
    try:
        return max(1.0, float(factor)) if factor else RAIL_SLOW
    except ValueError:
        return RAIL_SLOW


def network_only_slow() -> float:
    """How many times as long this rank's all-reduce takes under `nccl-net-slow [FACTOR]`:
    FACTOR in a network-only run (NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1: the node's
    intra-node traffic would cross its ERIs too), else 1 (NVLink carries it: the node
    passes a normal run)."""
    value = node.faults().get("nccl-net-slow")
    off = all(os.environ.get(k) == "1" for k in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"))
    if not value or not off:
        return 1.0
    try:
        return max(1.0, float(value))
    except ValueError:
        return RAIL_SLOW


def debug_file_path(pattern: str) -> str:
    """NCCL_DEBUG_FILE's name for this process: `%h` the hostname, `%p` the pid."""
    return pattern.replace("%h", lab.node_name()).replace("%p", str(os.getpid()))


class InfoLog:
    """NCCL INFO lines of this rank (only with NCCL_DEBUG=INFO): to NCCL_DEBUG_FILE when it
    is set and can be opened (as NCCL does, one file per process), else to stdout, where
    mpirun mixes them with rank 0's table."""

    def __init__(self) -> None:
        self.on = os.environ.get("NCCL_DEBUG", "").upper() in ("INFO", "TRACE")
        self.prefix = f"{lab.node_name()}:{os.getpid()}:{threading.get_ident() % 100000} [0]"
        self.file = None
        pattern = os.environ.get("NCCL_DEBUG_FILE", "")
        if self.on and pattern:
            try:
                self.file = open(debug_file_path(pattern), "w")  # noqa: SIM115 (kept open)
            except OSError:
                self.file = None  # NCCL keeps writing to stdout then

    @property
    def to_stdout(self) -> bool:
        """INFO lines go to stdout (NCCL_DEBUG=INFO without a usable NCCL_DEBUG_FILE)."""
        return self.on and self.file is None

    def __call__(self, msg: str) -> None:
        if not self.on:
            return
        out = self.file or sys.stdout
        out.write(f"{self.prefix} NCCL INFO {msg}\n")
        out.flush()


def log_network(info: InfoLog, network: str, devices: list[dict]) -> None:
    """The lines NCCL prints while it picks its network."""
    oob = f"{os.environ.get('NCCL_SOCKET_IFNAME', 'eth0')}:{node.address()}<0>"
    info(f"Bootstrap: Using {oob}")
    info(f"NCCL version {NCCL_VERSION}+cuda12.2 (hpcnet lab emulation)")
    for name in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_NVLS_ENABLE", "NCCL_IB_HCA"):
        if name in os.environ:
            info(f"{name} set by environment to {os.environ[name]}")
    info("NET/Plugin: Could not find: libnccl-net.so")
    if network == "IB":
        used = " ".join(f"[{i}]{d['name']}:1/RoCE" for i, d in enumerate(devices))
        info(f"NET/IB : Using {used} [RO]; OOB {oob}")
        info("Initialized NET plugin IB")
        info("Assigned NET plugin IB to comm")
        info("Using network IB")
        for i, d in enumerate(devices):
            info(f"NET/IB : GPU Direct RDMA Disabled for HCA {i} '{d['name']}'")
    else:
        info("NET/IB : No device found.")
        info(f"NET/IB : Using [RO]; OOB {oob}")
        info("Failed to initialize NET plugin IB")
        info(f"NET/Socket : Using [0]{oob}")
        info("Initialized NET plugin Socket")
        info("Assigned NET plugin Socket to comm")
        info("Using network Socket")
