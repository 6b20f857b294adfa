"""The lab's host view without a lab: each node's /proc and sysfs files and the emulated
`lscpu` and `chronyc`, read by the real facts commands and judged with the lab profile; each
host fault fails its node's requirement only, and healing restores it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pytest_hpcnet.inventory.expectations import Expectations, load_profile
from pytest_hpcnet.lab import faults
from pytest_hpcnet.lab.emulation import GPU_BUS_IDS, install_tools, write_rdma_state
from pytest_hpcnet.lab.host_view import GPU_BUSES
from pytest_hpcnet.lab.state import LabNode, LabState
from pytest_hpcnet.lab.system import LabError
from pytest_hpcnet.probes.host_hardware import host_hardware_command, parse_host_hardware
from pytest_hpcnet.probes.host_settings import host_settings_command, parse_host_settings
from pytest_hpcnet.probes.pcie_aer import parse_pcie_devices, pcie_devices_command
from pytest_hpcnet.probes.timesync import TIMESYNC_COMMAND, parse_timesync
from pytest_hpcnet.probes.versions import parse_versions, versions_command
from pytest_hpcnet.requirements.gpu_node import judge_versions
from pytest_hpcnet.requirements.host_hardware import judge_host_hardware
from pytest_hpcnet.requirements.host_settings import judge_host_settings, judge_time_offset
from pytest_hpcnet.requirements.pcie_aer import judge_pcie_aer

EXPECT = Expectations(**load_profile("lab"))
NODES = ("node01", "node02")


@pytest.fixture
def lab_dir(tmp_path) -> Path:
    nodes = [LabNode(name, f"198.18.0.1{i}", 8500) for i, name in enumerate(NODES, 1)]
    state = LabState(state_dir=str(tmp_path), inventory="lab.yaml", nodes=nodes)
    install_tools(state)
    for node in state.nodes:
        write_rdma_state(state, node)
    state.save()
    return tmp_path


def _facts(lab_dir: Path, node: str, command: str) -> str:
    folder = lab_dir / "nodes" / node
    env = {
        **os.environ,
        "HPCNET_LAB_NODE": node,
        "HPCNET_LAB_STATE": str(lab_dir),
        "HPCNET_SYSFS": str(folder / "sys"),
        "HPCNET_PROC": str(folder / "proc"),
        "HPCNET_ETC": str(folder / "etc"),
        "PATH": f"{lab_dir / 'bin'}:{os.environ['PATH']}",
    }
    return subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, env=env, check=False, timeout=60
    ).stdout


def _outcomes(lab_dir: Path, node: str) -> dict[str, str]:
    """Each host requirement's outcome on the node (host_settings: its worse judge)."""
    hw = parse_host_hardware(_facts(lab_dir, node, host_hardware_command()))
    pci = parse_pcie_devices(_facts(lab_dir, node, pcie_devices_command()))
    settings = parse_host_settings(_facts(lab_dir, node, host_settings_command()))
    sync = parse_timesync(_facts(lab_dir, node, TIMESYNC_COMMAND))
    both = {
        judge_host_settings(node, settings, EXPECT).outcome,
        judge_time_offset(node, sync, EXPECT).outcome,
    }
    return {
        "host_hardware": judge_host_hardware(node, hw, EXPECT).outcome,
        "pcie_aer": judge_pcie_aer(node, pci, EXPECT).outcome,
        "host_settings": "fail" if "fail" in both else both.pop() if len(both) == 1 else "mixed",
    }


HEALTHY = {"host_hardware": "pass", "pcie_aer": "pass", "host_settings": "pass"}


def test_the_emulated_nodes_pass_the_lab_profile(lab_dir):
    for node in NODES:
        assert _outcomes(lab_dir, node) == HEALTHY
    pci = parse_pcie_devices(_facts(lab_dir, "node01", pcie_devices_command()))
    assert sorted(d.kind for d in pci.devices) == ["eri", *["gpu"] * 8]
    assert tuple(b.lower() for b in GPU_BUS_IDS) == GPU_BUSES


FAULTS = {
    "node01": ("memory", "1792", "host_hardware"),
    "node02": ("aer", "gpu3 fatal 1", "pcie_aer"),
    "node03": ("aer", "erdma_0 correctable 50", "pcie_aer"),
    "node04": ("clocksource", "hpet", "host_settings"),
    "node05": ("governor", "powersave", "host_settings"),
    "node06": ("clock-skew", "2", "host_settings"),
}


def test_each_host_fault_fails_its_node_only(lab_dir):
    state = LabState.load(lab_dir)
    for i in range(3, 8):
        state.nodes.append(LabNode(f"node0{i}", f"198.18.0.1{i}", 8500))
        write_rdma_state(state, state.nodes[-1])
    state.save()
    for node, (kind, arg, broken) in FAULTS.items():
        faults.inject(kind, node, arg, lab_dir)
        assert faults.KINDS[kind].breaks == (broken,)
    for node in (*FAULTS, "node07"):
        broken = {FAULTS[node][2]: "fail"} if node in FAULTS else {}
        assert _outcomes(lab_dir, node) == {**HEALTHY, **broken}, node
    faults.heal("all", lab_dir)
    assert _outcomes(lab_dir, "node02") == _outcomes(lab_dir, "node05") == HEALTHY


SOFTWARE = {
    "node01": ("kernel", "5.15.0-999-hpcnet-lab"),
    "node02": ("os", "ubuntu 99.04 lts"),
    "node03": ("nccl", "2.28.7-1+cuda12.9"),
    "node04": ("rdma-core", "99.0-1"),
}


def test_each_software_fault_makes_its_node_the_odd_one(lab_dir):
    """`software NODE ITEM VERSION` on four of five nodes: the versions probe (the node's
    /proc and /etc view, the emulated dpkg-query) reads each, and the agreement names
    each item's node alone."""
    state = LabState.load(lab_dir)
    for i in range(3, 6):
        state.nodes.append(LabNode(f"node0{i}", f"198.18.0.1{i}", 8500))
        write_rdma_state(state, state.nodes[-1])
    state.save()
    names = [n.name for n in state.nodes]
    healthy = {n: parse_versions(_facts(lab_dir, n, versions_command())) for n in names}
    assert judge_versions(healthy, EXPECT).outcome == "pass"
    for node, (item, version) in SOFTWARE.items():
        faults.inject("software", node, f"{item} {version}", lab_dir)
    assert faults.KINDS["software"].breaks == ("versions",)
    found = {n: parse_versions(_facts(lab_dir, n, versions_command())) for n in names}
    verdict = judge_versions(found, EXPECT)
    assert verdict.outcome == "fail"
    odd = {(m.name, m.subject) for m in verdict.measurements if m.outcome == "fail"}
    assert odd == {(item, node) for node, (item, _) in SOFTWARE.items()}, verdict.reason
    assert found["node03"]["nccl"] == "2.28.7-1+cuda12.9"
    faults.heal("all", lab_dir)
    again = {n: parse_versions(_facts(lab_dir, n, versions_command())) for n in names}
    assert again == healthy


def test_fault_arguments_are_checked(lab_dir):
    with pytest.raises(LabError, match="DEVICE SEVERITY COUNT"):
        faults.inject("aer", "node01", "gpu9 fatal 1", lab_dir)
    with pytest.raises(LabError, match="a size in GiB"):
        faults.inject("memory", "node01", "lots", lab_dir)
