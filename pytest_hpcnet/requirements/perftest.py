"""Judges of the perftest suite's checks, each on the campaign's typed results: a pair's
bandwidth and latency (naming the node the schedule blames), the schedule's suspects, every
ERI's bandwidth, all ERIs at once, GPUDirect per ERI, and the error counters over the
benchmark phases. Each records the figures it judged and is not measured where a run is
missing or no bound is set."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from pytest_hpcnet.inventory.bench_settings import PerftestSettings
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.counters import CounterDelta
from pytest_hpcnet.requirements.erdma import (
    eri_bound,
    judge_counter_deltas,
    judge_eri_bw,
    judge_gdr_bw,
    judge_instance_bw,
    reported_first,
)
from pytest_hpcnet.requirements.judges import (
    Localized,
    PerftestRun,
    judge_eri_count,
    judge_ib_write_bw,
    judge_ib_write_lat,
    judge_localization,
)
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    combine,
    not_applicable,
    not_measured,
    passing,
)


class PairKey(Protocol):
    """A scheduled pair (`campaigns.schedule.Pair`)."""

    a: str
    b: str

    @property
    def key(self) -> Any: ...


class PairRun(PerftestRun, Protocol):
    """One pair's run as these judges read it (`campaigns.perftest_rounds.PairRun`)."""

    pair: Any
    device: str | None


NO_ERI_BOUND = "no bound set (expect.erdma.per_eri_gbps): Alibaba publishes none here"


def blame(localization: Localized, pair: PairKey) -> str:
    """The part of a failure message that says which node the schedule points at."""
    suspects = [n for n in (pair.a, pair.b) if n in localization.suspects]
    if suspects:
        return f"suspect node: {', '.join(suspects)}"
    if any(p == pair or (p.a, p.b) == (pair.b, pair.a) for p in localization.link_problems):
        return "both nodes pass with other partners: a link/pair problem"
    return "not yet attributed to a node"


def unreachable_pair(pair: PairKey) -> Verdict:
    """A pair the campaign could not run (a node unreachable)."""
    return not_measured(f"{pair.a}->{pair.b}: not measured (node unreachable)")


def judge_pair_bandwidth(
    pair: PairKey, run: PairRun | None, localization: Localized, expect: Expectations
) -> Verdict:
    """`judge_ib_write_bw` on the pair's run, its average recorded, the reason naming the
    pair (and device) and whom the schedule blames."""
    if run is None:
        return unreachable_pair(pair)
    verdict = judge_ib_write_bw(run, expect)
    found = Measurement("bw_avg", run.value, "Gbit/s", verdict.bound, ">=", "expect.ib_write_bw")
    where = f"{run.pair.a}->{run.pair.b}" + (f" {run.device}" if run.device else "")
    said = f"{where}: {verdict.reason} ({blame(localization, run.pair)})"
    return reported_first(verdict.with_reason(said), found)


def judge_pair_latency(
    pair: PairKey, run: PairRun | None, localization: Localized, expect: Expectations
) -> Verdict:
    """`judge_ib_write_lat` on the pair's run, t_avg and t_p99 recorded where measured."""
    if run is None:
        return unreachable_pair(pair)
    verdict = judge_ib_write_lat(run, expect)
    found = []
    if run.error is None and run.latency is not None:
        bounds, lat = expect.ib_write_lat, run.latency
        source = "expect.ib_write_lat"
        found += [
            Measurement("t_avg", lat.t_avg_us, "usec", bounds.max_avg_us, "<=", source),
            Measurement("t_p99", lat.p99_us, "usec", bounds.max_p99_us, "<=", source),
        ]
    said = f"{run.pair.a}->{run.pair.b}: {verdict.reason} ({blame(localization, run.pair)})"
    return reported_first(verdict.with_reason(said), *found)


def judge_no_suspects(
    tool: str,
    schedule: str,
    localization: Localized,
    suspect_devices: Sequence[str],
    confirm_runs: Iterable[PairRun],
) -> Verdict:
    """`judge_localization`, each confirmation run's figure reported."""
    found = [
        Measurement(
            f"confirm {run.pair.a}->{run.pair.b}", run.value, "", None, None, "confirm pass"
        )
        for run in confirm_runs
    ]
    return reported_first(judge_localization(tool, schedule, localization, suspect_devices), *found)


def eri_unbound(expect: Expectations) -> str:
    """Why the per-ERI checks have no bound (`expect.erdma.per_eri_gbps` unset: the check
    is skipped, in scope, naming the key); "" when one is set."""
    return NO_ERI_BOUND if eri_bound(expect) is None else ""


def instance_unbound(expect: Expectations) -> str:
    """Why the all-ERIs-at-once check has no bound (`expect.erdma.per_instance_gbps`); ""
    when one is set."""
    if expect.erdma.per_instance_gbps is None:
        return "no bound set (expect.erdma.per_instance_gbps): not published"
    return ""


def judge_every_eri(
    pair: PairKey,
    runs: Mapping[str, PairRun] | None,
    suspect_devices: Sequence[str],
    expect: Expectations,
) -> Verdict:
    """Each ERI of the pair at the per-ERI floor; the reason names the suspect devices
    (`extra["suspects"]`: their nodes)."""
    bound = eri_bound(expect)
    if bound is None:
        return not_measured(NO_ERI_BOUND)
    if not runs:
        return unreachable_pair(pair)
    verdicts = []
    for device, run in runs.items():
        verdict = judge_eri_bw(str(pair), device, run.value, run.error, expect)
        found = Measurement("bw_avg", run.value, "Gbit/s", bound, ">=", "expect.erdma", device)
        verdicts.append(verdict.with_measurements(found))
    suspects = suspect_devices_of(pair, suspect_devices)
    verdict = combine(verdicts)
    if suspects and not verdict:
        verdict = verdict.with_reason(f"{verdict.reason} (suspect device: {', '.join(suspects)})")
    verdict.extra["suspects"] = sorted({d.split()[0] for d in suspects})
    return verdict


