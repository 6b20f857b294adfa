"""GPU power limits: every GPU's enforced power limit at its default.

A GPU whose power limit was lowered (`nvidia-smi -pl`, a DCGM power policy, a boot script
left from another job) passes every check at rest and runs slower under load by as much as
the cap takes away, which a peer comparison hides when every GPU of a node was capped. The
floor is the profile's `expect.gpu.power_limit_w` where it sets the SKU's figure, else the
GPU's own default limit (`power.default_limit`, the driver's figure for that board); the
ceiling is the GPU's maximum limit (`power.max_limit`): an enforced limit above it is not a
reading to trust.
"""

from __future__ import annotations

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import Gpu, GpuQuery
from pytest_hpcnet.requirements.gpu import GpuReading, gpu_subject, per_gpu
from pytest_hpcnet.requirements.verdict import Measurement, Verdict

CODE = "HPCNET-GPU-POWER-CAP"
FIX = (
    "`nvidia-smi -i <index> -pl <default W>` and remove what set it (a DCGM power policy, a "
    "boot script); if `power.limit` already equals the default, the board limits the GPU: "
    "open a ticket"
)
DEFAULT_SOURCE = "nvidia-smi power.default_limit"


def judge_power_limit(node: str, query: GpuQuery, expect: Expectations) -> Verdict:
    """Each GPU's `enforced.power.limit` at least its floor (`power_limit_w` per GPU)."""
    profile = expect.gpu.power_limit_w

    def read(gpu: Gpu) -> GpuReading:
        floor = profile if profile is not None else gpu.power_default_limit_w
        source = "expect.gpu.power_limit_w" if profile is not None else DEFAULT_SOURCE
        measured = Measurement(
            "power_limit_w",
            gpu.power_limit_w,
            "W",
            floor,
            ">=",
            source,
            gpu_subject(gpu),
            ceiling=gpu.power_max_limit_w,
            basis="profile floor" if profile is not None else "the GPU's default limit",
        )
        if gpu.power_limit_w is None:
            found = f"power limit unreadable ({gpu.raw('enforced.power.limit')})"
            return GpuReading(unread=(found,), measurements=(measured,))
        if floor is None:
            found = "no default power limit to judge against"
            return GpuReading(unread=(found,), measurements=(measured,))
        if measured.outcome == "not_measured":
            found = f"power limit {gpu.power_limit_w:.0f} W above its maximum"
            return GpuReading(unread=(found,), measurements=(measured,))
        if gpu.power_limit_w < floor:
            found = f"power limit {gpu.power_limit_w:.0f} W, below {floor:.0f} W ({source})"
            return GpuReading(faults=(found,), measurements=(measured,))
        return GpuReading(measurements=(measured,))

    return per_gpu(node, query, read, FIX).with_code(CODE)
