"""RDMA write bandwidth and latency between node pairs (perftest), with bad-node localization."""

import pytest

from pytest_hpcnet.cloud.audit import eri_nic_indexes
from pytest_hpcnet.probes.erdma import ERDMA_IDENTITY
from pytest_hpcnet.probes.rdma_parsers import IBV_DEVINFO
from pytest_hpcnet.requirements.erdma import expected_eris
from pytest_hpcnet.requirements.perftest import (
    eri_unbound,
    gdr_applies,
    instance_unbound,
    judge_all_eris_at_once,
    judge_counters_moved,
    judge_eris_to_sum,
    judge_every_eri,
    judge_gdr_every_eri,
    judge_no_suspects,
    judge_pair_bandwidth,
    judge_pair_latency,
)
from pytest_hpcnet.requirements.registry import mark

pytestmark = pytest.mark.benchmark


def recorded(check, runs):
    """`runs` (a pair's runs by device), each run's commands recorded for the check."""
    for run in runs.values():
        for result in run.commands:
            check.command(result)
    return runs


def pair_run(campaign, pair, check):
    """The pair's run (None: not run), its commands and the suspects among its nodes
    recorded."""
    run = campaign.runs.get(pair)
    if run is not None:
        recorded(check, {pair: run})
        check.suspect(*[n for n in (pair.a, pair.b) if n in campaign.localization.suspects])
    return run


@mark("ib_write_bw")
def test_rdma_write_bandwidth(cluster, perftest_pair, check):
    campaign = cluster.perftest("ib_write_bw")
    run = pair_run(campaign, perftest_pair, check)
    check.judge(judge_pair_bandwidth(perftest_pair, run, campaign.localization, cluster.expect))


@mark("ib_write_lat")
def test_rdma_write_latency(cluster, perftest_pair, check):
    campaign = cluster.perftest("ib_write_lat")
    run = pair_run(campaign, perftest_pair, check)
    check.judge(judge_pair_latency(perftest_pair, run, campaign.localization, cluster.expect))


@pytest.mark.parametrize("tool", ["ib_write_bw", "ib_write_lat"])
@mark("perftest_localization")
def test_no_suspect_nodes(cluster, tool, check):
    campaign = cluster.perftest(tool)
    loc = campaign.localization
    check.suspect(*loc.suspects)
    confirmed = campaign.confirm_runs.values()
    check.judge(
        judge_no_suspects(tool, campaign.schedule, loc, campaign.suspect_devices, confirmed)
    )


@mark("erdma_eri_bw")
def test_every_eri_bandwidth(cluster, perftest_pair, check):
    unbound = eri_unbound(cluster.expect)
    if unbound:  # skipped, in scope, naming the key (no verdict outcome says so yet)
        pytest.skip(unbound)
    campaign = cluster.perftest("ib_write_bw")
    runs = recorded(check, campaign.device_runs.get(perftest_pair) or {})
    verdict = judge_every_eri(perftest_pair, runs, campaign.suspect_devices, cluster.expect)
    check.suspect(*verdict.extra.get("suspects", ()))
    check.judge(verdict)


@mark("erdma_instance_bw")
def test_all_eris_at_once(cluster, node, check, cloud_plane):
    cluster.require_reachable(node, check)
    check.read(ERDMA_IDENTITY.name, IBV_DEVINFO.name)
    cluster.facts_campaign.eri_devices(node.name)  # not measured unless its ERIs are known
    campaign = cluster.perftest("ib_write_bw")
    found = len(campaign.devices.get(node.name, []))
    wanted, source, _ = expected_eris(cluster.expect, node.rdma.min_devices)
    check.judge(judge_eris_to_sum(node.name, found, (wanted, source)))
    unbound = instance_unbound(cluster.expect)
    if unbound:  # skipped, in scope, naming the key
        pytest.skip(unbound)
    pair = next((p for p in campaign.instance_runs if node.name in p.key), None)
    runs = recorded(check, campaign.instance_runs.get(pair) or {})
    plane = cloud_plane.plane  # the session's one read of the control plane, if any
    indexes = eri_nic_indexes(plane).get(node.name) if plane is not None else None
    why = campaign.not_in_round(node.name, "all-ERIs-at-once")
    check.judge(judge_all_eris_at_once(pair, runs, why, cluster.expect, indexes))


@mark("erdma_gdr_bw")
def test_gpudirect_bandwidth_of_every_eri(cluster, node, check):
    """ib_write_bw from GPU memory (`--use_cuda=<the GPU nearest each ERI>`) on the node's
    all-at-once pair, every device; opt-in (`benchmarks.perftest.gdr`)."""
    check.judge(gdr_applies(cluster.expect, cluster.inventory.benchmarks.perftest))
    unbound = eri_unbound(cluster.expect)
    if unbound:  # skipped, in scope, naming the key
        pytest.skip(unbound)
    cluster.require_reachable(node, check)
    campaign = cluster.perftest("ib_write_bw")
    pair = next((p for p in campaign.gdr_runs if node.name in p.key), None)
    runs = recorded(check, campaign.gdr_runs.get(pair) or {})
    why = campaign.not_in_round(node.name, "GPUDirect")
    check.judge(
        judge_gdr_every_eri(pair, runs, campaign.devices, campaign.gdr_gpus, why, cluster.expect)
    )


@mark("rdma_counters")
def test_no_error_counter_moved(cluster, node, check):
    """Drops, errors, rate-limit drops, connect failures: the delta over the benchmark
    phases (perftest, then NCCL), not the total since boot."""
    cluster.require_reachable(node, check)
    cluster.perftest("ib_write_bw")
    cluster.perftest("ib_write_lat")
    deltas = {"perftest": counter_delta(cluster.perftests.counters, node, check)}
    cluster.nccl(check)
    deltas["NCCL"] = counter_delta(cluster.collective.counters, node, check)
    check.judge(judge_counters_moved(node.name, deltas, cluster.expect))


def counter_delta(watch, node, check):
    """The node's counter delta over one phase (None: not read before and after), the
    counter reads recorded."""
    for result in watch.commands(node.name):
        check.command(result)
    return watch.deltas().get(node.name)
