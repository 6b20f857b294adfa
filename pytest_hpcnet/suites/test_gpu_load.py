"""GPUs under load: compute, result agreement, memory and host-link bandwidth per GPU
(docs/checks.md, "GPUs under load"). Every GPU of every node is loaded at once, once per
session (`Cluster.phase`, `campaigns/phase`); each test hands its judge's verdict to the check.

A CPU-only profile (`expect.gpu.count` unset) skips them as not applicable.
"""

import pytest

from pytest_hpcnet.campaigns.gpu_load import DcgmPhase, GpuLoadPhase, NodeNcclPhase
from pytest_hpcnet.campaigns.gpu_p2p import P2pPhase
from pytest_hpcnet.probes.gpu import GPU_QUERY
from pytest_hpcnet.probes.gpu_fabric import GPU_FABRIC
from pytest_hpcnet.probes.gpu_nvlink import NVLINK_ERRORS, NVLINK_STATUS
from pytest_hpcnet.requirements import gpu_load
from pytest_hpcnet.requirements.gpu_dcgm import judge_gpu_dcgm
from pytest_hpcnet.requirements.gpu_fabric import judge_gpu_fabric
from pytest_hpcnet.requirements.gpu_nccl_node import judge_gpu_nccl_node
from pytest_hpcnet.requirements.gpu_nvlink import judge_gpu_nvlink
from pytest_hpcnet.requirements.gpu_p2p import NO_PAIRS, judge_gpu_p2p, without_pairs
from pytest_hpcnet.requirements.registry import mark, not_applicable_when

NOT_APPLICABLE = "not applicable: the profile sets no GPUs (expect.gpu.count)"
pytestmark = [
    pytest.mark.gpu_load,
    not_applicable_when(lambda expect: not expect.gpu.count, NOT_APPLICABLE),
]


@mark("gpu_compute")
def test_gpu_compute_under_load(cluster, node, check):
    loads = cluster.phase(GpuLoadPhase, node, check)
    check.judge(gpu_load.judge_gpu_compute(loads[node.name], loads, cluster.expect), node.name)


@mark("gpu_correctness")
def test_gpu_results_agree(cluster, node, check):
    loads = cluster.phase(GpuLoadPhase, node, check)
    check.judge(gpu_load.judge_gpu_correctness(loads[node.name], loads), node.name)


@mark("gpu_bandwidth")
def test_gpu_bandwidth_under_load(cluster, node, check):
    loads = cluster.phase(GpuLoadPhase, node, check)
    check.judge(gpu_load.judge_gpu_bandwidth(loads[node.name], loads, cluster.expect), node.name)


@mark("gpu_nvlink")
@not_applicable_when(
    lambda expect: not expect.gpu_load.nvlink_links,
    "not applicable: the profile expects no NVLink (expect.gpu_load.nvlink_links)",
)
def test_gpu_nvlink_up_and_error_free(cluster, node, check):
    facts = cluster.facts(node, check)
    status, errors = facts.get(NVLINK_STATUS), facts.get(NVLINK_ERRORS)
    query = facts.get(GPU_QUERY)
    check.judge(judge_gpu_nvlink(node.name, status, errors, query, cluster.expect), node.name)


@mark("gpu_dcgm")
@not_applicable_when(
    lambda expect: not expect.gpu_load.dcgm_level,
    "not applicable: DCGM is left out (expect.gpu_load.dcgm_level: null)",
)
def test_gpu_dcgm_diagnostics(cluster, node, check):
    run, missing = cluster.phase(DcgmPhase, node, check)[node.name]
    query = cluster.facts(node, check).get(GPU_QUERY)
    load, count = cluster.expect.gpu_load, cluster.expect.gpu.count
    verdict = judge_gpu_dcgm(node.name, run, query, load.dcgm_level, missing, expected_gpus=count)
    check.judge(verdict, node.name)


@mark("gpu_nccl_node")
def test_gpu_nccl_single_node(cluster, node, check):
    runs = cluster.phase(NodeNcclPhase, node, check)
    result, missing = runs[node.name]
    check.judge(judge_gpu_nccl_node(node.name, result, runs, cluster.expect, missing), node.name)


@mark("gpu_p2p")
@not_applicable_when(without_pairs, NO_PAIRS)
def test_gpu_to_gpu_bandwidth(cluster, node, check):
    runs = cluster.phase(P2pPhase, node, check)
    check.judge(judge_gpu_p2p(runs[node.name], runs, cluster.expect), node.name)


@mark("gpu_fabric")
@not_applicable_when(
    lambda expect: not expect.gpu_load.nvswitch,
    "not applicable: the SKU has no NVSwitch (expect.gpu_load.nvswitch)",
)
def test_gpu_nvswitch_fabric_ready(cluster, node, check):
    facts = cluster.facts(node, check)
    fabric, query = facts.get(GPU_FABRIC), facts.get(GPU_QUERY)
    check.judge(judge_gpu_fabric(node.name, fabric, query), node.name)
