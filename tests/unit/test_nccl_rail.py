"""Each ERI's rail: the GPUs nearest it from `nvidia-smi topo -m`, and one rail judged alone,
a slow one named with its suspect node (`node07 erdma_1`), not averaged away."""

from __future__ import annotations

from pathlib import Path

from pytest_hpcnet.campaigns.nccl.paths import PinnedRun, nearest_gpus
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.nccl import NcclExpected, parse_nccl
from pytest_hpcnet.requirements.nccl_rail import (
    judge_nccl_rails,
    judge_rails_present,
    rail_passes,
)
from pytest_hpcnet.transport.results import CommandResult

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TOPO = (FIXTURES / "gpu" / "topo-8gpu-2nic-erdma.txt").read_text()
ALLREDUCE = (FIXTURES / "nccl" / "allreduce-2node-tag-output-warn.txt").read_text()
FAST = (FIXTURES / "nccl" / "real-gcp-a3mega-inplace-wrong-na.txt").read_text()
LAUNCHED = NcclExpected(max_bytes=2**30, ranks=4, nodes=2, validation=True)


def _rail(device: str, text: str = ALLREDUCE, launched: NcclExpected = LAUNCHED) -> PinnedRun:
    launch = CommandResult("node01", "mpirun ...", 0, text, "", 1.0, 0.0)
    return PinnedRun(device, parse_nccl(text, launched), launch, launched, (4, 5, 6, 7))


def test_the_gpus_nearest_each_eri():
    assert nearest_gpus(TOPO, "erdma_0") == (0, 1, 2, 3)
    assert nearest_gpus(TOPO, "erdma_1") == (4, 5, 6, 7)
    assert nearest_gpus("", "erdma_0") is None
    assert nearest_gpus("NVIDIA-SMI has failed", "erdma_0") is None


def test_one_eri_has_no_rail_of_its_own():
    assert judge_rails_present(["erdma_0"]).outcome == "not_applicable"
    assert judge_rails_present(["erdma_0", "erdma_1"]).ok


def test_a_slow_rail_is_named_with_its_node_and_the_other_passes():
    expect = Expectations()
    runs = {"erdma_0": _rail("erdma_0"), "erdma_1": _rail("erdma_1")}
    unset = judge_nccl_rails(runs, expect, lambda d: ())
    assert unset.outcome == "not_measured" and "expect.nccl.rail" in unset.reason
    by = {(m.subject, m.name): m.value for m in unset.measurements}
    assert by[("erdma_1", "rail_busbw_largest")] == 25.77
    runs["erdma_0"] = _rail("erdma_0", FAST, NcclExpected(max_bytes=8 * 2**30, ranks=16))
    asked = []
    expect.nccl.rail = expect.nccl.rail.model_copy(update={"min_busbw_largest_gbs": 100.0})

    def suspects(device):
        asked.append(device)
        return ("node07",)

    verdict = judge_nccl_rails(runs, expect, suspects)
    assert verdict.outcome == "fail", verdict.reason
    assert verdict.reason.startswith("node07 erdma_1: rail erdma_1 bus bandwidth, largest size")
    assert "erdma_0" not in verdict.reason and asked == ["erdma_1"]
    assert not rail_passes(runs["erdma_1"], expect) and rail_passes(runs["erdma_0"], expect)


def test_a_rail_not_run_is_not_measured():
    verdict = judge_nccl_rails(
        {"erdma_1": PinnedRun("erdma_1", problem="no GPU near erdma_1 on node03")},
        Expectations(),
        lambda d: (),
    )
    assert verdict.outcome == "not_measured" and "node03" in verdict.reason
    assert judge_nccl_rails({}, Expectations(), lambda d: ()).outcome == "not_measured"
