"""Judges of the GPUs under load: compute, result agreement, memory and host bandwidth.

Each GPU is judged against the best GPU of its node and the median of every GPU of the
cluster (`expect.gpu_load.peer_tolerance` below either fails), and against the SKU figure
where the profile sets one (`expect.gpu_load.min_*`, with its source; unset: peer-relative
only, and the verdict says so). Every measurement names its GPU (`GPU 3`); a failure names
node, index, bus id and serial. A node whose load did not run or could not be read is not
measured; a GPU whose load failed, fails.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import GpuQuery
from pytest_hpcnet.probes.gpu_load import (
    GPU_ENGINES,
    POWER_CAP_BIT,
    SLOWDOWN_BITS,
    GpuLoad,
    GpuSamples,
    LoadRun,
    LoadSamples,
)
from pytest_hpcnet.requirements.bounds import NODE_BEST, Bound, Ceiling, judge_figure, peer_bound
from pytest_hpcnet.requirements.verdict import (
    FAIL,
    NOT_MEASURED,
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

SECTIONS = ("gpu_load", "gpu_samples", GPU_ENGINES.name)
INSTALL_TORCH = (
    "install PyTorch with CUDA for the node's python3 (pip install torch), or run the load "
    "phase on an image that has it"
)
TITLES = {
    "bf16_tflops": ("bf16 GEMM", "TFLOPS", "min_bf16_tflops"),
    "tf32_tflops": ("tf32 GEMM", "TFLOPS", "min_tf32_tflops"),
    "hbm_gbs": ("HBM copy", "GB/s", "min_hbm_gbs"),
    "h2d_gbs": ("host-to-device", "GB/s", "min_h2d_gbs"),
    "d2h_gbs": ("device-to-host", "GB/s", "min_d2h_gbs"),
}
COMPUTE = ("bf16_tflops", "tf32_tflops")
BANDWIDTH = ("hbm_gbs", "h2d_gbs", "d2h_gbs")


@dataclass(frozen=True)
class NodeLoad:
    """What one node's load phase gave: its run and samples, or why there is none."""

    node: str
    run: LoadRun | None = None
    samples: LoadSamples | None = None
    missing: str | None = None
    """Why the load did not run (no engine, unreachable, cut short), with what to do."""
    fix: str = ""
    query: GpuQuery | None = None
    """The node's `nvidia-smi --query-gpu` from its facts (the GPUs' PCIe links)."""
    expected_gpus: int | None = None
    """The GPUs the node should have (`expect.gpu.count`, or as many as it lists); each the
    load could not reach (nvidia-smi lists fewer) fails, named."""


PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
"""GB/s per lane and direction: 2.5/5 GT/s with 8b/10b, 8/16/32 GT/s with 128b/130b (PCIe
3.0-5.0 base specifications), 64 GT/s PAM4 with 242/256 FLIT efficiency (PCIe 6.0)."""


def link_gbs(query: GpuQuery | None, index: int) -> tuple[float, str] | None:
    """(GB/s one way, `gen5 x16`) of the GPU's link: its maximum generation (an idle GPU
    lowers its current one) at its current width; None when unknown."""
    gpu = query.gpu(index) if query is not None else None
    gen = gpu.pcie_gen_max if gpu is not None else None
    width = gpu.pcie_width if gpu is not None else None
    if gen not in PCIE_LANE_GBS or not width:
        return None
    return PCIE_LANE_GBS[gen] * width, f"gen{gen} x{width}"


def gpu_label(node: str, index: int, listed: GpuListing | None) -> str:
    """`node02 GPU 3 (00000000:5D:00.0, serial 1654124006923)` as far as `listed` (the load's
    nvidia-smi samples, or the facts' `--query-gpu`) knows the GPU."""
    found = listed.gpu(index) if listed is not None else None
    bus, serial = (found.bus_id, found.serial) if found is not None else (None, None)
    known = [x for x in (bus, serial and f"serial {serial}") if x]
    return f"{node} GPU {index}" + (f" ({', '.join(known)})" if known else "")


class GpuListing(Protocol):
    """What lists a node's GPUs by index with bus id and serial (`LoadSamples`, `GpuQuery`)."""

    def gpu(self, index: int) -> Any: ...


