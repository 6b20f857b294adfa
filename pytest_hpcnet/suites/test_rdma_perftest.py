"""RDMA write bandwidth and latency between node pairs (perftest), with bad-node localization."""

import pytest

from pytest_hpcnet.cloud.audit import eri_nic_indexes
from pytest_hpcnet.requirements.erdma import (
    eri_bound,
    expected_eris,
    judge_counter_deltas,
    judge_eri_bw,
    judge_gdr_bw,
    judge_instance_bw,
)
from pytest_hpcnet.requirements.judges import (
    judge_eri_count,
    judge_ib_write_bw,
    judge_ib_write_lat,
    judge_localization,
)
from pytest_hpcnet.requirements.registry import mark
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    NotMeasured,
    combine,
    not_measured,
)

pytestmark = pytest.mark.benchmark


def blame(campaign, pair):
    """The part of a failure message that says which node the schedule points at."""
    loc = campaign.localization
    suspects = [n for n in (pair.a, pair.b) if n in loc.suspects]
    if suspects:
        return f"suspect node: {', '.join(suspects)}"
    if any(p == pair or (p.a, p.b) == (pair.b, pair.a) for p in loc.link_problems):
        return "both nodes pass with other partners: a link/pair problem"
    return "not yet attributed to a node"


def record_run(check, campaign, run):
    for result in run.commands:
        check.command(result)
    check.suspect(*[n for n in (run.pair.a, run.pair.b) if n in campaign.localization.suspects])


def where(run):
    """`node01->node02 erdma_1` (the device when the pair has several)."""
    return f"{run.pair.a}->{run.pair.b}" + (f" {run.device}" if run.device else "")


def pair_run(campaign, pair):
    """The pair's run; a pair the campaign could not run (a node unreachable) is not measured."""
    run = campaign.runs.get(pair)
    if run is None:
        raise NotMeasured(f"{pair.a}->{pair.b}: not measured (node unreachable)")
    return run


@mark("ib_write_bw")
def test_rdma_write_bandwidth(cluster, perftest_pair, check):
    campaign = cluster.perftest("ib_write_bw")
    run = pair_run(campaign, perftest_pair)
    record_run(check, campaign, run)
    verdict = judge_ib_write_bw(run, cluster.expect)
    check.measure("bw_avg", run.value, "Gbit/s", verdict.bound, ">=", "expect.ib_write_bw")
    check.judge(verdict.with_reason(f"{verdict.reason} ({blame(campaign, run.pair)})"), where(run))


@mark("ib_write_lat")
def test_rdma_write_latency(cluster, perftest_pair, check):
    campaign = cluster.perftest("ib_write_lat")
    run = pair_run(campaign, perftest_pair)
    record_run(check, campaign, run)
    verdict = judge_ib_write_lat(run, cluster.expect)
    if run.error is None and run.latency is not None:
        bounds, lat = cluster.expect.ib_write_lat, run.latency
        check.measure("t_avg", lat.t_avg_us, "usec", bounds.max_avg_us, "<=", "expect.ib_write_lat")
        check.measure("t_p99", lat.p99_us, "usec", bounds.max_p99_us, "<=", "expect.ib_write_lat")
    context = f"{run.pair.a}->{run.pair.b}"
    check.judge(verdict.with_reason(f"{verdict.reason} ({blame(campaign, run.pair)})"), context)


@pytest.mark.parametrize("tool", ["ib_write_bw", "ib_write_lat"])
@mark("perftest_localization")
def test_no_suspect_nodes(cluster, tool, check):
    campaign = cluster.perftest(tool)
    loc = campaign.localization
    check.suspect(*loc.suspects)
    for run in campaign.confirm_runs.values():
        check.measure(
            f"confirm {run.pair.a}->{run.pair.b}", run.value, "", None, None, "confirm pass"
        )
    check.judge(judge_localization(tool, campaign.schedule, loc, campaign.suspect_devices))


@mark("erdma_eri_bw")
def test_every_eri_bandwidth(cluster, perftest_pair, check):
    bound = eri_bound(cluster.expect)
    if bound is None:
        pytest.skip("no bound set (expect.erdma.per_eri_gbps): Alibaba publishes none here")
    campaign = cluster.perftest("ib_write_bw")
    runs = campaign.device_runs.get(perftest_pair)
    if not runs:
        raise NotMeasured(f"{perftest_pair.a}->{perftest_pair.b}: not measured (node unreachable)")
    verdicts = []
    for device, run in runs.items():
        for result in run.commands:
            check.command(result)
        verdict = judge_eri_bw(str(perftest_pair), device, run.value, run.error, cluster.expect)
        measured = Measurement("bw_avg", run.value, "Gbit/s", bound, ">=", "expect.erdma", device)
        verdicts.append(verdict.with_measurements(measured))
    suspects = [d for d in campaign.suspect_devices if d.split()[0] in perftest_pair.key]
    check.suspect(*{d.split()[0] for d in suspects})
    verdict = combine(verdicts)
    if suspects and not verdict:
        verdict = verdict.with_reason(f"{verdict.reason} (suspect device: {', '.join(suspects)})")
    check.judge(verdict)


