"""The torch GPU-to-GPU fallback: its program's lines read into nvbandwidth's result shape
(tests/fixtures/gpu_load/p2p-torch-*, provenance there), and judged like it."""

from __future__ import annotations

from pathlib import Path

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu_p2p_torch import TORCH_COPY, p2p_command, parse_torch_p2p
from pytest_hpcnet.probes.gpu_topo import parse_topo
from pytest_hpcnet.requirements.gpu_p2p import NodeP2p, judge_gpu_p2p
from tests.unit.test_gpu_p2p import QUERY, TOPO

FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu_load"
LAB = (FIXTURES / "p2p-torch-8gpu-lab-slow-pair-1-6.txt").read_text()
ODD = (FIXTURES / "derived-p2p-torch-8gpu-no-peer-0-2-error-3-4.txt").read_text()


def test_the_program_ships_with_its_command():
    command = p2p_command(mib=32, iters=3)
    assert "hpcnet-gpu-p2p 1" in command and "--mib 32 --iters 3" in command
    assert command.count("HPCNET_GPU_P2P_EOF") == 2


def test_the_lab_run():
    run = parse_torch_p2p(LAB)
    assert run.version == "torch 2.5.1+hpcnet.lab.emulation" and not run.problems
    matrix = run.matrix(TORCH_COPY)
    assert (matrix.rows, matrix.columns, matrix.value(0, 1), matrix.value(1, 6)) == (
        8,
        8,
        398.25,
        179.35,
    )
    assert matrix.value(3, 3) is None and not matrix.no_peer


def test_no_peer_access_and_a_pair_error():
    run = parse_torch_p2p(ODD)
    matrix = run.matrix(TORCH_COPY)
    assert matrix.no_peer == ((0, 2),) and not run.problems
    assert matrix.failed == (
        (3, 4, "RuntimeError:_CUDA_error:_an_illegal_memory_access_was_encountered"),
    )
    node = NodeP2p("n1", run, parse_topo(TOPO), QUERY)
    failed = judge_gpu_p2p(node, {"n1": node}, Expectations())
    assert failed.outcome == "fail"  # a copy that failed between two GPUs names them
    assert (
        "n1 GPU 3 (00000000:5D:00.0) -> GPU 4 (00000000:9A:00.0) over NVLink (NV18): the copy "
        "failed: RuntimeError: CUDA error: an illegal memory access was encountered"
    ) in failed.reason
    no_error = ODD.replace(
        "pair 3 4 error=RuntimeError:_CUDA_error:_an_illegal_memory_access_was_encountered",
        "pair 3 4 gbs=395.00",
    )
    node = NodeP2p("n1", parse_torch_p2p(no_error), parse_topo(TOPO), QUERY)
    verdict = judge_gpu_p2p(node, {"n1": node}, Expectations())
    assert verdict.outcome == "fail"
    assert (
        "n1 GPU 0 (00000000:18:00.0) -> GPU 2 (00000000:3A:00.0) over NVLink (NV18): no peer access"
        in verdict.reason
    )


def test_a_cut_run_is_never_a_pass():
    lines = LAB.splitlines()
    for cut in range(len(lines)):
        run = parse_torch_p2p("\n".join(lines[:cut]))
        node = NodeP2p("n1", run, parse_topo(TOPO), QUERY)
        assert judge_gpu_p2p(node, {"n1": node}, Expectations()).outcome != "pass", cut
    assert parse_torch_p2p("sh: 1: python3: not found\n").error
    started = parse_torch_p2p(
        "hpcnet-gpu-p2p 1 error=ModuleNotFoundError:_No_module_named_'torch'\n"
    )
    assert "could not start torch" in started.error