def suspect_devices_of(pair: PairKey, suspect_devices: Sequence[str]) -> list[str]:
    """The suspect devices (`node07 erdma_1`) on either node of the pair."""
    return [d for d in suspect_devices if d.split()[0] in pair.key]


def judge_eris_to_sum(node: str, found: int, wanted: tuple[int, str]) -> Verdict:
    """The node has the ERIs the all-ERIs-at-once round sums (`wanted`: count and source);
    one ERI expected is not applicable, one found where more are expected not measured."""
    count, source = wanted
    enough = judge_eri_count(node, found, count, source)
    if not enough:
        return enough
    if found < 2 and count < 2:  # what the inventory asks for, never only what was found
        return not_applicable(f"{source} is {count}: no second ERI to sum")
    if found < 2:
        return not_measured(f"{node}: {found} ERI found, {source} {count}")
    return passing()


def judge_all_eris_at_once(
    pair: PairKey | None,
    runs: Mapping[str, PairRun],
    not_in_round: str,
    expect: Expectations,
    indexes: Any = None,
) -> Verdict:
    """The node's all-at-once pair's sum at the per-instance figure (`not_in_round`: why
    the node is in no such pair)."""
    if pair is None:
        return not_measured(not_in_round)
    per_device = {d: r.value for d, r in runs.items()}
    errors = [f"{d}: {r.error}" for d, r in runs.items() if r.error]
    verdict = judge_instance_bw(str(pair), per_device, list(runs), expect, indexes)
    total = Measurement("sum", verdict.measured, "Gbit/s", verdict.bound, ">=", "expect.erdma")
    said = verdict.reason + (f" ({'; '.join(errors)})" if errors else "")
    return reported_first(verdict.with_reason(said), total)


def gdr_applies(expect: Expectations, perftest: PerftestSettings) -> Verdict:
    """GPUDirect perftest applies: `expect.erdma.gdr` true and the GPUDirect perftest on
    (`benchmarks.perftest.gdr`); else not applicable."""
    gdr = expect.erdma.gdr
    if gdr is not True:
        said = "not supported here" if gdr is False else "not expected"
        return not_applicable(f"GPUDirect RDMA {said} (expect.erdma.gdr is {gdr})")
    if not perftest.gdr:
        return not_applicable(
            "the GPUDirect perftest is off (benchmarks.perftest.gdr: false; "
            "it needs a CUDA-built perftest)"
        )
    return passing()


def gpu_near(
    devices: Mapping[str, Sequence[str]],
    gdr_gpus: Mapping[str, Mapping[str, int | None]],
    node: str,
    i: int,
) -> int | None:
    """The GPU the GPUDirect run used with the node's device `i` (None: none found)."""
    found = devices.get(node, [])
    return gdr_gpus.get(node, {}).get(found[i]) if i < len(found) else None


def judge_gdr_every_eri(
    pair: PairKey | None,
    runs: Mapping[str, PairRun],
    devices: Mapping[str, Sequence[str]],
    gdr_gpus: Mapping[str, Mapping[str, int | None]],
    not_in_round: str,
    expect: Expectations,
) -> Verdict:
    """Each ERI of the node's GPUDirect pair at the per-ERI floor, from the GPU nearest it
    on each side (each node's `devices` in index order, `gdr_gpus` the GPU nearest each)."""
    bound = eri_bound(expect)
    if bound is None:
        return not_measured(NO_ERI_BOUND)
    if pair is None:
        return not_measured(not_in_round)
    verdicts = []
    for i, (device, run) in enumerate(runs.items()):
        near = (gpu_near(devices, gdr_gpus, pair.a, i), gpu_near(devices, gdr_gpus, pair.b, i))
        verdict = judge_gdr_bw(str(pair), device, near, run.value, run.error, expect)
        found = Measurement("gdr bw_avg", run.value, "Gbit/s", bound, ">=", "expect.erdma", device)
        verdicts.append(verdict.with_measurements(found))
    return combine(verdicts)


def judge_counters_moved(
    node: str, deltas: Mapping[str, CounterDelta | None], expect: Expectations
) -> Verdict:
    """No drop or error counter of the node moved past its bound during each benchmark
    phase (`deltas` by phase; None: not read before and after); each reset reported."""
    bounds = {
        "rx_dropped": expect.nic_max_dropped,
        "tx_dropped": expect.nic_max_dropped,
        "rx_errors": expect.nic_max_errors,
        "tx_errors": expect.nic_max_errors,
    }
    verdicts, resets = [], []
    for phase, delta in deltas.items():
        if delta is None:
            verdicts.append(not_measured(f"{node}: {phase} counters not read before and after"))
            continue
        resets += [
            Measurement(f"{phase} reset", reset, "", None, None, "counter went back")
            for reset in delta.resets
        ]
        verdict = judge_counter_deltas({node: delta}, bounds)
        verdicts.append(
            verdict if verdict else verdict.with_reason(f"during {phase}: {verdict.reason}")
        )
    return reported_first(combine(verdicts), *resets)