def _unmeasured(load: NodeLoad) -> Verdict | None:
    """The not-measured verdict of a node whose load gave nothing to judge, else None."""
    if load.missing:
        return not_measured(load.missing, load.fix, sections=SECTIONS, subject=load.node)
    if load.run is None:
        return not_measured("the load phase did not run", sections=SECTIONS, subject=load.node)
    if not load.run.gpus:
        why = load.run.error or "the load program reported no GPU"
        return not_measured(why, sections=SECTIONS, subject=load.node)
    if not load.run.complete:
        return not_measured(load.run.error or "cut short", sections=SECTIONS, subject=load.node)
    errors = {g.error for g in load.run.gpus}
    if len(load.run.gpus) > 1 and len(errors) == 1 and None not in errors:
        why = f"the load failed the same way on every GPU (the engine, not a GPU): {errors.pop()}"
        return not_measured(why, INSTALL_TORCH, sections=SECTIONS, subject=load.node)
    return None


def _healthy(run: LoadRun | None) -> list[GpuLoad]:
    return [g for g in (run.gpus if run else ()) if not g.error]


CEILINGS = {
    "bf16_tflops": "max_bf16_tflops",
    "tf32_tflops": "max_tf32_tflops",
    "hbm_gbs": "max_hbm_gbs",
}
HOST_LINK_CEILING = (133.0, "PCIe Gen6 x16 one way (121 GB/s) x 1.1: the fastest host link")
"""A host copy's ceiling when its GPU's link is not read."""


def _cluster_values(figure: str, peers: dict[str, NodeLoad]) -> list[float | None]:
    return [g.figure(figure) for p in peers.values() for g in _healthy(p.run)]


def _ceiling(figure: str, link: tuple[float, str] | None, expect: Expectations) -> Ceiling:
    if figure in CEILINGS:
        key = CEILINGS[figure]
        return Ceiling(getattr(expect.gpu_load, key), f"expect.gpu_load.{key}")
    if link is not None:
        return Ceiling(round(link[0] * 1.1, 2), f"1.1 x its PCIe {link[1]} {link[0]:.1f}")
    return Ceiling(*HOST_LINK_CEILING)


def _figure_checks(
    node: str,
    run: LoadRun,
    samples: LoadSamples | None,
    figures: tuple[str, ...],
    peers: dict[str, NodeLoad],
    expect: Expectations,
    query: GpuQuery | None = None,
) -> tuple[list[Measurement], list[str], list[str], list[str]]:
    """(measurements, failures, notes, missing) of each GPU's `figures` (`bounds`): the
    highest of the SKU floor, `1 - peer_tolerance` of the node's best GPU and of the
    cluster median (each with `min_peer_gpus` plausible figures) and, for host copies, a
    share of the GPU's PCIe link; above the ceiling is implausible (not measured, no peer);
    with no bound at all, measured but not judged (not measured)."""
    load = expect.gpu_load
    tol, enough = load.peer_tolerance, load.min_peer_gpus
    measurements: list[Measurement] = []
    failures: list[str] = []
    notes: list[str] = []
    missing: list[str] = []
    for figure in figures:
        title, unit, key = TITLES[figure]
        floor = getattr(load, key)
        if floor is None:
            notes.append(f"{title}: no SKU figure (expect.gpu_load.{key}), peer-relative only")
        values = {g.index: g.figure(figure) for g in _healthy(run)}
        for index, value in values.items():
            link = link_gbs(query, index) if figure in ("h2d_gbs", "d2h_gbs") else None
            ceiling = _ceiling(figure, link, expect)
            best, _ = peer_bound(values.values(), ceiling, tol, enough, NODE_BEST, best=True)
            median, why = peer_bound(_cluster_values(figure, peers), ceiling, tol, enough)
            bounds = [best, median]
            if floor is not None:
                bounds.append(Bound(floor, f"expect.gpu_load.{key} (SKU)"))
            if link is not None:
                share = load.min_pcie_fraction
                bounds.append(
                    Bound(
                        link[0] * share, f"{share:.2f} x its PCIe {link[1]} {link[0]:.1f}", "link"
                    )
                )
            label = gpu_label(node, index, samples)
            if value is None:
                measurements.append(
                    Measurement(figure, None, unit, None, ">=", "", f"GPU {index}", outcome=FAIL)
                )
                failures.append(f"{label}: {title} not reported")
                continue
            judged = judge_figure(
                figure,
                value,
                unit,
                bounds,
                ceiling,
                f"GPU {index}",
                f"expect.gpu_load.{key}",
                why,
            )
            measurements.append(judged.measurement)
            low = [b.source for b in bounds if b is not None and value < b.value]
            if judged.outcome == FAIL:
                failures.append(f"{label}: {title} {value:g} {unit} below {' and '.join(low)}")
            elif judged.outcome == NOT_MEASURED:
                missing.append(f"{label}: {judged.reason.partition(': ')[2] or judged.reason}")
    return measurements, failures, notes, missing


