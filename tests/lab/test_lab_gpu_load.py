"""GPUs under load through the real suite (`pytest -m gpu_load --inventory lab`): the load
program runs on every lab node at once against the emulated torch and nvidia-smi. A healthy
lab passes every check on every node; with one GPU-under-load fault per node, exactly the
faulted node's check fails, naming the GPU (index, bus id, serial), and nothing else.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_hpcnet.lab import faults
from tests.gpu_load_checks import GPU_LOAD_CHECKS
from tests.lab.test_static_suite import failing, run_static

pytestmark = pytest.mark.lab

CHECKS = GPU_LOAD_CHECKS
INJECTED = {  # (kind, node, GPU)
    ("gpu-hbm-slow", "node01", "1"),
    ("gpu-slow", "node02", "5"),
    ("gpu-host-slow", "node02", "0"),
    ("gpu-hot", "node03", "6"),
    ("gpu-checksum", "node04", "3"),
    ("nvlink-down", "node01", "2"),
    ("nvlink-errors", "node04", "7"),
    ("dcgm-fail", "node03", "4"),
    ("nccl-node-slow", "node04", "4"),
    ("p2p-slow", "node03", "2-5"),
    ("fabric-fail", "node02", "6"),
}
EXPECTED = {  # (check, node): the GPUs its failure names
    ("gpu_bandwidth", "node01"): {"GPU 1 (00000000:2A:00.0, serial 1654124006921)"},
    ("gpu_compute", "node02"): {"GPU 5 (00000000:AB:00.0, serial 1654124006925)"},
    ("gpu_bandwidth", "node02"): {"GPU 0 (00000000:18:00.0, serial 1654124006920)"},
    ("gpu_compute", "node03"): {"GPU 6 (00000000:BA:00.0, serial 1654124006926)"},
    ("gpu_correctness", "node04"): {"GPU 3 (00000000:5D:00.0, serial 1654124006923)"},
    ("gpu_nvlink", "node01"): {"GPU 2 (00000000:3A:00.0, serial 1654124006922)"},
    ("gpu_nvlink", "node04"): {"GPU 7 (00000000:DB:00.0, serial 1654124006927)"},
    ("gpu_dcgm", "node03"): {"GPU 4 (00000000:9A:00.0, serial 1654124006924)"},
    ("gpu_nccl_node", "node04"): set(),  # the node as a whole, no GPU named
    ("gpu_p2p", "node03"): {"GPU 2 (00000000:3A:00.0)", "GPU 5 (00000000:AB:00.0)"},
    ("gpu_fabric", "node02"): {"GPU 6 (00000000:BA:00.0)"},
}


def run_load(lab4, tmp_path, printed: list[str] | None = None):
    return run_static(lab4.inventory, tmp_path, marker="gpu_load", output=printed)


def test_healthy_lab_passes_every_gpu_load_check(lab4, tmp_path):
    printed: list[str] = []
    code, records = run_load(lab4, tmp_path, printed)
    assert not failing(records), [r["message"] for r in failing(records)]
    assert code == 0
    assert {(r["check_id"], r["verdict"]) for r in records} == {(c, "pass") for c in CHECKS}
    assert len(records) == 32
    compute = next(r for r in records if r["check_id"] == "gpu_compute")
    subjects = {m["subject"] for m in compute["measured"] if m["name"] == "bf16_tflops"}
    assert subjects == {f"GPU {i}" for i in range(8)}
    assert compute["tool_versions"]["gpu_load_engine"].startswith("torch 2.5.1+hpcnet.lab")
    assert "gpu_samples" in compute["sections"]
    dcgm = next(r for r in records if r["check_id"] == "gpu_dcgm")
    assert dcgm["tool_versions"]["dcgm"] == "4.2.3"
    p2p = next(r for r in records if r["check_id"] == "gpu_p2p")
    assert p2p["tool_versions"]["nvbandwidth"] == "v0.10.0"
    assert len([m for m in p2p["measured"] if m["name"] == "p2p_nvlink_gbs"]) == 56
    assert {m["value"] for m in dcgm["measured"] if m["name"] == "dcgm"} == {"pass"}
    phase = [ln for ln in printed[0].splitlines() if ln.startswith("hpcnet: GPU load on 4 nodes")]
    assert phase and "32 GPUs, 10 s" in phase[0], printed[0][-2000:]


def test_each_load_fault_fails_exactly_its_node_and_gpu(lab4, tmp_path):
    state = Path(lab4.state_dir)
    for kind, node, index in sorted(INJECTED):  # index: the GPU, or nccl-node-slow's factor
        faults.inject(kind, node, index, state)
    try:
        code, records = run_load(lab4, tmp_path)
    finally:
        for node in sorted({n for _, n, _ in INJECTED}):
            faults.heal(node, state)
    assert code == 1
    bad = {(r["check_id"], r["subject"]): r["message"] for r in failing(records)}
    assert set(bad) == set(EXPECTED), bad
    for (check, node), gpus in EXPECTED.items():
        named = set(re.findall(rf"{node} (GPU \d+ \([^)]*\))", bad[(check, node)]))
        assert named == gpus, bad[(check, node)]
    assert "hw_thermal_slowdown under load" in bad[("gpu_compute", "node03")]
    assert "NVLink link 4, 5 inactive" in bad[("gpu_nvlink", "node01")]
    assert "NVLink link 2 counted errors" in bad[("gpu_nvlink", "node04")]
    assert "DCGM memory failed" in bad[("gpu_dcgm", "node03")]
    assert "single-node all-reduce busbw" in bad[("gpu_nccl_node", "node04")]
    passed = [r for r in records if r["verdict"] == "pass"]
    assert "over NVLink (NV18)" in bad[("gpu_p2p", "node03")]
    assert "fabric state In Progress" in bad[("gpu_fabric", "node02")]
    assert len(passed) == 32 - len(EXPECTED)
