"""GPU node health: count and model, memory health, Xid, clocks, PCIe links, memlock,
GPU-NIC topology, and versions that agree across nodes (docs/checks.md, "GPU node health").

Each test hands one judge's verdict (`requirements/gpu.py`, `requirements/gpu_node.py`) to
its check, which records the judge's measurements (per GPU where it knows GPUs). A CPU-only
profile (`expect.gpu.count` unset) skips every per-node GPU check as not applicable; the
versions check runs everywhere (kernel, erdma, rdma-core, and the GPU stack where nodes
have one).
"""

import pytest

from pytest_hpcnet.probes.gpu import GPU_QUERY, GpuQuery
from pytest_hpcnet.probes.gpu_host import parse_driver_version, parse_memlock, parse_modules
from pytest_hpcnet.probes.gpu_rdma import parse_cuda_version, parse_rdma_sysfs
from pytest_hpcnet.probes.gpu_topo import parse_topo
from pytest_hpcnet.probes.gpu_xid import parse_kernel_log
from pytest_hpcnet.probes.versions import parse_versions
from pytest_hpcnet.requirements import gpu, gpu_node
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


def gpu_versions(facts) -> dict[str, str]:
    """nvidia_driver, nvidia_kernel_module and cuda from a node's GPU sections (what exists)."""
    found: dict[str, str] = {}
    sections = facts.sections
    if GPU_QUERY.name in sections:
        gpus = GPU_QUERY.parse(sections[GPU_QUERY.name].text).gpus
        drivers = sorted({g.driver_version for g in gpus})
        if drivers and None not in drivers:
            found["nvidia_driver"] = ",".join(drivers)
    if "gpu_driver" in sections:
        kernel = parse_driver_version(sections["gpu_driver"].text).version
        if kernel:
            found["nvidia_kernel_module"] = kernel
    if "gpu_cuda" in sections:
        cuda = parse_cuda_version(sections["gpu_cuda"].text)
        if cuda:
            found["cuda"] = cuda
    return found


def gpu_facts(cluster, node, check):
    """The node's facts, its GPU versions recorded (a CPU-only profile never gets here: the
    module's `not_applicable_when` collects its tests once, skipped)."""
    facts = cluster.facts(node, check)
    check.tool_versions.update(gpu_versions(facts))
    return facts


def query(cluster, node, check) -> GpuQuery:
    return gpu_facts(cluster, node, check).get(GPU_QUERY)


@mark("gpu_inventory")
def test_gpu_count_and_model(cluster, node, check):
    check.judge(gpu.judge_count_model(node.name, query(cluster, node, check), cluster.expect))


@mark("gpu_inventory")
@not_applicable_when(
    lambda expect: not expect.gpu.modules,
    "not applicable: no kernel module expected (expect.gpu.modules is empty)",
)
def test_gpu_kernel_modules(cluster, node, check):
    modules = parse_modules(gpu_facts(cluster, node, check).text("gpu_modules"))
    check.judge(gpu_node.judge_modules(node.name, modules, cluster.expect))


@mark("gpu_health")
def test_gpu_memory_health(cluster, node, check):
    check.judge(gpu.judge_ecc(node.name, query(cluster, node, check)))


@mark("gpu_xid")
def test_gpu_no_xid_since_boot(cluster, node, check):
    facts = gpu_facts(cluster, node, check)
    log = parse_kernel_log(facts.text("gpu_klog"))
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


@mark("pcie_links")
def test_gpu_pcie_links(cluster, node, check):
    check.judge(gpu.judge_pcie(node.name, query(cluster, node, check)))


@mark("pcie_links")
@no_sysfs
def test_gpu_rdma_pcie_links(cluster, node, check):
    sysfs = parse_rdma_sysfs(gpu_facts(cluster, node, check).text("rdma_sysfs"))
    check.judge(gpu_node.judge_rdma_pcie(node.name, sysfs, cluster.expect))


@mark("memlock")
def test_gpu_memlock(cluster, node, check):
    memlock = parse_memlock(gpu_facts(cluster, node, check).text("gpu_memlock"))
    check.judge(gpu_node.judge_memlock(node.name, memlock, cluster.expect))


@mark("gpu_topology")
def test_gpu_nccl_ib_hca_covers_topology(cluster, node, check):
    topo = parse_topo(gpu_facts(cluster, node, check).text("gpu_topo"))
    hca = cluster.inventory.benchmarks.nccl.env.get("NCCL_IB_HCA")
    check.judge(gpu_node.judge_nccl_ib_hca(node.name, topo, hca))


@mark("gpu_topology")
@no_sysfs
def test_gpu_nic_numa(cluster, node, check):
    facts = gpu_facts(cluster, node, check)
    topo = parse_topo(facts.text("gpu_topo"))
    sysfs = parse_rdma_sysfs(facts.text("rdma_sysfs"))
    found = facts.get(GPU_QUERY)
    check.judge(gpu_node.judge_gpu_nic_numa(node.name, topo, sysfs, found))


@mark("versions")
def test_gpu_versions_agree(cluster, check):
    versions: dict[str, dict[str, str] | None] = {}
    for node in cluster.nodes:
        facts = cluster.facts(node, check)
        section = facts.whole("versions")
        found = parse_versions(section) if section is not None else None
        versions[node.name] = None if found is None else {**found, **gpu_versions(facts)}
        check.tool_versions.update(gpu_versions(facts))
    verdict = gpu_node.judge_versions(versions, cluster.expect)
    check.suspect(*verdict.extra.get("suspects", ()))
    check.judge(verdict)
