"""NVSwitch fabric state and Fabric Manager: the parser on published and recorded `nvidia-smi
-q` outputs (tests/fixtures/gpu_load/, provenance there), the judge, and the lab's emulation
with its faults `fabric-fail` and `fabricmanager-down`."""

from __future__ import annotations

from pathlib import Path

from pytest_hpcnet.probes.gpu import parse_query_gpu, query_gpu_command
from pytest_hpcnet.probes.gpu_fabric import FABRIC_COMMAND, parse_fabric
from pytest_hpcnet.requirements.gpu_fabric import judge_gpu_fabric
from tests.unit.test_lab_gpu_load_tools import lab_node

FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu_load"
H800 = (
    FIXTURES / "nvidia-smi-q-i0-h800-drv525-fabric-state-completed-success-llm-action.txt"
).read_text()
H200_NA = (FIXTURES / "nvidia-smi-q-h200-vm-recorded-fabric-na.txt").read_text()
STUCK = (
    FIXTURES / "derived-nvidia-smi-q-h200-fabric-in-progress-gpu-operator-2511.txt"
).read_text()


def test_the_published_states():
    done = parse_fabric(H800 + "fabricmanager active\n")
    assert [(g.bus_id, g.state, g.status) for g in done.gpus] == [
        ("00000000:18:00.0", "Completed", "Success")
    ]
    assert done.manager == "active" and not done.problems and done.error is None
    na = parse_fabric(H200_NA + "fabricmanager active\n")
    assert [(g.state, g.status, g.reported) for g in na.gpus] == [("N/A", "N/A", False)]
    stuck = parse_fabric(STUCK + "fabricmanager active\n")
    assert [(g.state, g.status) for g in stuck.gpus] == [("In Progress", "N/A")]


def test_the_judge():
    assert (
        judge_gpu_fabric("n1", parse_fabric(H800 + "fabricmanager active\n"), None).outcome
        == "pass"
    )
    stuck = judge_gpu_fabric("n1", parse_fabric(STUCK + "fabricmanager active\n"), None)
    assert stuck.outcome == "fail"
    assert "n1 GPU 00000000:00:06.0 (00000000:00:06.0): fabric state In Progress" in stuck.reason
    down = judge_gpu_fabric("n1", parse_fabric(H800 + "fabricmanager inactive\n"), None)
    assert down.outcome == "fail" and "nvidia-fabricmanager is inactive" in down.reason
    na = judge_gpu_fabric("n1", parse_fabric(H200_NA + "fabricmanager active\n"), None)
    assert na.outcome == "pass" and "reports no fabric state (N/A)" in na.reason


def test_cut_missing_or_broken_output_is_never_a_pass():
    whole = H800 + "fabricmanager active\n"
    lines = whole.splitlines()
    for cut in range(len(lines)):
        verdict = judge_gpu_fabric("n1", parse_fabric("\n".join(lines[:cut])), None)
        assert verdict.outcome != "pass", cut
    gone = parse_fabric("sh: 1: nvidia-smi: not found\nfabricmanager active\n")
    assert gone.error and judge_gpu_fabric("n1", gone, None).outcome == "not_measured"
    no_systemd = parse_fabric(H800 + "fabricmanager sh: 1: systemctl: not found\n")
    assert no_systemd.error is None
    assert judge_gpu_fabric("n1", no_systemd, None).outcome == "fail"


def test_the_lab_board_and_its_faults(tmp_path_factory):
    healthy = lab_node(tmp_path_factory.mktemp("ok"), {})
    query = parse_query_gpu(healthy(query_gpu_command()))
    verdict = judge_gpu_fabric("node01", parse_fabric(healthy(FABRIC_COMMAND)), query)
    assert verdict.outcome == "pass", verdict.reason
    assert "8 GPUs registered with the NVSwitch fabric" in verdict.reason
    faulted = lab_node(
        tmp_path_factory.mktemp("bad"), {"fabric-fail": "3", "fabricmanager-down": "failed"}
    )
    verdict = judge_gpu_fabric("node01", parse_fabric(faulted(FABRIC_COMMAND)), query)
    assert verdict.outcome == "fail"
    assert verdict.reason.split("; ") == [
        "node01 GPU 3 (00000000:5D:00.0): fabric state In Progress (status N/A), not Completed",
        "node01: nvidia-fabricmanager is failed, not active",
    ]


def test_the_lab_systemctl_answers_only_for_the_fabric_manager(tmp_path):
    """A lab node is a namespace of the host: the emulated systemctl never hands a call to
    the host's systemd."""
    run = lab_node(tmp_path, {})
    assert run("systemctl is-active nvidia-fabricmanager; echo rc=$?") == "active\nrc=0\n"
    refused = run("systemctl restart ssh; echo rc=$?")
    assert refused == ("System has not been booted with systemd as init system (PID 1).\nrc=1\n")
