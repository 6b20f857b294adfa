"""CPFS throughput judges: per node, aggregate against the rated capacity, fairness."""

from __future__ import annotations

from pytest_hpcnet.inventory.expectations import CpfsExpect
from pytest_hpcnet.probes.fio import FioDirection, FioJob, FioResult
from pytest_hpcnet.requirements import cpfs


def result(mbs: float | None, rw: str = "write") -> FioResult:
    job = FioJob(name="hpcnet", error=0, read=FioDirection(), write=FioDirection())
    return FioResult(jobs=(job,), **{f"{rw}_bw_mb_s": mbs})


EXPECT = CpfsExpect(min_write_mbs_per_node=500, min_read_mbs_per_node=500, capacity_tib=10)


def test_node_throughput_passes_fails_and_is_not_measured_without_a_figure():
    assert cpfs.judge_node_throughput("n1", "write", result(900), None, EXPECT)
    slow = cpfs.judge_node_throughput("n1", "write", result(100), None, EXPECT)
    assert slow.outcome == "fail" and slow.reason == "n1: write 100 MB/s < 500.0 MB/s"
    assert slow.measurements[0].value == 100 and slow.measurements[0].bound == 500
    for empty in (result(None), result(float("nan")), result(0.0), None):
        verdict = cpfs.judge_node_throughput("n1", "write", empty, None, EXPECT)
        assert verdict.outcome == "not_measured", empty
    failed = cpfs.judge_node_throughput("n1", "read", None, "fio: not found", EXPECT)
    assert failed.outcome == "fail" and "fio: not found" in failed.reason
    unbound = cpfs.judge_node_throughput("n1", "read", result(900, "read"), None, CpfsExpect())
    assert (
        unbound.outcome == "not_measured" and "expect.cpfs.min_read_mbs_per_node" in unbound.reason
    )


def test_the_aggregate_is_not_measured_without_a_capacity_even_when_fair():
    fair = {"n1": 1000.0, "n2": 1000.0}
    verdict = cpfs.judge_aggregate_and_fairness("write", fair, CpfsExpect(), [])
    assert verdict.outcome == "not_measured"
    assert "no bound set (expect.cpfs.capacity_tib)" in verdict.reason
    assert cpfs.judge_aggregate_and_fairness("write", fair, EXPECT, [])


def test_the_aggregate_below_the_rated_figure_and_an_unfair_node_fail():
    low = cpfs.judge_aggregate_and_fairness("write", {"n1": 100.0, "n2": 100.0}, EXPECT, [])
    assert low.outcome == "fail" and low.reason.startswith("aggregate write 200 MB/s < 1000")
    unfair = {"n1": 2000.0, "n2": 2000.0, "n3": 500.0}
    verdict = cpfs.judge_aggregate_and_fairness("write", unfair, EXPECT, ["n4"])
    assert verdict.outcome == "fail" and verdict.reason.startswith("n3: write 500 MB/s is 25%")
    assert "left out: n4" in verdict.reason
    assert cpfs.judge_aggregate_and_fairness("read", {}, EXPECT, ["n1"]).outcome == "not_measured"
