"""RDMA write bandwidth and latency between node pairs (perftest), with bad-node localization."""

import pytest

from pytest_hpcnet.requirements.erdma import (
    eri_bound,
    judge_counter_deltas,
    judge_eri_bw,
    judge_instance_bw,
)
from pytest_hpcnet.requirements.judges import judge_ib_write_bw, judge_ib_write_lat
from pytest_hpcnet.requirements.registry import mark

UNSET_BW = "no bound set (expect.ib_write_bw.min_gbps), or give expect.ib_write_bw.reference"

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


@mark("ib_write_bw")
def test_rdma_write_bandwidth(cluster, perftest_pair, check):
    campaign = cluster.perftest("ib_write_bw")
    run = campaign.runs.get(perftest_pair)
    assert run is not None, f"{perftest_pair.a}->{perftest_pair.b}: not measured (node unreachable)"
    record_run(check, campaign, run)
    verdict = judge_ib_write_bw(run, cluster.expect)
    check.measure("bw_avg", run.value, "Gbit/s", verdict.bound, ">=", "expect.ib_write_bw")
    if verdict and verdict.bound is None:  # measured, but nothing to judge it against
        pytest.skip(f"{UNSET_BW}; measured {run.value} Gbit/s")
    assert verdict, f"{where(run)}: {verdict.reason} ({blame(campaign, run.pair)})"


@mark("ib_write_lat")
def test_rdma_write_latency(cluster, perftest_pair, check):
    campaign = cluster.perftest("ib_write_lat")
    run = campaign.runs.get(perftest_pair)
    assert run is not None, f"{perftest_pair.a}->{perftest_pair.b}: not measured (node unreachable)"
    record_run(check, campaign, run)
    verdict = judge_ib_write_lat(run, cluster.expect)
    if run.error is None and run.latency is not None:
        bounds, lat = cluster.expect.ib_write_lat, run.latency
        check.measure("t_avg", lat.t_avg_us, "usec", bounds.max_avg_us, "<=", "expect.ib_write_lat")
        check.measure("t_p99", lat.p99_us, "usec", bounds.max_p99_us, "<=", "expect.ib_write_lat")
    assert verdict, f"{run.pair.a}->{run.pair.b}: {verdict.reason} ({blame(campaign, run.pair)})"


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
    lines = [f"schedule {campaign.schedule}"]
    lines += [f"{n}: {loc.verdicts[n].reason}" for n in loc.suspects]
    lines += [f"link {p.a}-{p.b}: fails while both nodes pass elsewhere" for p in loc.link_problems]
    lines += [f"suspect device {d}" for d in campaign.suspect_devices]
    clean = not loc.suspects and not loc.link_problems and not campaign.suspect_devices
    assert clean, f"{tool}: " + "; ".join(lines)


@mark("erdma_eri_bw")
def test_every_eri_bandwidth(cluster, perftest_pair, check):
    bound = eri_bound(cluster.expect)
    if bound is None:
        pytest.skip("no bound set (expect.erdma.per_eri_gbps): Alibaba publishes none here")
    campaign = cluster.perftest("ib_write_bw")
    runs = campaign.device_runs.get(perftest_pair)
    assert runs, f"{perftest_pair.a}->{perftest_pair.b}: not measured (node unreachable)"
    failed = []
    for device, run in runs.items():
        for result in run.commands:
            check.command(result)
        verdict = judge_eri_bw(str(perftest_pair), device, run.value, run.error, cluster.expect)
        check.measure(f"{device} bw_avg", run.value, "Gbit/s", bound, ">=", "expect.erdma")
        if not verdict:
            failed.append(verdict.reason)
    suspects = [d for d in campaign.suspect_devices if d.split()[0] in perftest_pair.key]
    check.suspect(*{d.split()[0] for d in suspects})
    blamed = f" (suspect device: {', '.join(suspects)})" if suspects else ""
    assert not failed, "; ".join(failed) + blamed


@mark("erdma_instance_bw")
def test_all_eris_at_once(cluster, node, check):
    campaign = cluster.perftest("ib_write_bw")
    found = len(campaign.devices.get(node.name, []))
    wanted = cluster.expect.erdma.eris or 1
    assert found >= min(wanted, 2), f"{node.name}: {found} ERI(s), expect.erdma.eris {wanted}"
    if found < 2:
        pytest.skip(f"not applicable: {node.name} has one ERI (expect.erdma.eris {wanted})")
    if cluster.expect.erdma.per_instance_gbps is None:
        pytest.skip("no bound set (expect.erdma.per_instance_gbps): not published")
    pair = next((p for p in campaign.instance_runs if node.name in p.key), None)
    assert pair is not None, f"{node.name}: not in the all-ERIs-at-once round (no partner)"
    runs = campaign.instance_runs[pair]
    for run in runs.values():
        for result in run.commands:
            check.command(result)
    per_device = {d: r.value for d, r in runs.items()}
    errors = [f"{d}: {r.error}" for d, r in runs.items() if r.error]
    devices = list(runs)
    verdict = judge_instance_bw(str(pair), per_device, devices, cluster.expect)
    check.measure("sum", verdict.measured, "Gbit/s", verdict.bound, ">=", "expect.erdma")
    assert verdict, verdict.reason + (f" ({'; '.join(errors)})" if errors else "")


@mark("rdma_counters")
def test_no_error_counter_moved(cluster, node, check):
    """Drops, errors, rate-limit drops, connect failures: the delta over the benchmark
    phases (perftest, then NCCL), not the total since boot."""
    cluster.perftest("ib_write_bw")
    cluster.perftest("ib_write_lat")
    expect = cluster.expect
    bounds = {
        "rx_dropped": expect.nic_max_dropped,
        "tx_dropped": expect.nic_max_dropped,
        "rx_errors": expect.nic_max_errors,
        "tx_errors": expect.nic_max_errors,
    }
    reasons = []
    for phase, watch in (("perftest", cluster.perftests.counters), ("NCCL", None)):
        if watch is None:
            cluster.nccl(check)
            watch = cluster.collective.counters
        for result in watch.commands(node.name):
            check.command(result)
        delta = watch.deltas().get(node.name)
        if delta is None:
            reasons.append(f"{node.name}: {phase} counters not read (node unreachable)")
            continue
        for reset in delta.resets:
            check.measure(f"{phase} reset", reset, "", None, None, "counter went back")
        verdict = judge_counter_deltas({node.name: delta}, bounds)
        if not verdict:
            reasons.append(f"during {phase}: {verdict.reason}")
    assert not reasons, "; ".join(reasons)
