"""The GPU sections ride in the node's one facts round trip; a CPU-only profile runs none."""

from __future__ import annotations

from pytest_hpcnet.campaigns.facts import GPU_SECTIONS, facts_command, split_sections
from pytest_hpcnet.inventory.expectations import Expectations, load_profile
from pytest_hpcnet.inventory.models import Node

NODE = Node(name="n1", host="198.18.0.11")


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


def test_cpu_only_profile_runs_no_gpu_command():
    script = facts_command(NODE, Expectations())
    assert "nvidia-smi" not in script and "/sys/class/infiniband" not in script
    output = "\n".join(
        f"@@hpcnet begin {s.name}\nnot expected\n@@hpcnet end {s.name} 0" for s in GPU_SECTIONS
    )
    assert {k: v.text for k, v in split_sections(output).items()} == {
        s.name: "not expected" for s in GPU_SECTIONS
    }


def test_no_rdma_sysfs_skips_only_that_section():
    expect = Expectations.model_validate({"gpu": {"count": 8, "rdma_sysfs": False}})
    script = facts_command(NODE, expect)
    assert "nvidia-smi topo -m" in script and "/sys/class/infiniband" not in script
