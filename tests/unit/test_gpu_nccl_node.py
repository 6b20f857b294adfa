"""Single-node NCCL: published runs parsed as launched, the lab's -g N emulation, the judge."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu_nccl_node import node_nccl_command, parse_node_nccl
from pytest_hpcnet.requirements.gpu_nccl_node import INSTALL_NCCL_TESTS, judge_gpu_nccl_node
from tests.unit.test_lab_gpu_load_tools import lab_node

FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu_load"
H100 = (FIXTURES / "nccl-tests-h100-sxm-x8-g8-128M-4G-nvls-issue290.txt").read_text()
A100 = (FIXTURES / "nccl-tests-a100-sxm4-40gb-x8-g8-10G-single-size-oci.txt").read_text()


def ran(found: dict) -> dict:
    """Every node's run as the phase gives it: (result, why it did not run)."""
    return {name: (result, "") for name, result in found.items()}


def test_published_single_node_runs():
    h100 = parse_node_nccl(H100, 8, "4G")
    assert h100.ok and h100.busbw_at_max_size_gbs == 473.6 and h100.hosts == ("node005",)
    a100 = parse_node_nccl(A100, 8, "10G")
    assert a100.ok and a100.busbw_at_max_size_gbs == 232.83
    assert not parse_node_nccl(H100, 4, "4G").ok  # 8 ranks where 4 were launched
    assert not parse_node_nccl(H100, 8, "8G").ok  # stops before the asked size


def test_judged_against_the_nodes_and_the_floor():
    fast, slow = parse_node_nccl(H100, 8, "4G"), parse_node_nccl(A100, 8, "10G")
    peers = ran({"a": fast, "b": fast, "c": slow, "d": fast})
    expect = Expectations()
    assert judge_gpu_nccl_node("a", fast, peers, expect).outcome == "pass"
    verdict = judge_gpu_nccl_node("c", slow, peers, expect)
    assert verdict.outcome == "fail"
    assert (
        "busbw 232.83 GB/s at 10737418240 B below 0.90 x the nodes' median 473.6" in verdict.reason
    )
    floor = Expectations(gpu_load={"min_node_busbw_gbs": 480})
    assert "min_node_busbw_gbs" in judge_gpu_nccl_node("a", fast, peers, floor).reason
    missing = judge_gpu_nccl_node("a", None, peers, expect, "no all_reduce_perf on the node's PATH")
    assert missing.outcome == "not_measured" and missing.fix == INSTALL_NCCL_TESTS
    died = parse_node_nccl("node01: Test NCCL failure common.cu:1 'unhandled cuda error'", 8, "4G")
    assert judge_gpu_nccl_node("a", died, peers, expect).outcome == "fail"
    assert judge_gpu_nccl_node("a", parse_node_nccl("", 8, "4G"), peers, expect).outcome == (
        "not_measured"
    )


def test_too_few_peers_and_no_floor_is_measured_not_judged():
    """Three nodes are too few to stand in for a floor: without one, 2 of 3 nodes at 30 %
    are not judged (not measured); with the profile's floor they fail."""
    fast, slow = parse_node_nccl(H100, 8, "4G"), parse_node_nccl(A100, 8, "10G")
    peers = ran({"a": fast, "b": slow, "c": slow})
    verdict = judge_gpu_nccl_node("b", slow, peers, Expectations())
    assert verdict.outcome == "not_measured" and "3 peer figure(s), 4 needed" in verdict.reason
    assert "expect.gpu_load.min_node_busbw_gbs" in verdict.reason
    floor = Expectations(gpu_load={"min_node_busbw_gbs": 400})
    assert judge_gpu_nccl_node("b", slow, peers, floor).outcome == "fail"
    assert judge_gpu_nccl_node("a", fast, peers, floor).outcome == "pass"


def test_an_absurd_figure_is_not_measured_and_blames_no_peer():
    fast = parse_node_nccl(H100, 8, "4G")
    absurd = replace(fast, busbw_at_max_size_gbs=1e300)
    peers = ran({"a": fast, "b": fast, "c": fast, "e": fast, "d": absurd})
    verdict = judge_gpu_nccl_node("d", absurd, peers, Expectations())
    assert verdict.outcome == "not_measured" and "implausible" in verdict.reason
    assert judge_gpu_nccl_node("a", fast, peers, Expectations()).outcome == "pass"


def test_lab_emulation_and_its_fault(tmp_path):
    (tmp_path / "ok").mkdir()
    (tmp_path / "slow").mkdir()
    command = node_nccl_command(8, "128M", "1G", 2, 2, 1)
    healthy = parse_node_nccl(lab_node(tmp_path / "ok", {})(command), 8, "1G")
    assert healthy.ok and healthy.hosts == ("node01",) and len(healthy.ranks) == 8
    assert 460 < healthy.busbw_at_max_size_gbs < 470
    slow = parse_node_nccl(lab_node(tmp_path / "slow", {"nccl-node-slow": "4"})(command), 8, "1G")
    peers = ran({"node01": healthy, "node02": healthy, "node03": slow, "node04": healthy})
    verdict = judge_gpu_nccl_node("node03", slow, peers, Expectations())
    assert verdict.outcome == "fail" and "below 0.90 x the nodes' median" in verdict.reason


def test_the_nccl_version_nccl_tests_prints():
    from pytest_hpcnet.probes.gpu_nccl_node import nccl_code_version

    assert nccl_code_version(21903) == "2.19.3"
    assert nccl_code_version(23007) == "2.30.7"
    assert nccl_code_version(None) is None and nccl_code_version(2708) is None


def test_a_node_running_another_nccl_tests_version_fails():
    """nccl-tests' version is only named by its run: the node whose version differs from
    the other nodes' fails naming both; an even split has no majority and fails both."""
    fast = parse_node_nccl(H100, 8, "4G")
    old = replace(fast, tests_version="2.18.0")
    new = replace(fast, tests_version="2.19.6")
    peers = ran({"a": new, "b": new, "c": old, "d": new})
    verdict = judge_gpu_nccl_node("c", old, peers, Expectations())
    assert verdict.outcome == "fail" and verdict.code == "HPCNET-NCCL-TESTS-VERSION"
    assert "nccl-tests 2.18.0, 3 of 4 nodes run 2.19.6" in verdict.reason
    assert judge_gpu_nccl_node("a", new, peers, Expectations()).outcome == "pass"
    split = ran({"a": new, "b": old})
    assert "no majority" in judge_gpu_nccl_node("a", new, split, Expectations()).reason
    (measured,) = [
        m
        for m in judge_gpu_nccl_node("a", new, peers, Expectations()).measurements
        if m.name == "nccl_tests_version"
    ]
    assert (measured.value, measured.bound) == ("2.19.6", "2.19.6")