def _errors(
    node: str, run: LoadRun, samples: LoadSamples | None, expected: int | None = None
) -> list[str]:
    """Each GPU whose load failed, each GPU the program was started on that reported
    nothing, and each GPU the node should have (`expected`) that it could not be started on."""
    out = [
        f"{gpu_label(node, g.index, samples)}: the load failed: {g.error}"
        for g in run.gpus
        if g.error
    ]
    for index in range(max(run.expected or 0, expected or 0)):
        if run.gpu(index) is not None:
            continue
        if index < (run.expected or 0):
            out.append(f"{gpu_label(node, index, samples)}: no result from the load program")
        else:
            out.append(
                f"{gpu_label(node, index, samples)}: not listed by nvidia-smi "
                f"(expect.gpu.count {expected}), not loaded"
            )
    return out


def _unreached(run: LoadRun, expected: int | None) -> list[Measurement]:
    """A measurement per GPU the node should have that gave no result (its subject named)."""
    return [
        Measurement("load_result", None, "", "reported", "==", "expect.gpu.count", f"GPU {i}")
        for i in range(max(run.expected or 0, expected or 0))
        if run.gpu(i) is None
    ]


def _verdict(
    node: str,
    what: str,
    measurements: list[Measurement],
    failures: list[str],
    notes: list[str],
    missing: list[str],
    fix: str,
) -> Verdict:
    kw = {"measurements": tuple(measurements), "sections": SECTIONS, "subject": node}
    if failures:
        return failing("; ".join(failures), fix, **kw)
    if missing:
        return not_measured("; ".join(missing), **kw)
    note = f" ({'; '.join(dict.fromkeys(notes))})" if notes else ""
    return passing(f"{what}{note}", **kw)


