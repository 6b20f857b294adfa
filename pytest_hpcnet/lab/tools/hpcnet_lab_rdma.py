"""hpcnet lab emulation: the shared part of the emulated `ibv_devinfo` and `rdma` (not real).

Finds the node (`$HPCNET_LAB_NODE`, else the UTS hostname) and the lab state folder
(`$HPCNET_LAB_STATE`, else the `.hpcnet-lab-state` file next to the installed tools), and
reads the node's devices from `<state>/nodes/<node>/rdma.json`. The MTU and link state of
each port follow the netdev as the node's sysfs shows it, as the erdma driver does.
Each device's hw counters (erdma's names) live in `<state>/nodes/<node>/counters.json`;
the emulated benchmarks add the bytes they move (`add_counters`), `rdma statistic` reads them.
Standard library only: it runs on the node with the system python3.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from pathlib import Path

STATE_POINTER = ".hpcnet-lab-state"
IB_MTUS = (4096, 2048, 1024, 512, 256)
MTU_CODES = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}


def node_name() -> str:
    """This node's lab name: under srun, the NodeName slurmd sets for its tasks (the launch
    node's HPCNET_LAB_NODE reaches every rank through `--export=ALL`), else sshd's."""
    return (
        os.environ.get("SLURMD_NODENAME")
        or os.environ.get("HPCNET_LAB_NODE")
        or os.uname().nodename
    )


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


COUNTERS = (
    "hw_tx_bytes_cnt",
    "hw_rx_bytes_cnt",
    "hw_tx_packets_cnt",
    "hw_rx_packets_cnt",
    "hw_bps_limit_drop_cnt",
    "hw_pps_limit_drop_cnt",
    "hw_rx_bps_limit_drop_cnt",
    "hw_rx_pps_limit_drop_cnt",
    "connect_failed_cnt",
    "connect_timeout_cnt",
    "verbs_create_qp_failed_cnt",
)
"""erdma's hw counters (public driver `erdma_stats.c`), as the lab emulates them."""


def _counters_path() -> Path:
    return state_dir() / "nodes" / node_name() / "counters.json"


def read_counters() -> dict[str, dict[str, int]]:
    """Device -> counter -> value; every counter of every device, 0 when never moved."""
    try:
        saved = json.loads(_counters_path().read_text())
    except (OSError, ValueError):
        saved = {}
    return {
        d["name"]: {c: int(saved.get(d["name"], {}).get(c, 0)) for c in COUNTERS}
        for d in load_devices()
    }


def add_counters(device: str, **deltas: int) -> None:
    """Add to one device's counters (a lock file serialises concurrent benchmarks)."""
    path = _counters_path()
    with contextlib.suppress(OSError), open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError):
            saved = {}
        mine = saved.setdefault(device, {})
        for name, value in deltas.items():
            mine[name] = int(mine.get(name, 0)) + int(value)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(saved))
        tmp.replace(path)


def count_traffic(device: str, tx: int = 0, rx: int = 0, mtu: int = 4096) -> None:
    """Count bytes a benchmark moved on `device`; the `rate-limit-drops` fault adds drops."""
    packets_tx, packets_rx = -(-tx // mtu), -(-rx // mtu)
    deltas = {
        "hw_tx_bytes_cnt": tx,
        "hw_rx_bytes_cnt": rx,
        "hw_tx_packets_cnt": packets_tx,
        "hw_rx_packets_cnt": packets_rx,
    }
    faults = _faults()
    if faults.get("rate-limit-drops") == device and (tx or rx):
        deltas["hw_bps_limit_drop_cnt"] = 1 + packets_tx // 100
        deltas["hw_rx_bps_limit_drop_cnt"] = 1 + packets_rx // 100
    add_counters(device, **deltas)


def _faults() -> dict[str, str]:
    try:
        data = json.loads((state_dir() / "lab.json").read_text())
    except (OSError, ValueError):
        return {}
    me = next((n for n in data.get("nodes", []) if n.get("name") == node_name()), {})
    return dict(me.get("faults", {}))
