"""The GPU sections ride in the node's one facts round trip; a CPU-only profile runs none."""

from __future__ import annotations

from pytest_hpcnet.campaigns.fact_sections import SECTIONS, facts_command
from pytest_hpcnet.inventory.expectations import Expectations, load_profile
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.sections import split_sections

NODE = Node(name="n1", host="198.18.0.11")
GPU_SECTIONS = [s for s in SECTIONS if s.name.startswith("gpu_") or s.name == "rdma_sysfs"]


def test_gpu_profile_gathers_every_gpu_section_in_the_one_script():
    expect = Expectations.model_validate(load_profile("ebmgn8is"))
    script = facts_command(NODE, expect)
    for needle in (
        "nvidia-smi --query-gpu=",
        "nvidia-smi topo -m",
        "/proc/driver/nvidia/version",
        "/proc/modules",
        "ulimit -l",
        "journalctl -k -b",
        "/sys/class/infiniband",
        "CUDA Version",
    ):
        assert needle in script, needle
    names = [s.name for s in GPU_SECTIONS]
    assert all(f"@@hpcnet begin {name}'" in script for name in names)


def gpu_part(expect: Expectations) -> str:
    """The GPU sections' share of the facts script (the eRDMA sections read sysfs too)."""
    return "\n".join(s.build(NODE, expect) for s in GPU_SECTIONS)


def test_cpu_only_profile_runs_no_gpu_command():
    script = facts_command(NODE, Expectations())
    assert "nvidia-smi" not in script
    assert "/sys/class/infiniband" not in gpu_part(Expectations())
    output = "\n".join(
        f"@@hpcnet begin {s.name}\nnot expected\n@@hpcnet end {s.name} 0" for s in GPU_SECTIONS
    )
    assert {k: v.text for k, v in split_sections(output).items()} == {
        s.name: "not expected" for s in GPU_SECTIONS
    }


def test_no_rdma_sysfs_skips_only_that_section():
    expect = Expectations.model_validate({"gpu": {"count": 8, "rdma_sysfs": False}})
    assert "nvidia-smi topo -m" in facts_command(NODE, expect)
    assert "/sys/class/infiniband" not in gpu_part(expect)


def test_inventory_overrides_the_profiles_gpu_and_versions_keys(tmp_path):
    path = tmp_path / "inv.yaml"
    path.write_text(
        "cluster: {name: c, region: cn-test}\n"
        "nodes: [{name: n1, host: 198.18.0.11}]\n"
        "expect:\n"
        "  profile: ebmgn7ex\n"
        "  gpu: {model: NVIDIA A800-SXM4-80GB, allowed_xids: [13]}\n"
        "  versions: {pin: {nvidia_driver: 580.126.09}}\n"
    )
    expect = load_inventory(path).expect
    assert (expect.gpu.count, expect.gpu.model) == (8, "NVIDIA A800-SXM4-80GB")  # count: profile
    assert expect.gpu.allowed_xids == [13] and expect.gpu.persistence is True
    assert expect.versions.pin == {"nvidia_driver": "580.126.09"}
    assert {(b.tool, b.version) for b in expect.versions.known_bad} == {
        ("nccl", "2.28.7"),
        ("nccl", "2.28.9"),
    }
