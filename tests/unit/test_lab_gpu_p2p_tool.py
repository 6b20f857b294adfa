"""The lab's emulated nvbandwidth run here (no root, no namespaces), read by the real parser
and judged against the emulated `topo -m`: a healthy node passes, fault `p2p-slow` fails its
one pair, naming both GPUs."""

from __future__ import annotations

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import parse_query_gpu, query_gpu_command
from pytest_hpcnet.probes.gpu_load import ENGINES_COMMAND, parse_engines
from pytest_hpcnet.probes.gpu_p2p import nvbandwidth_command, parse_nvbandwidth
from pytest_hpcnet.probes.gpu_topo import TOPO_COMMAND, parse_topo
from pytest_hpcnet.requirements.gpu_p2p import NodeP2p, judge_gpu_p2p
from tests.unit.test_lab_gpu_load_tools import lab_node

LAB = Expectations(gpu_load={"min_p2p_nvlink_gbs": 335})


def measured(run, name: str = "node01") -> NodeP2p:
    return NodeP2p(
        name,
        parse_nvbandwidth(run(nvbandwidth_command())),
        parse_topo(run(TOPO_COMMAND)),
        parse_query_gpu(run(query_gpu_command())),
    )


def test_healthy_lab_node_passes_and_finds_the_engine(tmp_path):
    run = lab_node(tmp_path, {})
    assert parse_engines(run(ENGINES_COMMAND)).found["nvbandwidth"].endswith("/nvbandwidth")
    node = measured(run)
    assert node.run.version == "v0.10.0" and node.run.matrix("device_to_device_memcpy_read_ce")
    verdict = judge_gpu_p2p(node, {"node01": node}, LAB)
    assert verdict.outcome == "pass", verdict.reason
    assert "56 GPU pairs (56 over NVLink)" in verdict.reason


def test_one_slow_nvlink_pair(tmp_path_factory):
    healthy = measured(lab_node(tmp_path_factory.mktemp("a"), {}), "node01")
    slow = measured(lab_node(tmp_path_factory.mktemp("b"), {"p2p-slow": "2-5"}), "node02")
    peers = {"node01": healthy, "node02": slow}
    verdict = judge_gpu_p2p(slow, peers, LAB)
    assert verdict.outcome == "fail"
    failed = [part.split(" over ")[0] for part in verdict.reason.split("; ")]
    assert failed == [
        "node02 GPU 2 (00000000:3A:00.0) -> GPU 5 (00000000:AB:00.0)",
        "node02 GPU 5 (00000000:AB:00.0) -> GPU 2 (00000000:3A:00.0)",
    ]
    assert judge_gpu_p2p(healthy, peers, LAB).outcome == "pass"


def torch_measured(run, name: str) -> NodeP2p:
    from pytest_hpcnet.probes.gpu_p2p_torch import p2p_command, parse_torch_p2p

    return NodeP2p(
        name,
        parse_torch_p2p(run(p2p_command(mib=64, iters=2))),
        parse_topo(run(TOPO_COMMAND)),
        parse_query_gpu(run(query_gpu_command())),
    )


def test_the_torch_fallback_copies_every_pair_and_finds_the_slow_one(tmp_path_factory):
    healthy = torch_measured(lab_node(tmp_path_factory.mktemp("a"), {}), "node01")
    assert healthy.run.version.startswith("torch 2.5.1+hpcnet.lab")
    slow = torch_measured(lab_node(tmp_path_factory.mktemp("b"), {"p2p-slow": "1-6"}), "node02")
    peers = {"node01": healthy, "node02": slow}
    passed = judge_gpu_p2p(healthy, peers, LAB)
    assert passed.outcome == "pass", passed.reason
    assert "a torch copy is judged against its peers only" in passed.reason
    assert not any("SKU" in m.source for m in passed.measurements)  # no nvbandwidth floor
    verdict = judge_gpu_p2p(slow, peers, LAB)
    assert verdict.outcome == "fail"
    failed = [part.split(" over ")[0] for part in verdict.reason.split("; ")]
    assert failed == [
        "node02 GPU 1 (00000000:2A:00.0) -> GPU 6 (00000000:BA:00.0)",
        "node02 GPU 6 (00000000:BA:00.0) -> GPU 1 (00000000:2A:00.0)",
    ]
