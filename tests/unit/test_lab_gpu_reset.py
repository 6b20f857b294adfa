"""The lab's emulated `nvidia-smi -r` and `--query-compute-apps`, run here (no root, no
namespaces): the recorded formats, a reset clears its GPU's ECC fault, and a GPU a process
holds is refused and keeps its fault."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from pytest_hpcnet.lab import faults
from pytest_hpcnet.lab.state import LabState
from pytest_hpcnet.probes.gpu import parse_query_gpu, query_gpu_command
from pytest_hpcnet.requirements.gpu import judge_ecc
from tests.unit.test_lab_gpu_tools import node

FIXTURES = Path(__file__).parents[1] / "fixtures" / "repair"
APPS = "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"
__all__ = ["node"]


def hold(state_dir: Path, slot: int, pid: int, name: str) -> None:
    """A process holding GPU `slot`, as its busy file names it."""
    folder = state_dir / "nodes" / "node01" / "gpu_busy"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / str(slot)).write_text(f"{time.time() + 60:.3f} {pid} {name}\n")


def shape(text: str) -> list[str]:
    """Each line with its bus id and numbers replaced: the format, not the values."""
    import re

    text = re.sub(r"00000000:[0-9A-F]{2}:00\.0", "BUS", text)
    return [re.sub(r"\b\d+\b", "N", line) for line in text.splitlines()]


def test_compute_apps_in_the_recorded_format(node):
    recorded = (FIXTURES / "compute-apps.csv").read_text().splitlines()
    assert node(APPS).splitlines() == recorded[:1]
    assert node(APPS.replace("csv", "csv,noheader")) == ""
    hold(node.state_dir, 2, os.getpid(), "python3")
    lines = node(APPS).splitlines()
    assert lines[0] == recorded[0] and shape(lines[1]) == ["N, python3, N MiB"]
    assert lines[1].startswith(f"{os.getpid()}, ")
    by_bus = node("nvidia-smi --query-compute-apps=gpu_bus_id,pid --format=csv,noheader")
    assert by_bus == f"00000000:3A:00.0, {os.getpid()}\n"
    assert node("nvidia-smi -i 1 --query-compute-apps=pid --format=csv,noheader") == ""
    assert node("nvidia-smi --query-compute-apps=no.such --format=csv") == (
        'Field "no.such" is not a valid field to query.\n\n'
    )


def test_a_gone_process_holds_nothing(node):
    gone = subprocess.Popen(["true"])
    gone.wait()
    hold(node.state_dir, 2, gone.pid, "python3")
    assert node(APPS.replace("csv", "csv,noheader")) == ""


def test_reset_clears_the_ecc_fault_of_its_gpu_only(node):
    faults.inject("gpu-ecc", "node01", "2", node.state_dir)
    faults.inject("gpu-throttle", "node01", "2", node.state_dir)
    assert not judge_ecc("node01", parse_query_gpu(node(query_gpu_command())))
    assert node("nvidia-smi -r -i 0") == "GPU 00000000:18:00.0 was successfully reset.\n"
    assert not judge_ecc("node01", parse_query_gpu(node(query_gpu_command())))
    out = node("nvidia-smi -r; echo rc=$?")
    recorded = shape((FIXTURES / "nvidia-smi-r-reset.txt").read_text())
    assert shape(out)[:-1] == recorded * 8 and out.endswith("rc=0\n")
    assert judge_ecc("node01", parse_query_gpu(node(query_gpu_command())))
    left = LabState.load(node.state_dir).nodes[0]
    assert list(left.faults) == ["gpu-throttle"] and "gpu-ecc" not in left.undo


def test_reset_is_refused_while_a_process_holds_the_gpu(node):
    faults.inject("gpu-ecc", "node01", "2", node.state_dir)
    hold(node.state_dir, 2, os.getpid(), "python3")
    out = node("nvidia-smi --gpu-reset -i 2; echo rc=$?")
    recorded = (FIXTURES / "nvidia-smi-r-in-use.txt").read_text()
    assert out == recorded.replace("1A", "3A") + "rc=255\n"
    assert "gpu-ecc" in LabState.load(node.state_dir).nodes[0].faults
    assert node("nvidia-smi -r -i 3; echo rc=$?").endswith("reset.\nrc=0\n")
    assert "gpu-ecc" in LabState.load(node.state_dir).nodes[0].faults


def test_live_repairer_reads_the_recorded_outputs():
    """`LiveRepairer` on the recorded texts: the compute apps it lists, the GPUs a refused
    reset names."""
    from pytest_hpcnet.gate.repair import RepairError
    from pytest_hpcnet.gate.repair_live import BUSY_QUERY, RESET, LiveRepairer
    from pytest_hpcnet.inventory.gate_settings import RepairSettings
    from pytest_hpcnet.transport.results import CommandResult

    apps = (FIXTURES / "compute-apps.csv").read_text().split("\n", 1)[1]  # noheader
    refused = (FIXTURES / "nvidia-smi-r-in-use.txt").read_text()
    outputs = {BUSY_QUERY: (0, apps), RESET: (255, refused)}

    def run(node, command, timeout_s):
        status, out = outputs[command]
        return CommandResult(node, command, status, out, "", 0.1, 0.0)

    live = LiveRepairer(Path("inv.yaml"), None, Path("run"), RepairSettings(), run=run)
    assert live.gpu_busy("node01") == ["3858903, VLLM::EngineCore, 6265 MiB",
                                       "3880364, VLLM::EngineCore, 5530 MiB"]  # fmt: skip
    with pytest.raises(RepairError) as refusal:
        live.reset("node01")
    assert str(refusal.value) == "`nvidia-smi -r`: GPU 00000000:1A:00.0: In use by another client"
