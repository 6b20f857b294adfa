"""The load command run here against the lab's emulated torch and nvidia-smi (no root, no
namespaces): the real program, sampler and parsers; a healthy node passes every judge and
each GPU-under-load fault fails exactly its GPU."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.lab.emulation import PYLIB, install_tools
from pytest_hpcnet.lab.state import LabNode, LabState
from pytest_hpcnet.probes.gpu_load import ENGINES_COMMAND, load_command, parse_engines
from pytest_hpcnet.requirements import gpu_load as judges
from pytest_hpcnet.transport.fanout import CommandResult

FAULTS = {"gpu-slow": "5", "gpu-hot": "6", "gpu-checksum": "3", "gpu-hbm-slow": "1"}
SECONDS = 5


def lab_node(tmp_path, faults: dict[str, str]):
    """Run a command as on lab node01, with `faults` injected."""
    node = LabNode("node01", "198.18.0.11", 8500)
    node.faults.update(faults)
    state = LabState(str(tmp_path), "lab.yaml", nodes=[node])
    state.save()
    bin_dir = install_tools(state)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HPCNET_LAB_NODE": "node01",
        "HPCNET_LAB_STATE": str(tmp_path),
        "PYTHONPATH": str(bin_dir / PYLIB),
    }

    def run(command: str, timeout: float = 120) -> str:
        out = subprocess.run(
            ["sh", "-c", command], capture_output=True, text=True, env=env, timeout=timeout
        )
        return out.stdout

    return run


def loaded(run) -> judges.NodeLoad:
    from pytest_hpcnet.campaigns.gpu_load import node_load

    out = run(load_command(8, SECONDS, size=16384, copy_mib=1024))
    return node_load("node01", CommandResult("node01", "load", 0, out, "", 1.0, 0.0))


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    run = lab_node(tmp_path_factory.mktemp("healthy"), {})
    return run, loaded(run)


@pytest.fixture(scope="module")
def faulted(tmp_path_factory):
    return loaded(lab_node(tmp_path_factory.mktemp("faulted"), FAULTS))


def test_engines_found_as_a_pip_torch(healthy):
    run, _ = healthy
    engines = parse_engines(run(ENGINES_COMMAND))
    assert engines.found["torch"].endswith("hpcnet.lab.emulation")
    assert "cupy" in engines.missing and engines.has("dcgmi")  # the lab's emulated dcgmi


def test_healthy_node_passes_every_judge(healthy):
    _, load = healthy
    expect = Expectations()
    peers = {"node01": load}
    assert load.run.complete and len(load.run.gpus) == 8, load
    assert all(not g.error for g in load.run.gpus)
    compute = judges.judge_gpu_compute(load, peers, expect)
    assert compute.outcome == "pass", compute.reason
    assert "power cap reached under load on GPU 0, 1" in compute.reason
    assert "peer-relative only" in compute.reason
    bw = judges.judge_gpu_bandwidth(load, peers, expect)
    assert bw.outcome == "pass", bw.reason
    agree = judges.judge_gpu_correctness(load, peers)
    assert agree.outcome == "pass", agree.reason
    bf16 = [m for m in compute.measurements if m.name == "bf16_tflops"]
    assert len(bf16) == 8 and all(770 < m.value < 800 for m in bf16)
    assert {m.subject for m in bf16} == {f"GPU {i}" for i in range(8)}
    clocks = [m for m in compute.measurements if m.name == "sm_clock_mhz"]
    assert all(m.value == 1980 for m in clocks)


def failing_gpus(verdict) -> set[str]:
    """The GPUs a failure names, with bus id and serial."""
    return set(re.findall(r"node01 GPU \d+ \([^)]*\)", verdict.reason))


def test_each_fault_fails_exactly_its_gpu(faulted):
    expect = Expectations()
    peers = {"node01": faulted}
    compute = judges.judge_gpu_compute(faulted, peers, expect)
    assert compute.outcome == "fail"
    assert failing_gpus(compute) == {
        "node01 GPU 5 (00000000:AB:00.0, serial 1654124006925)",
        "node01 GPU 6 (00000000:BA:00.0, serial 1654124006926)",
    }
    assert "hw_slowdown, hw_thermal_slowdown under load" in compute.reason
    bw = judges.judge_gpu_bandwidth(faulted, peers, expect)
    assert bw.outcome == "fail"
    assert failing_gpus(bw) == {"node01 GPU 1 (00000000:2A:00.0, serial 1654124006921)"}
    agree = judges.judge_gpu_correctness(faulted, peers)
    assert agree.outcome == "fail"
    assert failing_gpus(agree) == {"node01 GPU 3 (00000000:5D:00.0, serial 1654124006923)"}


def test_hot_gpu_is_cool_at_rest(tmp_path):
    from pytest_hpcnet.probes.gpu import parse_query_gpu, query_gpu_command
    from pytest_hpcnet.requirements.gpu import judge_throttle

    run = lab_node(tmp_path, {"gpu-hot": "6"})
    assert judge_throttle("node01", parse_query_gpu(run(query_gpu_command())))


def test_each_gpu_runs_on_its_nearest_cpus(healthy):
    """The children run on topo -m's CPU affinity: the lab's NUMA-1 list names no CPU of a
    small host, which the line reports as not applied rather than failing the GPU."""
    import os as _os

    from pytest_hpcnet.campaigns.gpu_load import gpu_affinity
    from pytest_hpcnet.probes.gpu_topo import TOPO_COMMAND, parse_topo

    run, _ = healthy
    near = gpu_affinity(parse_topo(run(TOPO_COMMAND)))
    assert near[0] == "0-47,96-143" and near[7] == "48-95,144-191"
    out = run(load_command(8, 1, size=4096, copy_mib=16, affinity=near))
    load = {line.split()[0]: line for line in out.splitlines() if line.startswith("gpu=")}
    host = _os.cpu_count() or 1
    assert "cpus=0-47,96-143" in load["gpu=0"]
    expected = "cpus=48-95,144-191" if host > 48 else "cpus=not-applied"
    assert expected in load["gpu=7"]
