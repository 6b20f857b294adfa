"""The GPU checks through the real suite (`pytest -m static -k test_gpu_ --inventory lab`):
a healthy lab passes every one (those the lab cannot measure are skipped as not applicable,
saying why), and each GPU fault fails exactly the faulted node's check, naming the node and
the GPU index and bus id, and nothing else. One lab; faults are applied and healed in turn.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpcnet.lab import faults
from tests.lab.test_static_suite import failing, run_static

pytestmark = pytest.mark.lab

GPU_ONLY = ("-k", "test_gpu_")
GPU_CHECKS = {
    "gpu_inventory",
    "gpu_health",
    "gpu_xid",
    "gpu_clocks",
    "gpu_power_limit",
    "pcie_links",
    "memlock",
    "gpu_topology",
    "versions",
    "firmware",
}
NOT_APPLICABLE = {  # what the lab cannot measure (profiles/lab.yaml says why)
    "test_gpu_kernel_modules": (
        "not applicable: no kernel module expected (expect.gpu.modules is empty)"
    ),
}
BUS3 = "GPU 3 (00000000:5D:00.0)"
FAULTS = {  # kind: (node, the one failing check, what its message says)
    "gpu-missing": ("node02", "gpu_inventory", "node02: 7 GPUs (index 0,1,2,3,4,5,6), expected 8"),
    "gpu-ecc": ("node03", "gpu_health", f"node03: {BUS3} 4 volatile uncorrected ECC errors"),
    "gpu-xid": ("node04", "gpu_xid", "node04: Xid 94 (Contained ECC error (the application"),
    "gpu-throttle": ("node01", "gpu_clocks", f"node01: {BUS3} slowdown active: hw_slowdown"),
    "power-cap": ("node03", "gpu_power_limit", f"node03: {BUS3} power limit 500 W, below 700 W"),
    "gpu-pcie-downgrade": ("node02", "pcie_links", f"node02: {BUS3} PCIe link gen4 of gen5, x8"),
    "eri-pcie-downgrade": ("node04", "pcie_links", "node04: erdma_0 PCIe link"),
    # the GSP firmware ships with the driver: another driver is another GSP firmware too
    "driver-mismatch": (
        "node03",
        ("versions", "firmware"),
        "nvidia_driver 570.172.08 on node03 (majority 580.",
    ),
    "vbios": ("node02", "firmware", f"vbios 96.00.A5.00.1B on node02 {BUS3} (majority 96.00.A5"),
    "nic-firmware": ("node04", "firmware", "nic_firmware 1.2.3 on node04 eth0 (majority (empty)"),
}
CODES = {  # kind: the fault code its failure carries (docs/fault-codes.md)
    "gpu-missing": "HPCNET-GPU-COUNT",
    "gpu-ecc": "HPCNET-GPU-ECC-DBE",
    "gpu-xid": "HPCNET-GPU-XID-94",
    "gpu-throttle": "HPCNET-GPU-SLOWDOWN",
    "power-cap": "HPCNET-GPU-POWER-CAP",
    "gpu-pcie-downgrade": "HPCNET-PCIE-DOWNGRADE",
    "eri-pcie-downgrade": "HPCNET-PCIE-DOWNGRADE",
    "driver-mismatch": "HPCNET-VERSIONS",
    "vbios": "HPCNET-FIRMWARE",
    "nic-firmware": "HPCNET-FIRMWARE",
}


def test_healthy_lab_passes_every_gpu_check(lab4, tmp_path):
    code, records = run_static(lab4.inventory, tmp_path, *GPU_ONLY)
    assert not failing(records), [r["message"] for r in failing(records)]
    assert code == 0
    assert {r["check_id"] for r in records if r["verdict"] == "pass"} == GPU_CHECKS
    skipped = {
        r["nodeid"].split("::")[-1].split("[")[0]: r for r in records if r["verdict"] == "skipped"
    }
    assert set(skipped) == set(NOT_APPLICABLE)
    for test, why in NOT_APPLICABLE.items():
        assert why in skipped[test]["message"], skipped[test]["message"]
    count = next(r for r in records if r["check_id"] == "gpu_inventory" and r["verdict"] == "pass")
    assert count["tool_versions"]["nvidia_driver"] == "580.159.04"
    assert count["tool_versions"]["cuda"] == "13.0"
    topology = [r for r in records if r["nodeid"].split("::")[-1].startswith("test_gpu_nccl_ib")]
    assert len(topology) == 4
    nic_map = {m["name"]: m["value"] for m in topology[0]["measured"]}["nic_map"]
    assert nic_map.startswith("GPU0=erdma_0,GPU1=erdma_0,") and nic_map.count("GPU") == 8


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_gpu_fault_fails_exactly_that_nodes_check(lab4, tmp_path, kind):
    node, check_id, text = FAULTS[kind]
    faults.inject(kind, node, None, Path(lab4.state_dir))
    try:
        code, records = run_static(lab4.inventory, tmp_path, *GPU_ONLY)
    finally:
        healed = faults.heal(node, Path(lab4.state_dir))
    assert healed == [f"{node}: {kind}"]
    bad = failing(records)
    assert code == 1
    checks = check_id if isinstance(check_id, tuple) else (check_id,)
    assert [(r["check_id"], r["subject"] in (node, "cluster")) for r in bad] == [
        (c, True) for c in checks
    ], [r["message"] for r in bad]
    if kind == "driver-mismatch":
        assert "gsp_firmware 570.172.08 on node03 GPU 0 " in bad[1]["message"]
    assert text in bad[0]["message"] and "fix: " in bad[0]["message"], bad[0]["message"]
    assert node in bad[0]["message"]
    assert CODES[kind] in bad[0]["codes"], bad[0]["codes"]
    if kind not in ("gpu-missing", "driver-mismatch", "eri-pcie-downgrade", "nic-firmware"):
        assert BUS3 in bad[0]["message"], bad[0]["message"]