def _sample_checks(
    node: str, run: LoadRun, samples: LoadSamples | None, expect: Expectations
) -> tuple[list[Measurement], list[str], list[str], list[str]]:
    """(measurements, failures, notes, missing) of the samples: slowdown fails, power cap is
    reported, the hottest sample against the profile's ceiling."""
    ceiling = expect.gpu_load.max_temperature_c
    measurements: list[Measurement] = []
    failures, notes, missing, capped = [], [], [], []
    if ceiling is None:
        notes.append("temperature reported, not judged (expect.gpu_load.max_temperature_c)")
    if samples is not None and samples.problems and not samples.error:
        missing.append(f"{node}: nvidia-smi under load not read whole: {samples.problems[0]}")
    for g in run.gpus:
        found: GpuSamples | None = samples.gpu(g.index) if samples is not None else None
        subject = f"GPU {g.index}"
        if found is None:
            why = samples.error if samples is not None and samples.error else "no samples"
            missing.append(f"{gpu_label(node, g.index, samples)}: nvidia-smi under load: {why}")
            continue
        slow = found.event_names(SLOWDOWN_BITS)
        name = gpu_label(node, g.index, samples)
        events_unread = found.unreadable.get("clocks_event_reasons.active")
        temps_unread = found.unreadable.get("temperature.gpu")
        if events_unread and not slow:
            missing.append(
                f"{name}: clock-event reasons unreadable in {events_unread} (slowdown not measured)"
            )
        if temps_unread and ceiling is not None:
            missing.append(
                f"{name}: temperature unreadable in {temps_unread} "
                f"(the {ceiling:g} C ceiling not judged)"
            )
        shown_slow = ", ".join(slow) or ("none" if not events_unread else None)
        measurements += [
            Measurement("sm_clock_mhz", found.sm_mhz_median, "MHz", subject=subject),
            Measurement("power_w_max", found.power_w_max, "W", subject=subject),
            Measurement(
                "slowdown",
                shown_slow,
                "",
                "none",
                "==",
                "clocks_event_reasons.active (nvml.h)",
                subject,
            ),
            Measurement(
                "temperature_c_max",
                found.temperature_c_max if not temps_unread else None,
                "C",
                ceiling,
                "<=" if ceiling is not None else None,
                "expect.gpu_load.max_temperature_c" if ceiling else "",
                subject,
            ),
        ]
        if found.events & POWER_CAP_BIT:
            capped.append(str(g.index))
            measurements.append(Measurement("power_cap", "active", subject=subject))
        if slow:
            failures.append(
                f"{gpu_label(node, g.index, samples)}: {', '.join(slow)} under load "
                f"(SM clock down to {_shown(found.sm_mhz_min)} MHz, "
                f"{_shown(found.temperature_c_max)} C)"
            )
        t = found.temperature_c_max
        if ceiling is not None and t is not None and t > ceiling:
            failures.append(
                f"{gpu_label(node, g.index, samples)}: {t:g} C under load > {ceiling:g} C"
            )
    if capped:
        notes.append(f"power cap reached under load on GPU {', '.join(capped)} (not a failure)")
    return measurements, failures, notes, missing


def judge_gpu_compute(load: NodeLoad, peers: dict[str, NodeLoad], expect: Expectations) -> Verdict:
    """bf16 and tf32 GEMM TFLOPS per GPU against peers and the SKU; no thermal or hardware
    slowdown under load; the hottest sample within the profile's ceiling."""
    early = _unmeasured(load)
    if early is not None:
        return early
    run, samples = load.run, load.samples
    assert run is not None
    measurements, failures, notes, unjudged = _figure_checks(
        load.node, run, samples, COMPUTE, peers, expect
    )
    more, slow, sample_notes, missing = _sample_checks(load.node, run, samples, expect)
    missing = unjudged + missing
    failures = _errors(load.node, run, samples, load.expected_gpus) + failures + slow
    fix = (
        "check the named GPU's cooling, power and clocks (nvidia-smi -q -d PERFORMANCE); "
        "reseat or replace it"
    )
    return _verdict(
        load.node,
        f"{len(run.gpus)} GPUs within {expect.gpu_load.peer_tolerance:.0%} of peers under load",
        measurements + more + _unreached(run, load.expected_gpus),
        failures,
        notes + sample_notes,
        missing,
        fix,
    )


def judge_gpu_bandwidth(
    load: NodeLoad, peers: dict[str, NodeLoad], expect: Expectations
) -> Verdict:
    """HBM (device-to-device copy) and pinned host<->device bandwidth per GPU against peers
    and the SKU."""
    early = _unmeasured(load)
    if early is not None:
        return early
    run, samples = load.run, load.samples
    assert run is not None
    measurements, failures, notes, unjudged = _figure_checks(
        load.node, run, samples, BANDWIDTH, peers, expect, load.query
    )
    failures = _errors(load.node, run, samples, load.expected_gpus) + failures
    fix = (
        "a slow host link: check the GPU's PCIe link under load (nvidia-smi -q -d PCIE); "
        "slow HBM: replace the GPU"
    )
    return _verdict(
        load.node,
        f"{len(run.gpus)} GPUs' memory and host links within "
        f"{expect.gpu_load.peer_tolerance:.0%} of peers",
        measurements + _unreached(run, load.expected_gpus),
        failures,
        notes,
        unjudged,
        fix,
    )


def _planned(load: NodeLoad) -> int:
    """The GPUs a node's load was planned on: its expected count, what the program was
    started on, or what it reported, whichever is most."""
    run = load.run
    return max(
        load.expected_gpus or 0, (run.expected or 0) if run else 0, len(run.gpus) if run else 0
    )


