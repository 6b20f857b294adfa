"""NVSwitch fabric state per GPU (`nvidia-smi -q`, section `Fabric`) and the Fabric Manager
service (`systemctl is-active nvidia-fabricmanager`), in one facts section (`gpu_fabric`)
where the profile says the SKU has NVSwitch (`expect.gpu_load.nvswitch`).

`nvidia-smi -q` prints per GPU (`GPU 00000000:18:00.0`) a block `    Fabric` with
`        State : Completed` and `        Status : Success` on a registered HGX GPU (a
published H800, tests/fixtures/gpu_load/), `In Progress` / `N/A` while registration hangs
(published, NVIDIA/gpu-operator#2511), `N/A` / `N/A` where the driver reports no fabric (a
recorded H200 VM; A100-era NVSwitch systems, bottlerocket-os/bottlerocket#3873). The command
keeps only the unindented lines, the `Fabric` headers and their State/Status lines. The
parser never raises; what it cannot read is an `error` or a `problems` line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_hpcnet.probes.gpu import smi_state

if TYPE_CHECKING:
    from pytest_hpcnet.inventory.expectations import Expectations

from pytest_hpcnet.probes.sections import Section, gpu_profile, when

FABRIC_COMMAND = (
    "nvidia-smi -q 2>&1 | awk '/^[^ ]/ || /^    Fabric *$/ || /^        (State|Status) +:/'; "
    'echo "fabricmanager $(systemctl is-active nvidia-fabricmanager 2>&1 | head -n 1)"'
)
READY = ("Completed", "Success")
NOT_REPORTED = {"N/A", "Not Supported"}

_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_FABRIC = re.compile(r"^    Fabric\s*$")
_ITEM = re.compile(r"^        (State|Status)\s+:\s*(.*?)\s*$")
_SECTION = re.compile(r"^    \S")
_MANAGER = re.compile(r"^fabricmanager (.*?)\s*$")


@dataclass(frozen=True)
class GpuFabric:
    bus_id: str
    state: str | None = None
    status: str | None = None

    @property
    def ready(self) -> bool:
        return (self.state, self.status) == READY

    @property
    def reported(self) -> bool:
        return self.state not in NOT_REPORTED


@dataclass(frozen=True)
class FabricState:
    """Each GPU's fabric state in `nvidia-smi -q` order, and the manager's `is-active` word."""

    gpus: tuple[GpuFabric, ...] = ()
    manager: str | None = None
    problems: tuple[str, ...] = ()
    error: str | None = None

    def gpu(self, bus_id: str) -> GpuFabric | None:
        want = bus_id.upper()[-12:]
        return next((g for g in self.gpus if g.bus_id.upper()[-12:] == want), None)


def parse_fabric(text: str) -> FabricState:
    """Read `FABRIC_COMMAND`'s output (or a whole `nvidia-smi -q`)."""
    manager = None
    lines = text.splitlines()
    for line in lines:
        if m := _MANAGER.match(line):
            manager = m.group(1) or "no answer"
    state = smi_state("\n".join(x for x in lines if not _MANAGER.match(x)))
    if state is not None:
        return FabricState(manager=manager, error=state[1])
    gpus: list[dict[str, str | None]] = []
    problems: list[str] = []
    in_fabric = False
    for line in lines:
        if m := _GPU.match(line):
            gpus.append({"bus_id": m.group(1), "State": None, "Status": None, "seen": None})
            in_fabric = False
        elif _FABRIC.match(line):
            in_fabric = bool(gpus)
            if gpus:
                gpus[-1]["seen"] = "yes"
            else:
                problems.append("a Fabric section before any GPU line")
        elif in_fabric and (m := _ITEM.match(line)):
            gpus[-1][m.group(1)] = m.group(2)
        elif _SECTION.match(line):
            in_fabric = False
    out = []
    for g in gpus:
        if g["seen"] is None or g["State"] is None or g["Status"] is None:
            problems.append(f"GPU {g['bus_id']}: no Fabric State and Status (cut short?)")
            continue
        out.append(GpuFabric(str(g["bus_id"]), g["State"], g["Status"]))
    if not gpus:
        tail = next((x.strip() for x in reversed(lines) if x.strip()), "no output")
        return FabricState(manager=manager, error=f"no GPU in nvidia-smi -q ({tail[:160]})")
    if manager is None:
        problems.append("no fabricmanager line (cut short?)")
    return FabricState(tuple(out), manager, tuple(problems))


def _nvswitch_expected(expect: Expectations) -> object:
    return gpu_profile(expect) and expect.gpu_load.nvswitch


GPU_FABRIC: Section[FabricState] = Section(
    "gpu_fabric",
    parse_fabric,
    build=when(_nvswitch_expected, lambda e: FABRIC_COMMAND),
)