@mark("erdma_instance_bw")
def test_all_eris_at_once(cluster, node, check, cloud_plane):
    cluster.require_reachable(node, check)
    check.read("erdma_identity", "ibv_devinfo_v")
    cluster.facts_campaign.eri_devices(node.name)  # not measured unless its ERIs are known
    campaign = cluster.perftest("ib_write_bw")
    found = len(campaign.devices.get(node.name, []))
    wanted, source, _ = expected_eris(cluster.expect, node.rdma.min_devices)
    check.judge(judge_eri_count(node.name, found, wanted, source))
    if found < 2 and wanted < 2:  # what the inventory asks for, never only what was found
        pytest.skip(f"not applicable: {source} is {wanted}: no second ERI to sum")
    if found < 2:
        raise NotMeasured(f"{node.name}: {found} ERI found, {source} {wanted}")
    if cluster.expect.erdma.per_instance_gbps is None:
        pytest.skip("no bound set (expect.erdma.per_instance_gbps): not published")
    pair = next((p for p in campaign.instance_runs if node.name in p.key), None)
    if pair is None:
        raise NotMeasured(campaign.not_in_round(node.name, "all-ERIs-at-once"))
    runs = campaign.instance_runs[pair]
    for run in runs.values():
        for result in run.commands:
            check.command(result)
    per_device = {d: r.value for d, r in runs.items()}
    errors = [f"{d}: {r.error}" for d, r in runs.items() if r.error]
    devices = list(runs)
    plane = cloud_plane.plane  # the session's one read of the control plane, if any
    indexes = eri_nic_indexes(plane).get(node.name) if plane is not None else None
    verdict = judge_instance_bw(str(pair), per_device, devices, cluster.expect, indexes)
    check.measure("sum", verdict.measured, "Gbit/s", verdict.bound, ">=", "expect.erdma")
    check.judge(verdict.with_reason(verdict.reason + (f" ({'; '.join(errors)})" if errors else "")))


def gpu_near(campaign, node: str, i: int) -> int | None:
    """The GPU the GPUDirect run used with the node's device `i` (None: none found)."""
    found = campaign.devices.get(node, [])
    return campaign.gdr_gpus.get(node, {}).get(found[i]) if i < len(found) else None


@mark("erdma_gdr_bw")
def test_gpudirect_bandwidth_of_every_eri(cluster, node, check):
    """ib_write_bw from GPU memory (`--use_cuda=<the GPU nearest each ERI>`) on the node's
    all-at-once pair, every device; opt-in (`benchmarks.perftest.gdr`)."""
    gdr = cluster.expect.erdma.gdr
    if gdr is not True:
        said = "not supported here" if gdr is False else "not expected"
        pytest.skip(f"not applicable: GPUDirect RDMA {said} (expect.erdma.gdr is {gdr})")
    if not cluster.inventory.benchmarks.perftest.gdr:
        pytest.skip(
            "not applicable: the GPUDirect perftest is off (benchmarks.perftest.gdr: false; "
            "it needs a CUDA-built perftest)"
        )
    bound = eri_bound(cluster.expect)
    if bound is None:
        pytest.skip("no bound set (expect.erdma.per_eri_gbps): Alibaba publishes none here")
    cluster.require_reachable(node, check)
    campaign = cluster.perftest("ib_write_bw")
    pair = next((p for p in campaign.gdr_runs if node.name in p.key), None)
    if pair is None:
        raise NotMeasured(campaign.not_in_round(node.name, "GPUDirect"))
    verdicts = []
    for i, (device, run) in enumerate(campaign.gdr_runs[pair].items()):
        for result in run.commands:
            check.command(result)
        gpus = tuple(gpu_near(campaign, n, i) for n in (pair.a, pair.b))
        verdict = judge_gdr_bw(str(pair), device, gpus, run.value, run.error, cluster.expect)
        measured = Measurement(
            "gdr bw_avg", run.value, "Gbit/s", bound, ">=", "expect.erdma", device
        )
        verdicts.append(verdict.with_measurements(measured))
    check.judge(combine(verdicts))


@mark("rdma_counters")
def test_no_error_counter_moved(cluster, node, check):
    """Drops, errors, rate-limit drops, connect failures: the delta over the benchmark
    phases (perftest, then NCCL), not the total since boot."""
    cluster.require_reachable(node, check)
    cluster.perftest("ib_write_bw")
    cluster.perftest("ib_write_lat")
    expect = cluster.expect
    bounds = {
        "rx_dropped": expect.nic_max_dropped,
        "tx_dropped": expect.nic_max_dropped,
        "rx_errors": expect.nic_max_errors,
        "tx_errors": expect.nic_max_errors,
    }
    verdicts = []
    for phase, watch in (("perftest", cluster.perftests.counters), ("NCCL", None)):
        if watch is None:
            cluster.nccl(check)
            watch = cluster.collective.counters
        for result in watch.commands(node.name):
            check.command(result)
        delta = watch.deltas().get(node.name)
        if delta is None:
            verdicts.append(
                not_measured(f"{node.name}: {phase} counters not read before and after")
            )
            continue
        for reset in delta.resets:
            check.measure(f"{phase} reset", reset, "", None, None, "counter went back")
        verdict = judge_counter_deltas({node.name: delta}, bounds)
        verdicts.append(
            verdict if verdict else verdict.with_reason(f"during {phase}: {verdict.reason}")
        )
    check.judge(combine(verdicts))
