"""eRDMA: the expected devices are present, every port is active, both tools agree."""

import pytest

from pytest_hpcnet.probes.erdma import parse_erdma_driver, parse_erdma_identity, parse_gid_tables
from pytest_hpcnet.probes.erdma_gdr import parse_gdr
from pytest_hpcnet.probes.links import parse_interfaces
from pytest_hpcnet.probes.rdma import parse_compat_mode, parse_erdma_module
from pytest_hpcnet.probes.rdma_parsers import parse_ibv_devinfo, parse_rdma_link
from pytest_hpcnet.requirements import rdma
from pytest_hpcnet.requirements.erdma import (
    expected_eris,
    judge_erdma_active_mtu,
    judge_erdma_driver,
    judge_erdma_gdr,
    judge_erdma_gid,
    judge_erdma_identity,
    judge_erdma_numa,
)
from pytest_hpcnet.requirements.registry import mark, not_applicable_when

pytestmark = pytest.mark.static


def expected_devices(cluster, node):
    """(glob, minimum count, where it came from) for this node."""
    rdma = cluster.expect.rdma
    glob = node.rdma.device_glob or rdma.device_glob
    minimum = node.rdma.min_devices if node.rdma.min_devices is not None else rdma.min_devices
    source = "inventory nodes[].rdma" if node.rdma.min_devices is not None else "expect.rdma"
    return glob, minimum, source


def devinfo(cluster, node, check):
    return parse_ibv_devinfo(cluster.facts(node, check).text("ibv_devinfo_v"))


@mark("erdma")
def test_expected_rdma_devices_present(cluster, node, check):
    glob, minimum, source = expected_devices(cluster, node)
    found = devinfo(cluster, node, check)
    check.judge(rdma.judge_devices_present(node.name, found, glob, minimum, source))


@mark("erdma")
def test_rdma_ports_active(cluster, node, check):
    glob, _, _ = expected_devices(cluster, node)
    check.judge(rdma.judge_ports_active(node.name, devinfo(cluster, node, check), glob))


@mark("erdma")
def test_rdma_tools_agree(cluster, node, check):
    facts = cluster.facts(node, check)
    verbs = parse_ibv_devinfo(facts.text("ibv_devinfo_v"))
    links = parse_rdma_link(facts.text("rdma_link"))
    check.judge(rdma.judge_tools_agree(node.name, verbs, links))


@mark("erdma")
@not_applicable_when(
    lambda expect: not expect.rdma.kernel_module,
    "not applicable: no kernel module expected (expect.rdma.kernel_module is null)",
)
def test_erdma_kernel_module_loaded(cluster, node, check):
    module = cluster.expect.rdma.kernel_module
    state = parse_erdma_module(cluster.facts(node, check).text("erdma_module"), module)
    check.judge(rdma.judge_kernel_module(node.name, state, module))


@mark("erdma")
@not_applicable_when(
    lambda expect: expect.rdma.compat_mode is None,
    "not applicable: no compat_mode expected (expect.rdma.compat_mode is unset)",
)
def test_erdma_compat_mode(cluster, node, check):
    wanted = cluster.expect.rdma.compat_mode
    mode = parse_compat_mode(cluster.facts(node, check).text("compat_mode"))
    check.judge(rdma.judge_compat_mode(node.name, mode, wanted))


# -- eRDMA in depth: identity, driver state, port settings of every ERI ------------------


def eri_identities(cluster, node, check):
    ids = parse_erdma_identity(cluster.facts(node, check).text("erdma_identity"))
    if ids.no_devices:
        check.measure("sysfs", "no /sys/class/infiniband", "", None, None, "sysfs")
    return ids


@mark("erdma_identity")
def test_every_eri_present_by_driver(cluster, node, check):
    ids = eri_identities(cluster, node, check)
    verdict = judge_erdma_identity(
        node.name, ids, cluster.expect, node.rdma.device_glob, node.rdma.min_devices
    )
    wanted, source, exact = expected_eris(cluster.expect, node.rdma.min_devices)
    check.measure("eris", verdict.measured, "devices", wanted, "==" if exact else ">=", source)
    for dev in ids.eris():
        check.measure(f"{dev.name} numa_node", dev.numa_node, "", None, None, "sysfs")
    check.judge(verdict)


