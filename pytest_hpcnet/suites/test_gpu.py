"""GPU node health: count and model, memory health, Xid, clocks, PCIe links, memlock,
GPU-NIC topology, and versions that agree across nodes (docs/checks.md, "GPU node health").

A CPU-only profile (`expect.gpu.count` unset) skips every per-node GPU check as not
applicable; the versions check runs everywhere (kernel, erdma, rdma-core, and the GPU
stack where nodes have one).
"""

import re

import pytest

from pytest_hpcnet.probes.gpu import GpuQuery, parse_query_gpu
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
NO_SYSFS = "not applicable: expect.gpu.rdma_sysfs is false (no sysfs for the RDMA devices)"


def gpu_versions(facts) -> dict[str, str]:
    """nvidia_driver, nvidia_kernel_module and cuda from a node's GPU sections (what exists)."""
    found: dict[str, str] = {}
    sections = facts.sections
    if "gpu_query" in sections:
        gpus = parse_query_gpu(sections["gpu_query"].text).gpus
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
    return parse_query_gpu(gpu_facts(cluster, node, check).text("gpu_query"))


def failed(verdict) -> str:
    return f"{verdict.reason}; fix: {verdict.fix}" if verdict.fix else verdict.reason


@mark("gpu_inventory")
def test_gpu_count_and_model(cluster, node, check):
    expect = cluster.expect.gpu
    found = query(cluster, node, check)
    check.measure("gpus", len(found.gpus), "GPUs", expect.count, "==", "expect.gpu.count")
    names = sorted({g.name or "?" for g in found.gpus})
    check.measure("model", ", ".join(names) or None, "", expect.model, "==", "expect.gpu.model")
    verdict = gpu.judge_count_model(node.name, found, cluster.expect)
    assert verdict, failed(verdict)


@mark("gpu_inventory")
@not_applicable_when(
    lambda expect: not expect.gpu.modules,
    "not applicable: no kernel module expected (expect.gpu.modules is empty)",
)
def test_gpu_kernel_modules(cluster, node, check):
    facts = gpu_facts(cluster, node, check)
    verdict = gpu_node.judge_modules(
        node.name, parse_modules(facts.text("gpu_modules")), cluster.expect
    )
    assert verdict, failed(verdict)


@mark("gpu_health")
def test_gpu_memory_health(cluster, node, check):
    verdict = gpu.judge_ecc(node.name, query(cluster, node, check))
    check.measure("gpus_at_fault", verdict.measured or 0, "GPUs", 0, "==", "ECC and remapping")
    assert verdict, failed(verdict)


@mark("gpu_xid")
def test_gpu_no_xid_since_boot(cluster, node, check):
    facts = gpu_facts(cluster, node, check)
    log = parse_kernel_log(facts.text("gpu_klog"))
    allowed = cluster.expect.gpu.allowed_xids
    check.measure("xid_events", len(log.events), "", 0, "==", "expect.gpu.allowed_xids")
    check.measure("kernel_log", log.source, "", None, None, "journalctl -k or dmesg")
    found = parse_query_gpu(facts.text("gpu_query"))
    verdict = gpu.judge_xid(node.name, log, cluster.expect, found)
    assert verdict, failed(verdict) + (f" (allowed: {allowed})" if allowed else "")


@mark("gpu_clocks")
def test_gpu_no_slowdown(cluster, node, check):
    verdict = gpu.judge_throttle(node.name, query(cluster, node, check))
    assert verdict, failed(verdict)


@mark("gpu_clocks")
def test_gpu_persistence_mode(cluster, node, check):
    verdict = gpu.judge_persistence(node.name, query(cluster, node, check), cluster.expect)
    check.measure("gpus_at_fault", verdict.measured or 0, "GPUs", 0, "==", "expect.gpu.persistence")
    assert verdict, failed(verdict)


@mark("gpu_clocks")
def test_gpu_mig_mode(cluster, node, check):
    verdict = gpu.judge_mig(node.name, query(cluster, node, check), cluster.expect)
    check.measure("gpus_at_fault", verdict.measured or 0, "GPUs", 0, "==", "expect.gpu.mig")
    assert verdict, failed(verdict)


