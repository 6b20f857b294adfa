"""The judge of DCGM diagnostics: every test of `dcgmi diag -r LEVEL -j` passed on every GPU.

A failed test fails, naming node, GPU (index, bus id, serial), test and DCGM's warning. A
test DCGM skipped or did not run on a GPU, a GPU with no result, or an output that cannot be
read is not measured: never a pass. A warning is reported, not failed.
"""

from __future__ import annotations

from pytest_hpcnet.probes.gpu import GpuQuery
from pytest_hpcnet.probes.gpu_dcgm import DcgmRun
from pytest_hpcnet.requirements.gpu_load import gpu_label
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

SECTIONS = ("gpu_dcgm", "gpu_query", "gpu_engines")
INSTALL_DCGM = (
    "install DCGM (datacenter-gpu-manager-4) and start nv-hostengine, or leave DCGM out with "
    "expect.gpu_load.dcgm_level: null"
)
FIX = "replace or reseat the named GPU; rerun dcgmi diag -r 3 -i <gpu> after a reset"


def judge_gpu_dcgm(
    node: str, run: DcgmRun | None, query: GpuQuery | None, level: int, missing: str = ""
) -> Verdict:
    """Every DCGM test at `level` passed on every GPU nvidia-smi lists."""
    kw = {"sections": SECTIONS, "subject": node}
    if missing or run is None:
        return not_measured(missing or "dcgmi did not run", INSTALL_DCGM, **kw)
    if run.error:
        return not_measured(run.error, **kw)
    gpus = [g.index for g in query.gpus] if query is not None and query.gpus else []
    gpus = gpus or sorted({r.gpu for r in run.results})
    failures: list[str] = []
    unmeasured: list[str] = []
    warned: list[str] = []
    measurements: list[Measurement] = []
    for index in gpus:
        name = gpu_label(node, index, query)
        mine = run.for_gpu(index)
        bad = [r for r in mine if r.status == "fail"]
        skipped = [r.test for r in mine if r.status == "skip"]
        other = [
            f"{r.test} {r.status}" for r in mine if r.status not in ("pass", "fail", "warn", "skip")
        ]
        for r in bad:
            why = f": {r.warnings[0]}" if r.warnings else ""
            failures.append(f"{name}: DCGM {r.test} failed{why}")
        if not mine:
            unmeasured.append(f"{name}: no DCGM result")
        if skipped:
            unmeasured.append(
                f"{name}: DCGM skipped {', '.join(skipped)} (a skipped test is not a pass)"
            )
        if other:
            unmeasured.append(f"{name}: DCGM result not understood: {', '.join(other)}")
        warned += [f"GPU {index} {r.test}" for r in mine if r.status == "warn"]
        shown = "fail: " + ", ".join(r.test for r in bad) if bad else ("pass" if mine else None)
        measurements.append(
            Measurement("dcgm", shown, "", "pass", "==", f"dcgmi diag -r {level}", f"GPU {index}")
        )
    with_results = {r.test for r in run.results}
    for test, status in run.summaries.items():
        if test not in with_results and status == "fail":
            failures.append(f"{node}: DCGM {test} failed (test summary, no GPU named)")
    kw["measurements"] = tuple(measurements)
    if failures:
        return failing("; ".join(failures), FIX, **kw)
    if unmeasured:
        return not_measured("; ".join(unmeasured), **kw)
    note = f"; warnings (not failed): {', '.join(warned)}" if warned else ""
    tests = ", ".join(run.tests())
    return passing(
        f"DCGM {run.version or ''} level {level}: {tests} passed on {len(gpus)} GPUs{note}".replace(
            "  ", " "
        ),
        **kw,
    )
