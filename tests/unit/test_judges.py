"""One judge per requirement: bounds, margins, fail-closed reasons, and the campaigns use it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_hpcnet.campaigns.cluster import Cluster
from pytest_hpcnet.campaigns.perftest.rounds import PairRun
from pytest_hpcnet.campaigns.schedule import Pair
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.nccl import NcclResult, parse_nccl
from pytest_hpcnet.probes.perftest_parsers import BandwidthResult, LatencyResult
from pytest_hpcnet.requirements import judges
from tests.conftest import FIXTURES

EXPECT = Expectations.model_validate(
    {
        "ib_write_bw": {"min_gbps": 50.0},
        "ib_write_lat": {"max_avg_us": 20.0, "max_p99_us": 40.0},
        "nccl": {"min_avg_busbw_gbs": 10.0, "min_busbw_largest_gbs": 12.0},
    }
)
PAIR = Pair("a", "b")


def bw_run(gbps: float | None, error: str | None = None) -> PairRun:
    result = BandwidthResult(avg_gbps=gbps, msg_size=65536) if gbps is not None else None
    return PairRun(PAIR, 1, bandwidth=result, error=error)


def lat_run(avg: float, p99: float | None) -> PairRun:
    return PairRun(PAIR, 1, latency=LatencyResult(t_avg_us=avg, p99_us=p99))


@pytest.mark.parametrize(
    ("gbps", "passed", "reason"),
    [(50.0, True, ""), (60.0, True, ""), (49.99, False, "BW average 49.99 Gbit/s < 50.00 Gbit/s")],
)
def test_bandwidth_bound_is_inclusive(gbps, passed, reason):
    verdict = judges.judge_ib_write_bw(bw_run(gbps), EXPECT)
    assert (verdict.passed, verdict.reason, verdict.bound) == (passed, reason, 50.0)
    assert verdict.margin == pytest.approx((gbps - 50.0) / 50.0)


def test_bandwidth_error_and_missing_value_fail_closed():
    failed = judges.judge_ib_write_bw(bw_run(None, "server on b did not start: x"), EXPECT)
    assert not failed and failed.reason == "ib_write_bw failed: server on b did not start: x"
    missing = judges.judge_ib_write_bw(PairRun(PAIR, 1), EXPECT)
    assert not missing and missing.reason == "no bandwidth measured"


def test_latency_checks_average_then_p99():
    assert judges.judge_ib_write_lat(lat_run(20.0, 40.0), EXPECT)
    slow = judges.judge_ib_write_lat(lat_run(25.0, 30.0), EXPECT)
    assert not slow and slow.reason == "t_avg 25.00 usec > 20.0 usec"
    tail = judges.judge_ib_write_lat(lat_run(10.0, 41.0), EXPECT)
    assert not tail and tail.reason == "99% 41.00 usec > 40.0 usec" and tail.measured == 41.0
    assert judges.judge_ib_write_lat(lat_run(10.0, None), EXPECT)  # no percentile printed


#: A real all_reduce_perf table; the judged figures are replaced per case.
TABLE = parse_nccl((FIXTURES / "nccl" / "allreduce-2node-tag-output-warn.txt").read_text())


def nccl(avg: float | None, largest: float | None, error: str | None = None) -> NcclResult:
    return replace(
        TABLE,
        rows=() if error else TABLE.rows,
        avg_busbw_gbs=avg,
        busbw_at_max_size_gbs=largest,
        max_size_bytes=1 << 30,
        error=error,
    )


def test_nccl_judges():
    assert judges.judge_nccl(nccl(10.0, 12.0), EXPECT)
    low = judges.judge_nccl(nccl(9.5, 20.0), EXPECT)
    assert not low and low.reason == "average bus bandwidth 9.5 GB/s < 10.0 GB/s"
    largest = judges.judge_nccl(nccl(11.0, 11.0), EXPECT)
    assert not largest and largest.reason.startswith("bus bandwidth at 1073741824 bytes is 11.0")
    broken = nccl(None, None, error="NCCL WARN oops")
    assert judges.judge_nccl(broken, EXPECT).reason == "all_reduce_perf failed: NCCL WARN oops"
    assert judges.judge_nccl_avg_busbw(broken, EXPECT).reason == (
        "all_reduce_perf failed: NCCL WARN oops"
    )
    wrong = replace(nccl(20.0, 20.0), total_wrong=3)  # fast but wrong fails every NCCL judge
    assert not judges.judge_nccl_avg_busbw(wrong, EXPECT)
    reason = judges.judge_nccl(wrong, EXPECT).reason
    assert reason == "all_reduce_perf not ok: 3 wrong values (#wrong)"
    unbounded = Expectations.model_validate({})
    unjudged = judges.judge_nccl_avg_busbw(nccl(1.0, 1.0), unbounded)
    assert unjudged.outcome == "not_measured" and not unjudged
    assert unjudged.reason == "no bound set (expect.nccl.min_avg_busbw_gbs); measured 1"
    assert judges.judge_nccl(nccl(1.0, 1.0), unbounded)  # bisection: correctness alone


class _Inventory:
    expect = EXPECT


@pytest.mark.parametrize(
    ("tool", "run"),
    [
        ("ib_write_bw", bw_run(49.0)),
        ("ib_write_bw", bw_run(51.0)),
        ("ib_write_bw", bw_run(None, "timeout")),
        ("ib_write_lat", lat_run(10.0, 41.0)),
        ("ib_write_lat", lat_run(10.0, None)),
        ("ib_write_lat", lat_run(21.0, 22.0)),
    ],
)
def test_localization_predicate_is_the_judge(tool, run):
    cluster = Cluster(_Inventory(), transport=None)  # pair_passes reads only the expectations
    assert cluster.pair_passes(tool)(run) == judges.judge_perftest(tool, run, EXPECT).passed


def test_bisection_predicate_is_the_judge():
    cluster = Cluster(_Inventory(), transport=None)
    for result in (nccl(10.0, 12.0), nccl(9.0, 12.0), nccl(10.0, 11.0), nccl(None, None, "x")):
        assert cluster.nccl_passes(result) == judges.judge_nccl(result, EXPECT).passed