@mark("pcie_links")
def test_gpu_pcie_links(cluster, node, check):
    gpus = query(cluster, node, check)
    verdict = gpu.judge_pcie(node.name, gpus)
    check.measure("gpus_below_max", verdict.measured or 0, "GPUs", 0, "==", "gen and width max")
    assert verdict, failed(verdict)
    idle = gpu.idle_gen_not_measured(node.name, gpus)
    if idle:
        pytest.skip(idle)


@mark("pcie_links")
def test_gpu_rdma_pcie_links(cluster, node, check):
    facts = gpu_facts(cluster, node, check)
    if not cluster.expect.gpu.rdma_sysfs:
        pytest.skip(NO_SYSFS)
    sysfs = parse_rdma_sysfs(facts.text("rdma_sysfs"))
    verdict = gpu_node.judge_rdma_pcie(node.name, sysfs, cluster.expect)
    assert verdict, failed(verdict)


@mark("memlock")
def test_gpu_memlock(cluster, node, check):
    memlock = parse_memlock(gpu_facts(cluster, node, check).text("gpu_memlock"))
    floor = cluster.expect.gpu.memlock_min_kib
    shown = "unlimited" if memlock.unlimited else memlock.kib
    check.measure("memlock", shown, "KiB", floor or "unlimited", ">=", "expect.gpu.memlock_min_kib")
    verdict = gpu_node.judge_memlock(node.name, memlock, cluster.expect)
    assert verdict, failed(verdict)


def nic_map(topo) -> str:
    """`GPU0=erdma_0,GPU1=erdma_0,...`: each GPU's nearest RDMA device(s) (`+` between ties)."""
    return ",".join(f"{r.device}={'+'.join(topo.nearest_nics(r.device)) or '-'}" for r in topo.gpus)


@mark("gpu_topology")
def test_gpu_nccl_ib_hca_covers_topology(cluster, node, check):
    topo = parse_topo(gpu_facts(cluster, node, check).text("gpu_topo"))
    hca = cluster.inventory.benchmarks.nccl.env.get("NCCL_IB_HCA")
    check.measure("nic_map", nic_map(topo) or None, "", None, None, "nvidia-smi topo -m")
    check.measure("NCCL_IB_HCA", hca or "unset (all)", "", None, None, "benchmarks.nccl.env")
    verdict = gpu_node.judge_nccl_ib_hca(node.name, topo, hca)
    assert verdict, failed(verdict)


@mark("gpu_topology")
def test_gpu_nic_numa(cluster, node, check):
    facts = gpu_facts(cluster, node, check)
    if not cluster.expect.gpu.rdma_sysfs:
        pytest.skip(NO_SYSFS)
    topo = parse_topo(facts.text("gpu_topo"))
    sysfs = parse_rdma_sysfs(facts.text("rdma_sysfs"))
    found = parse_query_gpu(facts.text("gpu_query"))
    verdict = gpu_node.judge_gpu_nic_numa(node.name, topo, sysfs, found)
    assert verdict, failed(verdict)


@mark("versions")
def test_gpu_versions_agree(cluster, check):
    versions: dict[str, dict[str, str]] = {}
    for node in cluster.nodes:
        facts = cluster.facts(node, check)
        section = facts.sections.get("versions")
        found = parse_versions(section.text) if section is not None else {}
        versions[node.name] = {**found, **gpu_versions(facts)}
        check.tool_versions.update(gpu_versions(facts))
    for comp in gpu_node.COMPARED:
        values = sorted({v.get(comp, "missing") for v in versions.values()})
        if values != ["missing"]:
            pin = cluster.expect.versions.pin.get(comp)
            source = "expect.versions.pin" if pin else "all nodes agree"
            check.measure(comp, ", ".join(values), "", pin, "==", source)
    verdict = gpu_node.judge_versions(versions, cluster.expect)
    check.suspect(*(n for n in versions if re.search(rf"\b{re.escape(n)}\b", verdict.reason)))
    assert verdict, failed(verdict)
