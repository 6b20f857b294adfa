"""Lab faults of the burn-in that appear with time: the emulated nvidia-smi and torch read
them from `lab.json` as `GPU@EPOCH` (from that time on) or `GPU@WINDOWS` (after that many
windows), so a compressed burn-in of seconds sees each at about the time injected.

`hpcnet lab fault burnin-throttle NODE GPU AFTER_S`: HW and HW thermal slowdown at 91 C and
GEMMs at 0.7x from AFTER_S seconds after the injection; `burnin-ecc NODE GPU AFTER_S`:
correctable ECC errors counting, then one uncorrectable and a remapped row; `burnin-checksum
NODE GPU AFTER_WINDOWS`: that GPU's products differ after its first AFTER_WINDOWS windows.
"""

from __future__ import annotations

import re
import time

from pytest_hpcnet.lab.fault_actions import Healer, Injector
from pytest_hpcnet.lab.state import LabNode, LabState
from pytest_hpcnet.lab.system import LabError


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
