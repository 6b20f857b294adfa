"""The judge of the single-node all-reduce: each node's bus bandwidth at the largest size
against the median of the nodes' and the profile's floor; a run that failed, fails."""

from __future__ import annotations

import statistics

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.nccl import NcclResult
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

SECTIONS = ("gpu_nccl_node", "gpu_engines", "gpu_query")
INSTALL_NCCL_TESTS = (
    "build nccl-tests (all_reduce_perf) against the node's CUDA and NCCL and put it on PATH, "
    "or leave the check out with scope.exclude: [gpu_nccl_node]"
)
FIX = "check the node's NVLink/NVSwitch (nvidia-smi nvlink -s, nvidia-fabricmanager) and PCIe"


def judge_gpu_nccl_node(
    node: str,
    result: NcclResult | None,
    peers: dict[str, NcclResult | None],
    expect: Expectations,
    missing: str = "",
) -> Verdict:
    """The node's own all-reduce: complete, validated, and within tolerance of its peers."""
    kw = {"sections": SECTIONS, "subject": node}
    if missing or result is None:
        return not_measured(missing or "all_reduce_perf did not run", INSTALL_NCCL_TESTS, **kw)
    if not result.ok:
        if not result.rows and not result.failures:
            return not_measured(f"all_reduce_perf: {result.reason}", **kw)
        return failing(f"single-node all-reduce: {result.reason}", FIX, **kw)
    value = result.busbw_at_max_size_gbs
    others = [r.busbw_at_max_size_gbs for r in peers.values() if r is not None and r.ok]
    median = statistics.median([v for v in others if v is not None]) if others else None
    tol = expect.gpu_load.peer_tolerance
    floor = expect.gpu_load.min_node_busbw_gbs
    bounds = []
    if median is not None:
        bounds.append((median * (1 - tol), f"{1 - tol:.2f} x the nodes' median {median:g}"))
    if floor is not None:
        bounds.append((floor, "expect.gpu_load.min_node_busbw_gbs"))
    bound, source = max(bounds) if bounds else (None, "")
    size = result.max_size_bytes or 0
    measured = Measurement(
        "busbw_largest", value, "GB/s", round(bound, 2) if bound else None, ">=", source
    )
    kw["measurements"] = (measured, Measurement("size_largest", size, "B"))
    low = [s for b, s in bounds if value is None or value < b]
    if low:
        return failing(
            f"single-node all-reduce busbw {value:g} GB/s at {size} B below {' and '.join(low)}",
            FIX,
            **kw,
        )
    note = "" if floor is not None else " (no floor set: expect.gpu_load.min_node_busbw_gbs)"
    return passing(f"single-node all-reduce busbw {value:g} GB/s at {size} B{note}", **kw)
