"""GPU node health: count and model, memory health, Xid, clocks, PCIe links, memlock,
GPU-NIC topology, and versions and firmware that agree across nodes (docs/checks.md, "GPU
node health").

Each test hands one judge's verdict (`requirements/gpu.py`, `requirements/gpu_node.py`) to
its check, which records the judge's measurements (per GPU where it knows GPUs). A CPU-only
profile (`expect.gpu.count` unset) skips every per-node GPU check as not applicable; the
versions check runs everywhere (kernel, erdma, rdma-core, and the GPU stack where nodes
have one).
"""

import pytest

from pytest_hpcnet.probes.firmware import BIOS, GPU_FIRMWARE, NIC_INFO, node_firmware
from pytest_hpcnet.probes.gpu import GPU_QUERY
from pytest_hpcnet.probes.gpu_host import GPU_MEMLOCK, GPU_MODULES
from pytest_hpcnet.probes.gpu_rdma import RDMA_SYSFS
from pytest_hpcnet.probes.gpu_topo import GPU_TOPO
from pytest_hpcnet.probes.gpu_xid import GPU_KLOG
from pytest_hpcnet.probes.metadata import METADATA
from pytest_hpcnet.requirements import firmware, gpu, gpu_node, gpu_power
from pytest_hpcnet.requirements.registry import mark, not_applicable_when

NOT_APPLICABLE = "not applicable: the profile sets no GPUs (expect.gpu.count)"
pytestmark = [
    pytest.mark.static,
    not_applicable_when(lambda expect: not expect.gpu.count, NOT_APPLICABLE),
]
no_sysfs = not_applicable_when(
    lambda expect: not expect.gpu.rdma_sysfs,
    "not applicable: expect.gpu.rdma_sysfs is false (no sysfs for the RDMA devices)",
)


def query(cluster, node, check):
    return cluster.gpu_facts(node, check).get(GPU_QUERY)


@mark("gpu_inventory")
def test_gpu_count_and_model(cluster, node, check):
    check.judge(gpu.judge_count_model(node.name, query(cluster, node, check), cluster.expect))


@mark("gpu_inventory")
@not_applicable_when(
    lambda expect: not expect.gpu.modules,
    "not applicable: no kernel module expected (expect.gpu.modules is empty)",
)
def test_gpu_kernel_modules(cluster, node, check):
    modules = cluster.gpu_facts(node, check).get(GPU_MODULES)
    check.judge(gpu_node.judge_modules(node.name, modules, cluster.expect))


@mark("gpu_health")
def test_gpu_memory_health(cluster, node, check):
    check.judge(gpu.judge_ecc(node.name, query(cluster, node, check)))


@mark("gpu_xid")
def test_gpu_no_xid_since_boot(cluster, node, check):
    facts = cluster.gpu_facts(node, check)
    log = facts.get(GPU_KLOG)
    found = facts.get(GPU_QUERY)
    check.judge(gpu.judge_xid(node.name, log, cluster.expect, found))


@mark("gpu_clocks")
def test_gpu_no_slowdown(cluster, node, check):
    check.judge(gpu.judge_throttle(node.name, query(cluster, node, check)))


@mark("gpu_clocks")
def test_gpu_persistence_mode(cluster, node, check):
    check.judge(gpu.judge_persistence(node.name, query(cluster, node, check), cluster.expect))


@mark("gpu_clocks")
def test_gpu_mig_mode(cluster, node, check):
    check.judge(gpu.judge_mig(node.name, query(cluster, node, check), cluster.expect))


@mark("gpu_power_limit")
def test_gpu_power_limit(cluster, node, check):
    check.judge(gpu_power.judge_power_limit(node.name, query(cluster, node, check), cluster.expect))


@mark("pcie_links")
def test_gpu_pcie_links(cluster, node, check):
    check.judge(gpu.judge_pcie(node.name, query(cluster, node, check)))


@mark("pcie_links")
@no_sysfs
def test_gpu_rdma_pcie_links(cluster, node, check):
    sysfs = cluster.gpu_facts(node, check).get(RDMA_SYSFS)
    check.judge(gpu_node.judge_rdma_pcie(node.name, sysfs, cluster.expect))


@mark("memlock")
def test_gpu_memlock(cluster, node, check):
    memlock = cluster.gpu_facts(node, check).get(GPU_MEMLOCK)
    check.judge(gpu_node.judge_memlock(node.name, memlock, cluster.expect))


@mark("gpu_topology")
def test_gpu_nccl_ib_hca_covers_topology(cluster, node, check):
    topo = cluster.gpu_facts(node, check).get(GPU_TOPO)
    hca = cluster.inventory.benchmarks.nccl.env.get("NCCL_IB_HCA")
    check.judge(gpu_node.judge_nccl_ib_hca(node.name, topo, hca))


@mark("gpu_topology")
@no_sysfs
def test_gpu_nic_numa(cluster, node, check):
    facts = cluster.gpu_facts(node, check)
    topo = facts.get(GPU_TOPO)
    sysfs = facts.get(RDMA_SYSFS)
    found = facts.get(GPU_QUERY)
    check.judge(gpu_node.judge_gpu_nic_numa(node.name, topo, sysfs, found))


@mark("versions")
def test_gpu_versions_agree(cluster, check):
    versions = {node.name: cluster.node_versions(node, check) for node in cluster.nodes}
    verdict = gpu_node.judge_versions(versions, cluster.expect, instance_types(cluster, check))
    check.suspect(*verdict.extra.get("suspects", ()))
    check.judge(verdict)


def instance_types(cluster, check):
    """Each node's instance type from its metadata (None: not read); nodes are compared
    only with nodes of their own type."""
    found = {node.name: cluster.facts(node, check).get_or_none(METADATA) for node in cluster.nodes}
    return {name: meta.instance_type if meta else None for name, meta in found.items()}


@mark("firmware")
def test_gpu_firmware_agrees(cluster, check):
    found = {}
    for node in cluster.nodes:
        facts = cluster.facts(node, check)
        sections = (facts.get_or_none(s) for s in (GPU_FIRMWARE, NIC_INFO, BIOS))
        found[node.name] = node_firmware(*sections)
    verdict = firmware.judge_firmware(found, cluster.expect, instance_types(cluster, check))
    check.suspect(*verdict.extra.get("suspects", ()))
    check.judge(verdict)
