"""eRDMA: the expected devices are present, every port is active, both tools agree."""

import pytest

from pytest_hpcnet.probes.erdma import ERDMA_DRIVER_STATE, ERDMA_IDENTITY, GID_TABLES
from pytest_hpcnet.probes.erdma_gdr import ERDMA_GDR
from pytest_hpcnet.probes.links import ADDR, LINKS
from pytest_hpcnet.probes.rdma import COMPAT_MODE, ERDMA_MODULE
from pytest_hpcnet.probes.rdma_parsers import IBV_DEVINFO, RDMA_LINK
from pytest_hpcnet.requirements import rdma
from pytest_hpcnet.requirements.erdma import (
    eri_found,
    judge_erdma_driver,
    judge_erdma_gdr,
    judge_erdma_identity,
    judge_erdma_numa,
    judge_eri_active_mtu,
    judge_eri_gid,
)
from pytest_hpcnet.requirements.registry import mark, not_applicable_when

pytestmark = pytest.mark.static


@mark("erdma")
def test_expected_rdma_devices_present(cluster, node, check):
    found = cluster.facts(node, check).get(IBV_DEVINFO)
    check.judge(rdma.judge_node_devices(node, found, cluster.expect))


@mark("erdma")
def test_rdma_ports_active(cluster, node, check):
    found = cluster.facts(node, check).get(IBV_DEVINFO)
    check.judge(rdma.judge_node_ports(node, found, cluster.expect))


@mark("erdma")
def test_rdma_tools_agree(cluster, node, check):
    facts = cluster.facts(node, check)
    verbs = facts.get(IBV_DEVINFO)
    links = facts.get(RDMA_LINK)
    check.judge(rdma.judge_tools_agree(node.name, verbs, links))


@mark("erdma")
@not_applicable_when(
    lambda expect: not expect.rdma.kernel_module,
    "not applicable: no kernel module expected (expect.rdma.kernel_module is null)",
)
def test_erdma_kernel_module_loaded(cluster, node, check):
    module = cluster.expect.rdma.kernel_module
    state = cluster.facts(node, check).get(ERDMA_MODULE).state(module)
    check.judge(rdma.judge_kernel_module(node.name, state, module))


@mark("erdma")
@not_applicable_when(
    lambda expect: expect.rdma.compat_mode is None,
    "not applicable: no compat_mode expected (expect.rdma.compat_mode is unset)",
)
def test_erdma_compat_mode(cluster, node, check):
    wanted = cluster.expect.rdma.compat_mode
    mode = cluster.facts(node, check).get(COMPAT_MODE)
    check.judge(rdma.judge_compat_mode(node.name, mode, wanted))


# -- eRDMA in depth: identity, driver state, port settings of every ERI ------------------


@mark("erdma_identity")
def test_every_eri_present_by_driver(cluster, node, check):
    ids = cluster.facts(node, check).get(ERDMA_IDENTITY)
    glob, node_min = node.rdma.device_glob, node.rdma.min_devices
    check.judge(judge_erdma_identity(node.name, ids, cluster.expect, glob, node_min))


@mark("erdma_driver")
def test_erdma_driver_state(cluster, node, check):
    driver = cluster.facts(node, check).get(ERDMA_DRIVER_STATE)
    check.judge(judge_erdma_driver(node.name, driver, cluster.expect))


@mark("erdma_port")
def test_eri_active_mtu_follows_the_interface(cluster, node, check):
    facts = cluster.facts(node, check)
    devinfo, links = facts.get(IBV_DEVINFO), facts.get(LINKS)
    ids = facts.get(ERDMA_IDENTITY)
    facts.get(RDMA_LINK)  # both sources of each ERI's netdev (sysfs, else rdma link)
    netdevs = cluster.facts_campaign.eri_netdevs(node.name)
    eris = cluster.facts_campaign.eri_devices(node.name)
    check.judge(judge_eri_active_mtu(node.name, devinfo, ids, eris, netdevs, links))


@mark("erdma_port")
def test_eri_gid_index_is_the_ipv4_one(cluster, node, check):
    facts = cluster.facts(node, check)
    tables = facts.get(GID_TABLES)
    eris = cluster.facts_campaign.eri_devices(node.name)
    check.judge(eri_found(node.name, eris))
    used = {dev: cluster.facts_campaign.gid_index(node.name, dev) for dev in eris}
    facts.get_or_none(ADDR)  # each ERI's address: a cut listing is not measured, never a failure
    addresses = {dev: cluster.facts_campaign.eri_address(node.name, dev) for dev in eris}
    check.judge(judge_eri_gid(node.name, tables, eris, used, addresses))


@mark("erdma_port")
@not_applicable_when(
    lambda expect: not expect.erdma.numa,
    "not applicable: no NUMA node per ERI expected (expect.erdma.numa; L20N only)",
)
def test_eri_numa_node(cluster, node, check):
    ids = cluster.facts(node, check).get(ERDMA_IDENTITY)
    check.judge(judge_erdma_numa(node.name, ids, cluster.expect))


@mark("erdma_gdr")
@not_applicable_when(
    lambda expect: expect.erdma.gdr is False,
    "not applicable: GPUDirect RDMA not supported here (expect.erdma.gdr: false)",
)
@not_applicable_when(
    lambda expect: expect.erdma.gdr is None,
    "not applicable: GPUDirect RDMA not expected (expect.erdma.gdr unset)",
)
def test_gpudirect_rdma_ready(cluster, node, check):
    state = cluster.facts(node, check).get(ERDMA_GDR)
    check.judge(judge_erdma_gdr(node.name, state, cluster.expect))
