"""The lab's emulated nvidia-smi, dmesg and journalctl, run here (no root, no namespaces):
recorded formats, the GPU parsers read them, and each fault changes exactly what it says."""

from __future__ import annotations

import os
import subprocess

import pytest

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.lab import faults
from pytest_hpcnet.lab.emulation import GPU_BUS_IDS, install_tools
from pytest_hpcnet.lab.state import LabNode, LabState
from pytest_hpcnet.probes.gpu import QUERY_FIELDS, parse_query_gpu, query_gpu_command
from pytest_hpcnet.probes.gpu_rdma import CUDA_COMMAND, parse_cuda_version
from pytest_hpcnet.probes.gpu_topo import TOPO_COMMAND, parse_topo
from pytest_hpcnet.probes.gpu_xid import KERNEL_LOG_COMMAND, parse_kernel_log
from pytest_hpcnet.requirements.gpu import judge_ecc, judge_pcie, judge_throttle, judge_xid
from tests.corpus import sample
from tests.unit.test_burnin_devices import program as burnin_program


@pytest.fixture
def node(tmp_path):
    """Run a shell command as on lab node01 (the emulated tools first on PATH)."""
    state = LabState(str(tmp_path), "lab.yaml", nodes=[LabNode("node01", "198.18.0.11", 8500)])
    state.save()
    bin_dir = install_tools(state)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HPCNET_LAB_NODE": "node01",
        "HPCNET_LAB_STATE": str(tmp_path),
    }

    def run(command: str) -> str:
        out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env)
        return out.stdout

    run.state_dir = tmp_path
    return run


def test_query_header_is_the_recorded_one(node):
    recorded = {}
    for line in sample("nvidia_smi", "query-gpu-all-fields.tsv").read_text().splitlines():
        field, _, rest = line.partition("\t")
        recorded[field] = rest.split("|")[0]
    header = node(query_gpu_command()).splitlines()[0]
    assert header == ", ".join(recorded[f] for f in QUERY_FIELDS)
    assert node("nvidia-smi --query-gpu=no.such --format=csv") == (
        'Field "no.such" is not a valid field to query.\n\n'
    )


def test_healthy_node_and_its_faults(node):
    query = parse_query_gpu(node(query_gpu_command()))
    assert query.error is None and len(query.gpus) == 8
    assert [g.bus_id[9:11] for g in query.gpus] == list(GPU_BUS_IDS)
    assert judge_ecc("node01", query) and judge_pcie("node01", query)
    for kind in ("gpu-ecc", "gpu-throttle", "gpu-pcie-downgrade"):
        faults.inject(kind, "node01", "5", node.state_dir)
    faulted = parse_query_gpu(node(query_gpu_command()))
    for judge in (judge_ecc, judge_throttle, judge_pcie):
        assert "GPU 5 (00000000:AB:00.0)" in judge("node01", faulted).reason, judge.__name__
    faults.inject("gpu-missing", "node01", "0", node.state_dir)
    assert parse_query_gpu(node(query_gpu_command())).gpus[0].bus_id == "00000000:2A:00.0"
    assert len(faults.heal("node01", node.state_dir)) == 4
    assert parse_query_gpu(node(query_gpu_command())) == query


def test_xid_fault_reaches_both_logs_and_heals(node):
    clean = parse_kernel_log(node(KERNEL_LOG_COMMAND))
    assert (clean.source, clean.events, clean.error) == ("journalctl", (), None)
    faults.inject("gpu-xid", "node01", "79", node.state_dir)
    log = parse_kernel_log(node(KERNEL_LOG_COMMAND))
    assert [(e.xid, e.bus_id) for e in log.events] == [(79, "0000:5d:00")]
    assert [e.xid for e in parse_kernel_log("hpcnet-klog: dmesg\n" + node("dmesg")).events] == [79]
    query = parse_query_gpu(node(query_gpu_command()))
    verdict = judge_xid("node01", log, Expectations(), query)
    assert "on GPU 3 (00000000:5D:00.0)" in verdict.reason
    faults.heal("node01", node.state_dir)
    assert parse_kernel_log(node(KERNEL_LOG_COMMAND)).events == ()


