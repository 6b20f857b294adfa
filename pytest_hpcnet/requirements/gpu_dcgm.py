"""The judge of DCGM diagnostics: every test of `dcgmi diag -r LEVEL -j` passed on every GPU.

A failed test fails, naming node, GPU (index, bus id, serial), test and DCGM's warning. The
tests the level runs are planned on every expected GPU: one DCGM skipped, did not run or
left without a result on a GPU, or an output that cannot be read is not measured, named:
never a pass. A warning is reported, not failed.
"""

from __future__ import annotations

from pytest_hpcnet.probes.gpu import GPU_QUERY, GpuQuery
from pytest_hpcnet.probes.gpu_dcgm import DcgmRun, planned_tests
from pytest_hpcnet.probes.gpu_load import GPU_ENGINES
from pytest_hpcnet.requirements.gpu_load import gpu_label
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

SECTIONS = ("gpu_dcgm", GPU_QUERY.name, GPU_ENGINES.name)
INSTALL_DCGM = (
    "install DCGM (datacenter-gpu-manager-4) and start nv-hostengine, or leave DCGM out with "
    "expect.gpu_load.dcgm_level: null"
)
FIX = "replace or reseat the named GPU; rerun dcgmi diag -r 3 -i <gpu> after a reset"


def _planned_gpus(run: DcgmRun, query: GpuQuery | None, expected: int | None) -> list[int]:
    """Every GPU the node should have: 0..expect.gpu.count-1, those nvidia-smi lists and
    those DCGM reported on (never only what the output happened to list)."""
    planned = set(range(expected or 0))
    planned |= {g.index for g in query.gpus} if query is not None and query.gpus else set()
    planned |= {r.gpu for r in run.results}
    return sorted(planned)


def judge_gpu_dcgm(
    node: str,
    run: DcgmRun | None,
    query: GpuQuery | None,
    level: int,
    missing: str = "",
    expected_gpus: int | None = None,
) -> Verdict:
    """Every DCGM test `dcgmi diag -r LEVEL` runs (`planned_tests(level)`) passed on every
    expected GPU (`expected_gpus`, expect.gpu.count, with those nvidia-smi and DCGM list).

    Each (test, GPU) of the plan is judged: a Fail fails; a test with no result for the GPU,
    skipped or not run on it, or summarised Skip/Error without results is not measured and
    named (`node03 GPU 5: dcgm 'memory' not run`); Pass and Warn pass (a warning is
    reported). A test DCGM ran beyond the plan is judged the same way where it has results."""
    kw = {"sections": SECTIONS, "subject": node}
    if missing or run is None:
        return not_measured(missing or "dcgmi did not run", INSTALL_DCGM, **kw)
    if run.error:
        return not_measured(run.error, **kw)
    gpus = _planned_gpus(run, query, expected_gpus)
    plan = list(planned_tests(level))
    plan += [t for t in dict.fromkeys(r.canonical for r in run.results) if t not in plan]
    failures: list[str] = []
    unmeasured: list[str] = []
    warned: list[str] = []
    measurements: list[Measurement] = []
    source = f"dcgmi diag -r {level}"
    for index in gpus:
        name = gpu_label(node, index, query)
        mine = run.for_gpu(index)
        failed: list[str] = []
        unrun: list[str] = []
        for test in plan:
            got = [r for r in mine if r.canonical == test]
            statuses = {r.status for r in got}
            parts = dict.fromkeys(r.test for r in run.results if r.canonical == test)
            lost = [p for p in parts if p != test and not any(r.test == p for r in got)]
            subject = f"{test} on GPU {index}"
            bad = [r for r in got if r.status == "fail"]
            if bad:
                why = next((f": {r.warnings[0]}" for r in bad if r.warnings), "")
                failures.append(f"{name}: DCGM {bad[0].test} failed{why}")
                shown: str | None = "fail"
                failed.append(test)
            elif got and lost:  # DCGM 3.x: a Deployment check the others ran, not on this GPU
                unmeasured.append(f"{name}: dcgm '{test}' ({', '.join(lost)}) not run")
                shown = None
            elif not got or statuses == {"skip"}:
                what = "skipped" if got else "not run"
                unmeasured.append(f"{name}: dcgm '{test}' {what}")
                shown = None
            elif statuses - {"pass", "warn", "skip"}:
                odd = ", ".join(sorted(statuses - {"pass", "warn", "skip"}))
                unmeasured.append(f"{name}: dcgm '{test}' result not understood: {odd}")
                shown = None
            elif "skip" in statuses:
                skipped = ", ".join(r.test for r in got if r.status == "skip")
                unmeasured.append(f"{name}: dcgm '{test}' skipped in part ({skipped})")
                shown = None
            else:
                shown = "pass"
                if "warn" in statuses:
                    warned.append(f"GPU {index} {test}")
            if shown is None:
                unrun.append(test)
            measurements.append(Measurement("dcgm_test", shown, "", "pass", "==", source, subject))
        summary = (
            f"fail: {', '.join(failed)}"
            if failed
            else (f"not measured: {', '.join(unrun)}" if unrun else "pass")
        )
        measurements.append(Measurement("dcgm", summary, "", "pass", "==", source, f"GPU {index}"))
    with_results = {r.test for r in run.results}
    for test, status in run.summaries.items():
        if test not in with_results and status == "fail":
            failures.append(f"{node}: DCGM {test} failed (test summary, no GPU named)")
    kw["measurements"] = tuple(measurements)
    if not gpus:
        return not_measured(f"{node}: no GPU expected or listed to judge DCGM on", **kw)
    if failures:
        return failing("; ".join(failures + unmeasured), FIX, **kw)
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