def majority_checksum(peers: dict[str, NodeLoad]) -> tuple[str | None, int]:
    """The checksum more than half of the cluster's planned GPUs computed (None: no such
    majority), and how many GPUs reported one. Where every GPU that reported agrees, that
    one checksum (there is no minority to blame)."""
    counts = Counter(g.checksum for p in peers.values() for g in _healthy(p.run) if g.checksum)
    total = sum(counts.values())
    if not counts:
        return None, 0
    value, seen = counts.most_common(1)[0]
    if len(counts) == 1:
        return value, total
    planned = max(total, sum(_planned(p) for p in peers.values()))
    return (value if seen * 2 > planned else None), total


def _groups(peers: dict[str, NodeLoad]) -> str:
    """`abab on 5 GPUs (n1 GPU 0, ...); cdcd on 3 GPUs (...)`: who computed what."""
    found: dict[str, list[str]] = {}
    for p in peers.values():
        for g in _healthy(p.run):
            if g.checksum:
                found.setdefault(g.checksum, []).append(f"{p.node} GPU {g.index}")
    parts = []
    for value, gpus in sorted(found.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        more = f", and {len(gpus) - 4} more" if len(gpus) > 4 else ""
        plural = "GPU" if len(gpus) == 1 else "GPUs"
        parts.append(f"{value} on {len(gpus)} {plural} ({', '.join(gpus[:4])}{more})")
    return "; ".join(parts)


def judge_gpu_correctness(load: NodeLoad, peers: dict[str, NodeLoad]) -> Verdict:
    """Every GPU computed the cluster's majority checksum of the fixed-seed product, the same
    before and after the soak (a GPU that disagrees corrupts data silently).

    A minority is blamed only against a strict majority: a checksum more than half of the
    cluster's planned GPUs (`expect.gpu.count` per node, those that gave nothing included)
    computed. With disagreement and no such majority (a tie, or a plurality short of half)
    no GPU is blamed: every GPU's checksum is not measured, the groups named with their GPUs
    (a failed load, a lost GPU or an unstable checksum still fails on its own)."""
    early = _unmeasured(load)
    if early is not None:
        return early
    run, samples = load.run, load.samples
    assert run is not None
    majority, total = majority_checksum(peers)
    planned = max(total, sum(_planned(p) for p in peers.values()))
    measurements: list[Measurement] = []
    failures = _errors(load.node, run, samples, load.expected_gpus)
    unmeasured: list[str] = []
    reported = [g for g in _healthy(run) if g.checksum]
    if majority is None and reported:
        unmeasured.append(
            f"no checksum is shared by more than half of the {planned} planned GPUs, so no "
            f"GPU can be blamed: {_groups(peers)}"
        )
    for g in _healthy(run):
        source = f"majority of {planned} planned GPUs" if majority else "no majority"
        measurements.append(
            Measurement(
                "checksum",
                g.checksum,
                "",
                majority,
                "==" if majority else None,
                source,
                f"GPU {g.index}",
            )
        )
        name = gpu_label(load.node, g.index, samples)
        if g.checksum is None:
            failures.append(f"{name}: no checksum reported")
        elif majority is not None and g.checksum != majority:
            failures.append(f"{name}: checksum {g.checksum} differs from the cluster's {majority}")
        if g.checksum_stable is False:
            failures.append(f"{name}: its checksum changed during the soak")
        elif g.checksum_stable is None:
            failures.append(f"{name}: did not report whether its checksum held during the soak")
    fix = "take the named GPU out of service and run dcgmi diag -r 3 on it; silent data corruption"
    few = f" (compared across {total} GPUs only)" if total < 3 else ""
    return _verdict(
        load.node,
        f"{len(run.gpus)} GPUs agree with the cluster's checksum{few}",
        measurements + _unreached(run, load.expected_gpus),
        failures + unmeasured if failures else failures,
        [],
        unmeasured,
        fix,
    )


def _shown(value: float | None) -> str:
    """A sampled figure in a failure line; `?` where nvidia-smi printed none."""
    return "?" if value is None else f"{value:g}"