@mark("erdma_driver")
def test_erdma_driver_state(cluster, node, check):
    driver = parse_erdma_driver(cluster.facts(node, check).text("erdma_driver"))
    e = cluster.expect.erdma
    pin = e.driver_version
    where = f"erdma version ({driver.version_source or 'not reported'})"
    check.measure("version", driver.version, "", pin, "==" if pin else None, where)
    want = None if e.compat_mode is None else str(e.compat_mode)  # unset: reported only
    check.measure("compat_mode", str(driver.compat_mode), "", want, "==" if want else None,
                  "expect.erdma.compat_mode")  # fmt: skip
    for dev, algo in sorted((driver.cc or {}).items()):
        seen = algo or (driver.cc_notes or {}).get(dev, "not readable")
        check.measure(f"{dev} cc", seen, "", e.cc, "==" if e.cc else None, "expect.erdma.cc")
    for dev, rate in sorted((driver.rates or {}).items()):
        # the driver hard-codes "100 Gb/sec (4X EDR)": reported, never a threshold
        check.measure(f"{dev} port rate (nominal)", rate, "", None, None, "sysfs, not a capacity")
    verdict = judge_erdma_driver(node.name, driver, cluster.expect)
    check.judge(verdict)


def _eris(cluster, node, check):
    eris = cluster.facts_campaign.eri_devices(node.name)
    if not eris:
        check.judge(rdma.no_eri(node.name))
    return eris


@mark("erdma_port")
def test_eri_active_mtu_follows_the_interface(cluster, node, check):
    facts = cluster.facts(node, check)
    devinfo = parse_ibv_devinfo(facts.text("ibv_devinfo_v"))
    mtus = {i.name: i.mtu for i in parse_interfaces(facts.text("links")).interfaces if i.mtu}
    eri_identities(cluster, node, check)
    facts.text("rdma_link")  # both sources of each ERI's netdev (sysfs, else rdma link)
    found = cluster.facts_campaign.eri_netdevs(node.name)
    netdev_of = {dev: netdev for dev, (netdev, _) in found.items()}
    eris = _eris(cluster, node, check)
    verdict = judge_erdma_active_mtu(node.name, devinfo, eris, netdev_of, mtus)
    check.measure("active_mtu", "ok" if verdict else "mismatch", "", None, None,
                  "erdma_query_port: 8500 -> 4096, 1400 -> 1024 (S12)")  # fmt: skip
    check.judge(verdict)


@mark("erdma_port")
def test_eri_gid_index_is_the_ipv4_one(cluster, node, check):
    facts = cluster.facts(node, check)
    tables = parse_gid_tables(facts.text("ibv_devinfo_v"))
    eris = _eris(cluster, node, check)
    used = {dev: cluster.facts_campaign.gid_index(node.name, dev) for dev in eris}
    for dev, index in used.items():
        check.measure(f"{dev} gid_index", index, "", None, None, "ibv_devinfo -v (IPv4 GID)")
    facts.whole("addr")  # each ERI's address: a cut listing is not measured, never a failure
    addresses = {dev: cluster.facts_campaign.eri_address(node.name, dev) for dev in eris}
    for dev, own in addresses.items():
        check.measure(f"{dev} address", own.address, "", None, None, own.note)
    verdict = judge_erdma_gid(node.name, tables, eris, used, addresses)
    check.judge(verdict)


@mark("erdma_port")
@not_applicable_when(
    lambda expect: not expect.erdma.numa,
    "not applicable: no NUMA node per ERI expected (expect.erdma.numa; L20N only)",
)
def test_eri_numa_node(cluster, node, check):
    ids = eri_identities(cluster, node, check)
    verdict = judge_erdma_numa(node.name, ids, cluster.expect)
    check.judge(verdict)


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
    state = parse_gdr(cluster.facts(node, check).text("erdma_gdr"))
    check.measure("peer_memory", state.peermem or "none", "", None, None, "/proc/modules")
    check.measure("acs_on_bridges", len(state.acs_on), "", 0, "==", "S14: ACS off for P2P")
    verdict = judge_erdma_gdr(node.name, state, cluster.expect)
    check.judge(verdict)
