"""The host checks against the 4-node lab (`-m static`, the host tests only): each host fault
fails its requirement on its node and nowhere else."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pytest_hpcnet.lab import faults
from tests.lab.test_static_suite import failing, run_static

pytestmark = pytest.mark.lab

HOST_TESTS = ("-k", "test_host_hardware or test_pcie_aer or test_host_settings or test_time_offset")
FAULTS = (
    ("memory", "node01", "1792"),
    ("clock-skew", "node01", "2"),
    ("aer", "node02", "gpu3 fatal 1"),
    ("aer", "node03", "erdma_0 correctable 50"),
    ("clocksource", "node03", "hpet"),
    ("governor", "node04", "powersave"),
)
FAILED = {
    ("host_hardware", "node01"),
    ("host_settings", "node01"),
    ("pcie_aer", "node02"),
    ("pcie_aer", "node03"),
    ("host_settings", "node03"),
    ("host_settings", "node04"),
}


def test_host_faults_fail_exactly_their_nodes(lab4, tmp_path):
    """One run with every host fault injected; the healthy lab's pass of these tests is
    `test_static_suite.test_healthy_lab_passes_the_static_suite`."""
    state_dir = Path(lab4.state_dir)
    for kind, node, arg in FAULTS:
        faults.inject(kind, node, arg, state_dir)
    try:
        code, records = run_static(lab4.inventory, tmp_path, *HOST_TESTS)
    finally:
        faults.heal("all", state_dir)
    bad = failing(records)
    assert code == 1
    assert {(r["check_id"], r["subject"]) for r in bad} == FAILED, [r["message"] for r in bad]
    assert all(r["verdict"] == "fail" and r["subject"] in r["message"] for r in bad)
    others = {(r["check_id"], r["subject"]) for r in records} - FAILED
    assert len(others) == 4 * 3 - len(FAILED)  # every other node passes each requirement
    assert all(r["verdict"] == "pass" for r in records if (r["check_id"], r["subject"]) in others)


def test_memory_fault_fails_its_node_against_the_instance_type(lab4, tmp_path):
    """With `expect.host.cpus` and `memory_gib` unset, the lab's control plane's
    DescribeInstanceTypes figures (96 vCPUs, 2048 GiB) are the bounds: the `memory` fault
    fails node01 only, and every node's bounds name `ecs:DescribeInstanceTypes`."""
    raw = yaml.safe_load(Path(lab4.inventory).read_text())
    raw["expect"]["host"] = {"cpus": None, "memory_gib": None}
    inventory = tmp_path.parent / f"{tmp_path.name}-unset-host.yaml"
    inventory.write_text(yaml.safe_dump(raw))
    state_dir = Path(lab4.state_dir)
    faults.inject("memory", "node01", "1792", state_dir)
    try:
        code, records = run_static(str(inventory), tmp_path, "-k", "test_host_hardware")
    finally:
        faults.heal("all", state_dir)
    assert code == 1
    assert {(r["check_id"], r["subject"]) for r in failing(records)} == {
        ("host_hardware", "node01")
    }, [r["message"] for r in failing(records)]
    assert len(records) == 4
    for record in records:
        sources = {m["name"]: m["threshold_source"] for m in record["measured"]}
        assert sources["cpus"].startswith("ecs:DescribeInstanceTypes CpuCoreCount"), sources
        assert sources["mem_total"].startswith("ecs:DescribeInstanceTypes MemorySize 2048")


SOFTWARE = {
    "node01": ("kernel", "5.15.0-999-hpcnet-lab"),
    "node02": ("os", "ubuntu 99.04 lts"),
    "node03": ("nccl", "2.30.7-1+cuda12.9"),
    "node04": ("rdma-core", "99.0-1"),
}


def test_software_faults_fail_versions_on_exactly_their_nodes(lab4, tmp_path):
    """`software NODE ITEM VERSION` on each node, one item each: the versions agreement
    names each item's node alone, against the other three."""
    state_dir = Path(lab4.state_dir)
    for node, (item, version) in SOFTWARE.items():
        faults.inject("software", node, f"{item} {version}", state_dir)
    try:
        code, records = run_static(lab4.inventory, tmp_path, "-k", "test_gpu_versions_agree")
    finally:
        faults.heal("all", state_dir)
    assert code == 1
    (record,) = records
    assert record["check_id"] == "versions" and record["verdict"] == "fail"
    odd = {(m["name"], m["subject"]) for m in record["measured"] if m["outcome"] == "fail"}
    assert odd == {(item, node) for node, (item, _) in SOFTWARE.items()}, record["message"]
    assert sorted(record["suspect_nodes"]) == sorted(SOFTWARE)
