"""The lab's emulated sysfs as the GPU checks read it: the real RDMA_SYSFS_COMMAND, run by a
shell with HPCNET_SYSFS pointing at the tree the lab writes, parsed by the real parser."""

from __future__ import annotations

import os
import subprocess

from pytest_hpcnet.lab.emulation import rdma_devices, write_sysfs
from pytest_hpcnet.lab.state import LabNode
from pytest_hpcnet.probes.gpu_rdma import RDMA_SYSFS_COMMAND, parse_rdma_sysfs


def read(root) -> str:
    env = {**os.environ, "HPCNET_SYSFS": str(root)}
    run = subprocess.run(
        ["sh", "-c", RDMA_SYSFS_COMMAND], capture_output=True, text=True, env=env, timeout=30
    )
    return run.stdout


def test_two_eris_read_whole_with_numa_and_pcie_link(tmp_path):
    node = LabNode(name="node01", address="198.18.0.11", mtu=8500, mac="00:16:3e:18:00:0b")
    write_sysfs(tmp_path, rdma_devices(node, 2))
    found = parse_rdma_sysfs(read(tmp_path))
    assert found.error is None
    by_name = {d.device: d for d in found.devices}
    assert sorted(by_name) == ["erdma_0", "erdma_1"]
    assert [by_name[n].numa_node for n in sorted(by_name)] == [0, 1]
    for dev in found.devices:
        assert dev.speed_gts == dev.speed_max_gts and dev.speed_gts is not None
        assert dev.width == dev.width_max and dev.width is not None


def test_no_devices_is_a_whole_empty_answer(tmp_path):
    write_sysfs(tmp_path, [])
    found = parse_rdma_sysfs(read(tmp_path))
    assert found.error is None and found.devices == ()


def test_eri_pcie_downgrade_narrows_one_device(tmp_path):
    node = LabNode(name="node01", address="198.18.0.11", mtu=8500, mac="00:16:3e:18:00:0b")
    node.faults["eri-pcie-downgrade"] = "erdma_1"
    write_sysfs(tmp_path, rdma_devices(node, 2))
    by_name = {d.device: d for d in parse_rdma_sysfs(read(tmp_path)).devices}
    assert (by_name["erdma_1"].width, by_name["erdma_1"].width_max) == (8, 16)
    assert by_name["erdma_0"].width == 16
