"""The judge of NVLink state and error counters: every GPU has `expect.gpu_load.nvlink_links`
links up at the SKU's per-link speed, and no link has counted more than `nvlink_max_errors`
replay, recovery or CRC errors, every counter kind of every link read. Each failure names
node, GPU (index, bus id, serial) and link."""

from __future__ import annotations

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import GPU_QUERY, GpuQuery
from pytest_hpcnet.probes.gpu_nvlink import (
    COUNTERS,
    NVLINK_ERRORS,
    NVLINK_STATUS,
    NvlinkErrors,
    NvlinkStatus,
    sku_link_gbs,
)
from pytest_hpcnet.requirements.gpu_load import gpu_label
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

SECTIONS = (NVLINK_STATUS.name, NVLINK_ERRORS.name, GPU_QUERY.name)
FIX = (
    "reset the GPU (nvidia-smi -r) or the node; a link still down or counting errors: "
    "reseat or replace the GPU or baseboard (and check nvidia-fabricmanager on NVSwitch systems)"
)


def span(numbers: list[int]) -> str:
    """`0-17`, `4`, `1, 3, 5-7`: link numbers in runs."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def link_bound(status: NvlinkStatus, expect: Expectations) -> tuple[float | None, str]:
    """(GB/s a healthy link of the SKU runs at, its source), or (None, why it is unset).

    An expectation `expect.gpu_load.nvlink_link_gbs` where the schema has one, else the SKU
    table (`probes.gpu_nvlink.LINK_GBS`) by `expect.gpu.model`, else by the one model name
    every GPU of `nvidia-smi nvlink -s` reports. Never the node's own most common speed: a
    node whose every link runs at a tenth of the SKU's would pass against itself."""
    explicit = getattr(expect.gpu_load, "nvlink_link_gbs", None)
    if explicit:
        return float(explicit), "expect.gpu_load.nvlink_link_gbs"
    if expect.gpu.model:
        found = sku_link_gbs(expect.gpu.model)
        if found:
            return found[0], f"{found[1]} per link for expect.gpu.model {expect.gpu.model}"
        return None, f"no per-link NVLink speed known for expect.gpu.model {expect.gpu.model}"
    names = {g.name for g in status.gpus}
    if len(names) == 1 and (found := sku_link_gbs(next(iter(names)))):
        return found[0], f"{found[1]} per link for the {next(iter(names))} nvidia-smi reports"
    shown = ", ".join(sorted(names)) or "no model"
    return None, f"no per-link NVLink speed known for {shown} (set expect.gpu.model)"


def judge_gpu_nvlink(
    node: str,
    status: NvlinkStatus,
    errors: NvlinkErrors,
    query: GpuQuery | None,
    expect: Expectations,
) -> Verdict:
    """Every link of every expected GPU up at the SKU's per-link speed, and every counter kind
    of every link read and within `nvlink_max_errors`.

    Planned: GPUs 0..expect.gpu.count-1 with those nvidia-smi lists, links
    0..nvlink_links-1 with those listed. A GPU nvidia-smi lists but `nvlink -s` does not, a
    link inactive, slower than the SKU's, or counting errors fails; a link or a counter kind
    (`COUNTERS`) not listed, a GPU neither listing shows, or an unset speed bound is not
    measured, each named (`node03 GPU 5 link 17: ...`)."""
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
    queried = {g.index for g in query.gpus} if query is not None and query.gpus else set()
    listed = {g.index for g in status.gpus}
    planned = sorted(set(range(expect.gpu.count or 0)) | queried | listed)
    bound, bound_source = link_bound(status, expect)
    limit = expect.gpu_load.nvlink_max_errors
    failures: list[str] = []
    unmeasured: list[str] = []
    measurements: list[Measurement] = []
    if bound is None:
        unmeasured.append(f"{node}: per-link NVLink speed bound unset: {bound_source}")
    for index in planned:
        name = gpu_label(node, index, query)
        subject = f"GPU {index}"
        g = status.gpu(index)
        if g is None:
            if index in queried:
                failures.append(f"{name}: not listed by nvidia-smi nvlink -s")
            else:
                unmeasured.append(f"{name}: listed by neither nvidia-smi nor nvlink -s")
            measurements.append(
                Measurement(
                    "nvlink_active",
                    None,
                    "links",
                    want,
                    ">=",
                    "expect.gpu_load.nvlink_links",
                    subject,
                )
            )
            continue
        links = sorted(set(range(want)) | set(g.links))
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
            continue
        unlisted = [n for n in links if n not in g.links]
        if unlisted:
            many = "links" if len(unlisted) > 1 else "link"
            unmeasured.append(f"{name} {many} {span(unlisted)}: not listed by nvidia-smi nvlink -s")
        if g.inactive:
            failures.append(f"{name}: NVLink link {', '.join(map(str, g.inactive))} inactive")
        elif len(g.active) < want and not unlisted:
            failures.append(f"{name}: {len(g.active)} NVLink links active, expected {want}")
        speeds = [g.links[n] for n in g.active]
        slowest = min((x for x in speeds if x is not None), default=None)
        measurements.append(
            Measurement("nvlink_gbs_min", slowest, "GB/s", bound, ">=", bound_source, subject)
        )
        slow = [n for n in g.active if bound is not None and (g.links[n] or 0) < bound]
        if slow:
            failures.append(
                f"{name}: NVLink link {', '.join(map(str, slow))} at "
                f"{min(g.links[n] or 0 for n in slow):g} GB/s, below the SKU's {bound:g} GB/s "
                "per link"
            )
        counted = errors.gpus.get(index, {})
        worst = max((n for c in counted.values() for n in c.values()), default=None)
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
        lacks: dict[str, list[int]] = {}
        for link in g.active:
            kinds = counted.get(link, {})
            has = set(kinds) | ({"crc"} if {"crc_flit", "crc_data"} <= set(kinds) else set())
            lacking = [k for k in COUNTERS if k not in has]
            if lacking:
                lacks.setdefault(", ".join(lacking), []).append(link)
                measurements.append(
                    Measurement(
                        "nvlink_counters",
                        None,
                        "",
                        ", ".join(COUNTERS),
                        "in",
                        "nvidia-smi nvlink -e",
                        f"link {link} of GPU {index}",
                    )
                )
        for lacking, where in lacks.items():
            many = "links" if len(where) > 1 else "link"
            unmeasured.append(f"{name} {many} {span(where)}: no {lacking} counter")
        for link, counters in sorted(counted.items()):
            bad = [f"{k} {v}" for k, v in counters.items() if v > limit]
            if bad:
                failures.append(f"{name}: NVLink link {link} counted errors: {', '.join(bad)}")
    kw["measurements"] = tuple(measurements)
    if failures:
        return failing("; ".join(failures + unmeasured), FIX, **kw)
    if unmeasured:
        shown = unmeasured[:24] + (
            [f"and {len(unmeasured) - 24} more"] if len(unmeasured) > 24 else []
        )
        return not_measured("; ".join(shown), **kw)
    return passing(
        f"{len(planned)} GPUs with {want} NVLink links up at >= {bound:g} GB/s "
        f"({bound_source}), every counter read, no errors",
        **kw,
    )
