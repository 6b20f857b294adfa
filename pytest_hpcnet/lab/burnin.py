"""Lab faults of the burn-in that appear with time: the emulated nvidia-smi and torch read
them from `lab.json` as `GPU@EPOCH` (from that time on) or `GPU@WINDOWS` (after that many
windows), so a compressed burn-in of seconds sees each at about the time injected.

`hpcnet lab fault burnin-throttle NODE GPU AFTER_S`: HW and HW thermal slowdown at 91 C and
GEMMs at 0.7x from AFTER_S seconds after the injection; `burnin-ecc NODE GPU AFTER_S`:
correctable ECC errors counting, then one uncorrectable and a remapped row; `burnin-checksum
NODE GPU AFTER_WINDOWS`: that GPU's products differ after its first AFTER_WINDOWS windows.

`burnin-flap NODE ERI PERIOD_S`: a link that flaps. PERIOD_S after the injection, and every
PERIOD_S after that, a detached process (`python -m pytest_hpcnet.lab.burnin flap ...`, its
pid in the fault's undo) takes the ERI's netdev down for real inside the node's namespace
for `FLAP_DOWN_S` (the emulated `rdma` shows its port DOWN), counts a connect timeout on the
ERI (`connect_timeout_cnt`, the emulated `rdma statistic`), brings the link up again and
sends `links.DROP_FRAMES` frames larger than its MTU to it, which the kernel drops for real
(its RX `dropped`). It stops when the fault is healed (killed) or no longer recorded.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from pytest_hpcnet.lab import links
from pytest_hpcnet.lab.emulation import rdma_devices
from pytest_hpcnet.lab.fault_actions import Healer, Injector
from pytest_hpcnet.lab.state import BRIDGE_MTU, LabNode, LabState
from pytest_hpcnet.lab.system import LabError

FLAP = "burnin-flap"
FLAP_DOWN_S = 0.5
FLAP_COUNTERS = {"connect_timeout_cnt": 1}
"""What one flap counts on the ERI (a connection attempt that timed out while it was down)."""
TOOLS = Path(__file__).parent / "tools"


def timed_fault(kind: str, windows: bool = False) -> tuple[Injector, Healer]:
    """A fault of one GPU that starts AFTER_S seconds after injection (or after
    AFTER_WINDOWS windows); only lab.json holds it."""
    what = "AFTER_WINDOWS" if windows else "AFTER_S"

    def inject(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
        m = re.fullmatch(r"([0-7])\s+(\d+(?:\.\d+)?)", (arg or "").strip())
        if not m:
            raise LabError(f"{kind}: expected GPU {what} (GPU 0..7), got {arg!r}")
        gpu, after = m.group(1), float(m.group(2))
        value = f"{gpu}@{int(after)}" if windows else f"{gpu}@{time.time() + after:.1f}"
        return kind, value, ""

    def heal(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
        return None

    return inject, heal


def _netdev(state: LabState, node: LabNode, device: str) -> str:
    on = {d["name"]: d["ports"][0]["netdev"] for d in rdma_devices(node, state.eris)}
    if device not in on:
        raise LabError(f"{FLAP}: {node.name} has no {device} (it has {', '.join(on) or 'none'})")
    return on[device]


def flap_fault() -> tuple[Injector, Healer]:
    """`burnin-flap NODE ERI PERIOD_S`: the ERI's link flaps every PERIOD_S from PERIOD_S after
    injection (recorded as `ERI@FIRST_EPOCH@PERIOD_S`); healing stops the flapping process and
    leaves the link up."""

    def inject(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
        m = re.fullmatch(r"(erdma_\d)\s+(\d+(?:\.\d+)?)", (arg or "").strip())
        if not m or float(m.group(2)) < 1:
            raise LabError(
                f"{FLAP}: expected ERI PERIOD_S such as `erdma_1 8` (>= 1 s), got {arg!r}"
            )
        device, period = m.group(1), float(m.group(2))
        netdev = _netdev(state, node, device)
        value = f"{device}@{time.time() + period:.1f}@{period:g}"
        pid = 0
        if links.is_live(node):
            command = [sys.executable, "-m", "pytest_hpcnet.lab.burnin", "flap"]
            command += [str(state.root), node.name, value, netdev]
            pid = subprocess.Popen(
                command,
                cwd=str(Path(__file__).resolve().parents[2]),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            ).pid
        return FLAP, value, f"{pid} {netdev}"

    def heal(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
        pid, _, netdev = undo.partition(" ")
        if pid.isdigit() and int(pid) > 0 and _is_flapper(int(pid)):
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGTERM)
            _reap(int(pid))
        if netdev and links.is_live(node):
            links.set_link_up(node, netdev, True)

    return inject, heal


def _is_flapper(pid: int) -> bool:
    try:
        return b"pytest_hpcnet.lab.burnin" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _reap(pid: int, timeout: float = 5.0) -> None:
    """Wait until the process is gone (a zombie child of ours is reaped)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with contextlib.suppress(ChildProcessError, OSError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        if not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.05)


def flap_once(state: LabState, node: LabNode, device: str, netdev: str) -> None:
    """One flap: the link down for FLAP_DOWN_S, a connect timeout counted on the ERI, the link
    up again, then frames over its MTU that the kernel drops (its RX `dropped`)."""
    links.set_link_up(node, netdev, False)
    os.environ.update(HPCNET_LAB_STATE=str(state.root), HPCNET_LAB_NODE=node.name)
    if str(TOOLS) not in sys.path:
        sys.path.insert(0, str(TOOLS))
    import hpcnet_lab_rdma  # the emulated tools' counters file, under their lock

    hpcnet_lab_rdma.add_counters(device, **FLAP_COUNTERS)
    time.sleep(FLAP_DOWN_S)
    links.set_link_up(node, netdev, True)
    if links.link_mtu(node, netdev) < BRIDGE_MTU:
        address = node.secondary_address if netdev == links.SECONDARY else node.address
        links.send_oversized(address, links.DROP_FRAMES)


def flap_loop(state_dir: str, node_name: str, value: str, netdev: str) -> int:
    """Flap until the fault `value` is no longer recorded for the node (healed, lab down)."""
    device, first, period = value.split("@")
    at = float(first)
    while True:
        time.sleep(max(0.0, at - time.time()))
        state = LabState.load(Path(state_dir))
        node = next((n for n in state.nodes if n.name == node_name), None) if state else None
        if node is None or node.faults.get(FLAP) != value:
            return 0
        with contextlib.suppress(Exception):  # a failed flap is the next one's business
            flap_once(state, node, device, netdev)  # type: ignore[arg-type]
        at += float(period)


if __name__ == "__main__":
    if sys.argv[1:2] == ["flap"] and len(sys.argv) == 6:
        sys.exit(flap_loop(*sys.argv[2:6]))
    sys.exit("usage: python -m pytest_hpcnet.lab.burnin flap STATE NODE ERI@FIRST@PERIOD NETDEV")
