"""A figure above its physical ceiling is not a measurement: never a pass, never a peer
reference (ib_write_bw at 1e30 Gbit/s, fio at 1e24 MB/s, NCCL busbw at 1e300)."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_hpcnet.inventory.expectations import CpfsExpect, Expectations
from pytest_hpcnet.requirements import cpfs
from pytest_hpcnet.requirements.bounds import Bound, Ceiling, judge_figure, peer_bound
from pytest_hpcnet.requirements.judges import judge_ib_write_bw
from tests.unit.test_requirements_cpfs import result


@dataclass
class Run:
    value: float | None
    error: str | None = None
    latency: None = None


def test_ib_write_bw_above_any_port_is_not_measured():
    expect = Expectations(ib_write_bw={"min_gbps": 64})
    assert judge_ib_write_bw(Run(78.0), expect).outcome == "pass"
    absurd = judge_ib_write_bw(Run(1e30), expect)
    assert absurd.outcome == "not_measured" and "implausible" in absurd.reason
    rated = Expectations(ib_write_bw={"min_gbps": 64, "max_gbps": 176})
    assert judge_ib_write_bw(Run(180.0), rated).outcome == "not_measured"


def test_fio_above_the_network_is_not_measured_and_no_peer():
    expect = CpfsExpect(min_read_mbs_per_node=500, min_fairness=0.5)
    absurd = cpfs.judge_node_throughput("n1", "read", result(1e24, "read"), None, expect)
    assert absurd.outcome == "not_measured" and "implausible" in absurd.reason
    values = {"n1": 1e24, "n2": 2000.0, "n3": 2100.0}
    fair = cpfs.judge_fairness("read", {"n2": 2000.0, "n3": 2100.0}, expect)
    assert fair.outcome == "pass"
    together = cpfs.judge_aggregate_and_fairness("read", values, expect, [])
    assert together.outcome == "not_measured" and "n1" in together.reason


def test_judge_figure_on_both_sides():
    ceiling = Ceiling(1000.0, "SKU peak")
    floor = Bound(600.0, "expect.gpu_load.min_bf16_tflops")
    assert judge_figure("bf16", 700.0, "TFLOPS", [floor], ceiling).outcome == "pass"
    assert judge_figure("bf16", 500.0, "TFLOPS", [floor], ceiling).outcome == "fail"
    for bad in (1e300, float("inf"), float("nan"), -1.0, None):
        figure = judge_figure("bf16", bad, "TFLOPS", [floor], ceiling)
        assert figure.outcome == "not_measured", bad
        assert figure.measurement.outcome == "not_measured"
    alone = judge_figure("bf16", 50.0, "TFLOPS", [None], ceiling, floor_key="expect.x")
    assert alone.outcome == "not_measured" and "expect.x" in alone.reason


def test_an_absurd_peer_is_no_reference():
    """Seven healthy GPUs beside one at 1e300 keep their median; the absurd one is no peer."""
    values = [780.0] * 7 + [1e300]
    bound, _ = peer_bound(values, Ceiling(2500.0, "x"), 0.1, 8)
    assert bound is None  # 7 plausible figures: too few for a per-GPU peer bound
    bound, _ = peer_bound(values, Ceiling(2500.0, "x"), 0.1, 7)
    assert bound is not None and abs(bound.value - 702.0) < 1e-9
    assert peer_bound([1.0, 2.0, 3.0], None, 0.1, 4) == (
        None,
        "3 peer figure(s), 4 needed for a peer bound",
    )


def test_a_run_not_measured_is_quoted_and_a_missing_device_is_no_failure():
    from pytest_hpcnet.requirements.erdma import judge_eri_bw
    from pytest_hpcnet.requirements.erdma_judges import judge_instance_bandwidth

    @dataclass
    class Unread(Run):
        not_measured: str | None = "2 runs in one output (one asked)"

    expect = Expectations(ib_write_bw={"min_gbps": 64})
    verdict = judge_ib_write_bw(Unread(None), expect)
    assert verdict.outcome == "not_measured" and "2 runs in one output" in verdict.reason
    both = judge_instance_bandwidth(
        "n1", {"erdma_0": 78.0, "erdma_1": None}, ["erdma_0", "erdma_1"], 160, 0.8
    )
    assert both.outcome == "not_measured" and "erdma_1" in both.reason
    per_eri = Expectations(erdma={"per_eri_gbps": 80})
    assert judge_eri_bw("n1", "erdma_1", None, None, per_eri).outcome == "not_measured"


def test_nccl_busbw_above_its_ceiling_is_not_measured():
    from dataclasses import replace as changed

    from pytest_hpcnet.probes.nccl import parse_nccl
    from pytest_hpcnet.requirements.judges import judge_nccl_avg_busbw, judge_nccl_largest_busbw
    from tests.unit.test_gpu_nccl_node import H100

    run = parse_nccl(H100)
    expect = Expectations(nccl={"min_avg_busbw_gbs": 1, "min_busbw_largest_gbs": 1})
    assert run.ok and judge_nccl_largest_busbw(run, expect).outcome == "pass"
    absurd = changed(run, busbw_at_max_size_gbs=1e300, avg_busbw_gbs=1e300)
    for judge in (judge_nccl_avg_busbw, judge_nccl_largest_busbw):
        verdict = judge(absurd, expect)
        assert verdict.outcome == "not_measured" and "implausible" in verdict.reason