def test_sxid_fault_is_one_event_for_the_burnin_and_none_for_the_static_check(node):
    faults.inject("nvswitch-sxid", "node01", None, node.state_dir)
    printed = node("dmesg").splitlines()
    data, severity, engine = [line for line in printed if ": SXid (" in line]
    assert ": 22013, Data {0x0000002c," in data and ": 22013, Severity 0 Engine" in engine
    assert "] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 " in severity
    sxids: list = []
    burnin_program().new_xids(printed, set(), sxids)
    assert sxids == [["nvidia-nvswitch3", 22013, "Non-fatal"]]
    assert parse_kernel_log(node(KERNEL_LOG_COMMAND)).events == ()  # GPU Xids only
    faults.heal("node01", node.state_dir)
    assert ": SXid (" not in node("dmesg")


def test_topology_and_driver_mismatch(node):
    topo = parse_topo(node(TOPO_COMMAND))
    assert topo.error is None and len(topo.gpus) == 8 and topo.nic_names == ()
    faults.inject("driver-mismatch", "node01", None, node.state_dir)
    drivers = {g.driver_version for g in parse_query_gpu(node(query_gpu_command())).gpus}
    assert drivers == {"570.172.08"}
    assert "570.172.08" in node("dmesg")


def test_cuda_version_header_is_the_recorded_one(node):
    header = sample("nvidia_smi", "smi-q.txt").read_text().splitlines()[:8]
    printed = node("nvidia-smi -q -d COMPUTE").splitlines()
    assert printed[:3] == header[:3] and printed[4:7] == header[4:7]  # [3] is the timestamp
    assert printed[7].replace(": 8", ": 1") == header[7]  # one recorded GPU, eight here
    assert printed[8:10] == ["GPU 00000000:18:00.0", "    Compute Mode" + " " * 39 + ": Default"]
    assert parse_cuda_version(node(CUDA_COMMAND)) == "13.0"


def test_firmware_and_its_faults(node):
    from pytest_hpcnet.probes.firmware import GPU_FIRMWARE_COMMAND, parse_nic_info
    from pytest_hpcnet.probes.firmware import parse_smi_firmware as parse

    healthy = parse(node(GPU_FIRMWARE_COMMAND))
    assert healthy.error is None and len(healthy.gpus) == 8
    assert {(g.vbios, g.inforom_image, g.gsp_firmware, g.ecc_mode) for g in healthy.gpus} == {
        ("96.00.A5.00.1A", "G520.0282.02.02", "580.159.04", "Enabled")
    }
    faults.inject("vbios", "node01", "5 96.00.A5.00.1C", node.state_dir)
    assert [g.vbios for g in parse(node(GPU_FIRMWARE_COMMAND)).gpus].count("96.00.A5.00.1C") == 1
    assert parse(node(GPU_FIRMWARE_COMMAND)).gpus[5].vbios == "96.00.A5.00.1C"
    (nic,) = parse_nic_info("== hpcnet-nic eth0\n" + node("ethtool -i eth0"))
    assert (nic.driver, nic.version, nic.firmware) == ("virtio_net", "1.0.0", "")
    faults.inject("nic-firmware", "node01", "2.50", node.state_dir)
    assert parse_nic_info("== hpcnet-nic eth0\n" + node("ethtool -i eth0"))[0].firmware == "2.50"


def test_power_cap_lowers_exactly_its_gpu(node):
    from pytest_hpcnet.requirements.gpu_power import judge_power_limit

    def judged():
        return judge_power_limit(
            "node01", parse_query_gpu(node(query_gpu_command())), Expectations()
        )

    assert judged()
    faults.inject("power-cap", "node01", "6 450", node.state_dir)
    verdict = judged()
    assert verdict.outcome == "fail"
    assert [m.subject for m in verdict.measurements if m.outcome == "fail"] == ["GPU 6"]
    assert "450 W, below 700 W" in verdict.reason
    faults.heal("node01", node.state_dir)
    assert judged()


def test_a_reboot_heals_the_transient_faults_only(node):
    """What the lab's RebootInstance clears: a volatile ECC fault goes, a VBIOS stays."""
    faults.inject("vbios", "node01", None, node.state_dir)
    faults.inject("gpu-ecc", "node01", "5", node.state_dir)
    assert faults.heal_transient("node01", node.state_dir) == ["node01: gpu-ecc"]
    assert faults.heal("node01", node.state_dir) == ["node01: vbios"]
