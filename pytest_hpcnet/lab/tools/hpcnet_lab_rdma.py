"""hpcnet lab emulation: the shared part of the emulated `ibv_devinfo` and `rdma` (not real).

Finds the node (`$HPCNET_LAB_NODE`, else the UTS hostname) and the lab state folder
(`$HPCNET_LAB_STATE`, else the `.hpcnet-lab-state` file next to the installed tools), and
reads the node's devices from `<state>/nodes/<node>/rdma.json`. The MTU and link state of
each port follow the netdev as the node's sysfs shows it, as the erdma driver does.
Standard library only: it runs on the node with the system python3.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

STATE_POINTER = ".hpcnet-lab-state"
IB_MTUS = (4096, 2048, 1024, 512, 256)
MTU_CODES = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}


def node_name() -> str:
    """This node's lab name."""
    return os.environ.get("HPCNET_LAB_NODE") or socket.gethostname()


def state_dir() -> Path:
    """The lab state folder."""
    env = os.environ.get("HPCNET_LAB_STATE")
    if env:
        return Path(env)
    pointer = Path(sys.argv[0]).resolve().parent / STATE_POINTER
    try:
        return Path(pointer.read_text().strip())
    except OSError:
        return Path("/run/hpcnet-lab")


def ib_mtu(netdev_mtu: int) -> int:
    """The largest IB MTU that fits the netdev MTU (the kernel's ib_mtu_int_to_enum)."""
    return next((m for m in IB_MTUS if netdev_mtu >= m), 256)


def _sysfs(netdev: str, name: str) -> str | None:
    try:
        return Path(f"/sys/class/net/{netdev}/{name}").read_text().strip()
    except OSError:
        return None


def load_devices() -> list[dict]:
    """The node's devices, ports adjusted to the live netdev MTU and operational state."""
    path = state_dir() / "nodes" / node_name() / "rdma.json"
    try:
        devices = json.loads(path.read_text()).get("devices", [])
    except (OSError, ValueError):
        return []
    for device in devices:
        for port in device.get("ports", []):
            netdev = port.get("netdev") or ""
            mtu = _sysfs(netdev, "mtu")
            if mtu and mtu.isdigit():
                port["active_mtu"] = min(int(port.get("max_mtu", 4096)), ib_mtu(int(mtu)))
            port["netdev_index"] = int(_sysfs(netdev, "ifindex") or 0) or port.get(
                "netdev_index", 0
            )
            if _sysfs(netdev, "operstate") == "down":
                port["state"], port["physical_state"] = "DOWN", "DISABLED"
    return devices
