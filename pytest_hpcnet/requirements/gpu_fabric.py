"""The judge of the NVSwitch fabric: on a SKU with NVSwitch (`expect.gpu_load.nvswitch`) every
GPU nvidia-smi lists is registered with the fabric (State Completed, Status Success) and
nvidia-fabricmanager is active. A GPU still `In Progress` or `Not Started`, or Completed with
an error status, fails, naming it (index, bus id). A driver that reports no fabric state
(`N/A`, as A100-era NVSwitch systems print it) leaves the manager's state to judge, and the
verdict says so."""

from __future__ import annotations

from pytest_hpcnet.probes.gpu import GPU_QUERY, GpuQuery
from pytest_hpcnet.probes.gpu_fabric import GPU_FABRIC, FabricState, GpuFabric
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

SECTIONS = (GPU_FABRIC.name, GPU_QUERY.name)
FIX = (
    "start nvidia-fabricmanager (systemctl enable --now nvidia-fabricmanager; its version must "
    "equal the driver's), read its log (/var/log/fabricmanager.log); a GPU that stays In "
    "Progress: reset the GPUs (nvidia-smi -r) or the node, then reseat or replace the baseboard"
)
SOURCE = "NVML nvmlGpuFabricInfo: state Completed, status checked only then (Success)"


def _index(query: GpuQuery | None, g: GpuFabric) -> str:
    if query is not None:
        for gpu in query.gpus:
            if gpu.bus_id and gpu.bus_id.upper()[-12:] == g.bus_id.upper()[-12:]:
                return f"GPU {gpu.index}"
    return f"GPU {g.bus_id}"


def judge_gpu_fabric(node: str, fabric: FabricState, query: GpuQuery | None) -> Verdict:
    """Every GPU's fabric registration and the Fabric Manager service."""
    kw = {"sections": SECTIONS, "subject": node}
    if fabric.error:
        return not_measured(fabric.error, **kw)
    if fabric.problems:
        return not_measured(f"nvidia-smi -q fabric not read whole: {fabric.problems[0]}", **kw)
    failures: list[str] = []
    measurements: list[Measurement] = []
    listed = [g.bus_id for g in query.gpus if g.bus_id] if query is not None else []
    for bus in listed:
        if fabric.gpu(bus) is None:
            failures.append(f"{node} GPU ({bus}): not listed by nvidia-smi -q")
    unreported = []
    for g in fabric.gpus:
        subject = _index(query, g)
        shown = f"{g.state} / {g.status}"
        measurements.append(
            Measurement("fabric_state", shown, "", "Completed / Success", "==", SOURCE, subject)
        )
        name = f"{node} {subject} ({g.bus_id})"
        if not g.reported:
            unreported.append(subject)
        elif g.state != "Completed":
            failures.append(f"{name}: fabric state {g.state} (status {g.status}), not Completed")
        elif not g.ready:
            failures.append(f"{name}: fabric state Completed with status {g.status}")
    manager = fabric.manager or "not reported"
    measurements.append(
        Measurement("fabricmanager", manager, "", "active", "==", "systemctl is-active", "nvswitch")
    )
    if manager != "active":
        failures.append(f"{node}: nvidia-fabricmanager is {manager}, not active")
    if failures:
        return failing("; ".join(failures), FIX, measurements=tuple(measurements), **kw)
    if not fabric.gpus:
        return not_measured("nvidia-smi -q listed no GPU", measurements=tuple(measurements), **kw)
    if len(unreported) == len(fabric.gpus):
        why = "the driver reports no fabric state (N/A), judged by the manager's state only"
        return passing(
            f"nvidia-fabricmanager active; {why}", measurements=tuple(measurements), **kw
        )
    note = f" ({', '.join(unreported)}: no fabric state reported)" if unreported else ""
    return passing(
        f"{len(fabric.gpus) - len(unreported)} GPUs registered with the NVSwitch fabric "
        f"(Completed, Success), nvidia-fabricmanager active{note}",
        measurements=tuple(measurements),
        **kw,
    )
