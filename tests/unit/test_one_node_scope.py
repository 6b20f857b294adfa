"""A one-node inventory: what is measured between nodes (the cluster's NCCL collectives,
the perftest localization) is not applicable, never a failure nor a pass with nothing
measured; with two nodes it runs."""

from __future__ import annotations

import pytest

from pytest_hpcnet.requirements.registry import REQUIREMENTS, across_nodes_reason

pytest_plugins = ["pytester"]

SUITE = """\
import pytest

@pytest.mark.check("nccl_busbw", "NCCL")
def test_cluster_nccl(check):
    pass

@pytest.mark.check("perftest_localization", "localization")
def test_localization(check):
    pass

@pytest.mark.check("mtu", "MTU")
def test_per_node(check):
    pass
"""


def inventory(tmp_path, nodes: int) -> str:
    path = tmp_path / "inv.yaml"
    lines = "".join(
        f"  - {{name: n{i}, host: 127.0.0.{i}, connection: local}}\n" for i in range(1, nodes + 1)
    )
    path.write_text("cluster: {name: c, region: r}\nnodes:\n" + lines)
    return str(path)


@pytest.mark.parametrize(
    "check_id",
    ["nccl_busbw", "nccl_transport", "nccl_alltoall", "nccl_sendrecv", "perftest_localization"],
)
def test_measured_between_nodes_is_not_applicable_on_one(check_id):
    reason = across_nodes_reason(check_id, 1)
    assert reason is not None and reason.startswith("not applicable: ")
    assert across_nodes_reason(check_id, 2) is None


def test_per_node_requirements_run_on_one_node():
    assert across_nodes_reason("mtu", 1) is None
    assert across_nodes_reason("gpu_nccl_node", 1) is None  # the single-node all-reduce
    assert {r.id for r in REQUIREMENTS if r.across_nodes} >= {"nccl_busbw", "nccl_all_gather"}


def test_a_one_node_run_skips_them_as_not_applicable(pytester, tmp_path):
    pytester.makepyfile(test_suite=SUITE)
    one = pytester.runpytest(".", "--hpcnet-inventory", inventory(tmp_path, 1), "-rs", "-q")
    one.stdout.fnmatch_lines(["*not applicable: the inventory has one node*"])
    one.assert_outcomes(passed=1, skipped=2)
    two = pytester.runpytest(".", "--hpcnet-inventory", inventory(tmp_path, 2), "-q")
    two.assert_outcomes(passed=3)
