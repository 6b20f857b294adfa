"""The judge of NVLink state and error counters: every GPU has `expect.gpu_load.nvlink_links`
links up at one speed, and no link has counted more than `nvlink_max_errors` replay,
recovery or CRC errors. Each failure names node, GPU (index, bus id, serial) and link."""

from __future__ import annotations

from collections import Counter

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import GpuQuery
from pytest_hpcnet.probes.gpu_nvlink import NvlinkErrors, NvlinkStatus
from pytest_hpcnet.requirements.gpu_load import gpu_label
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

SECTIONS = ("gpu_nvlink_status", "gpu_nvlink_errors", "gpu_query")
FIX = (
    "reset the GPU (nvidia-smi -r) or the node; a link still down or counting errors: "
    "reseat or replace the GPU or baseboard (and check nvidia-fabricmanager on NVSwitch systems)"
)


def judge_gpu_nvlink(
    node: str,
    status: NvlinkStatus,
    errors: NvlinkErrors,
    query: GpuQuery | None,
    expect: Expectations,
) -> Verdict:
    """Links up, at one speed, and error-free on every GPU nvidia-smi lists."""
    want = expect.gpu_load.nvlink_links
    kw = {"sections": SECTIONS, "subject": node}
    if want is None:
        return not_measured("no NVLink link count set (expect.gpu_load.nvlink_links)", **kw)
    for what in (status, errors):
        if what.error:
            return not_measured(what.error, **kw)
    if not status.gpus:
        return not_measured("nvidia-smi nvlink -s listed no GPU", **kw)
    problems = [*status.problems, *errors.problems]
    if problems:
        return not_measured(f"nvidia-smi nvlink output not read whole: {problems[0]}", **kw)
    expected = [g.index for g in query.gpus] if query is not None and query.gpus else []
    listed = {g.index for g in status.gpus}
    failures = [
        f"{gpu_label(node, i, query)}: not listed by nvidia-smi nvlink -s"
        for i in expected
        if i not in listed
    ]
    speeds = Counter(s for g in status.gpus for s in g.links.values() if s is not None)
    usual = speeds.most_common(1)[0][0] if speeds else None
    measurements: list[Measurement] = []
    limit = expect.gpu_load.nvlink_max_errors
    for g in status.gpus:
        name = gpu_label(node, g.index, query)
        subject = f"GPU {g.index}"
        measurements.append(
            Measurement(
                "nvlink_active",
                len(g.active),
                "links",
                want,
                ">=",
                "expect.gpu_load.nvlink_links",
                subject,
            )
        )
        if g.all_inactive:
            failures.append(f"{name}: every NVLink link inactive")
        elif g.inactive:
            failures.append(f"{name}: NVLink link {', '.join(map(str, g.inactive))} inactive")
        elif len(g.active) < want:
            failures.append(f"{name}: {len(g.active)} NVLink links active, expected {want}")
        slow = [n for n in g.active if usual is not None and (g.links[n] or 0) < usual]
        if slow:
            failures.append(
                f"{name}: NVLink link {', '.join(map(str, slow))} below the node's {usual:g} GB/s"
            )
        counted = errors.gpus.get(g.index, {})
        worst = max((n for c in counted.values() for n in c.values()), default=0)
        measurements.append(
            Measurement(
                "nvlink_errors_max",
                worst,
                "",
                limit,
                "<=",
                "expect.gpu_load.nvlink_max_errors",
                subject,
            )
        )
        for link, counters in sorted(counted.items()):
            bad = [f"{k} {v}" for k, v in counters.items() if v > limit]
            if bad:
                failures.append(f"{name}: NVLink link {link} counted errors: {', '.join(bad)}")
        if not counted:
            failures.append(f"{name}: no error counters in nvidia-smi nvlink -e")
    if failures:
        return failing("; ".join(failures), FIX, measurements=tuple(measurements), **kw)
    return passing(
        f"{len(status.gpus)} GPUs with {want} NVLink links up at {usual:g} GB/s, no errors",
        measurements=tuple(measurements),
        **kw,
    )
