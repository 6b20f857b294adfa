"""RDMA write bandwidth and latency between node pairs (perftest), with bad-node localization."""

import pytest

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
    assert verdict, f"{run.pair.a}->{run.pair.b}: {verdict.reason} ({blame(campaign, run.pair)})"


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
    assert not loc.suspects and not loc.link_problems, f"{tool}: " + "; ".join(lines)
