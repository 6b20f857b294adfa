"""eRDMA: the expected devices are present, every port is active, both tools agree."""

import pytest

from pytest_hpcnet.probes.rdma import (
    compare_sources,
    match_devices,
    parse_compat_mode,
    parse_erdma_module,
)
from pytest_hpcnet.probes.rdma_parsers import parse_ibv_devinfo, parse_rdma_link
from pytest_hpcnet.requirements.registry import mark

pytestmark = [pytest.mark.static, mark("erdma")]


def expected_devices(cluster, node):
    """(glob, minimum count, where it came from) for this node."""
    rdma = cluster.expect.rdma
    glob = node.rdma.device_glob or rdma.device_glob
    minimum = node.rdma.min_devices if node.rdma.min_devices is not None else rdma.min_devices
    source = "inventory nodes[].rdma" if node.rdma.min_devices is not None else "expect.rdma"
    return glob, minimum, source


def devinfo(cluster, node, check):
    found = parse_ibv_devinfo(cluster.facts(node, check).text("ibv_devinfo"))
    assert not found.tool_missing, f"{node.name}: ibv_devinfo is not installed (rdma-core)"
    assert not found.incomplete, f"{node.name}: ibv_devinfo output: {found.incomplete}"
    return found


def test_expected_rdma_devices_present(cluster, node, check):
    glob, minimum, source = expected_devices(cluster, node)
    found = devinfo(cluster, node, check)
    matching = match_devices(found, glob)
    check.measure("devices", len(matching), "devices", minimum, ">=", source)
    seen = ", ".join(found.names()) or ("none: No IB devices found" if found.no_devices else "none")
    assert len(matching) >= minimum, (
        f"{node.name}: {len(matching)} RDMA devices match {glob!r}, expected at least {minimum} "
        f"(ibv_devinfo shows {seen})"
    )


def test_rdma_ports_active(cluster, node, check):
    glob, _, _ = expected_devices(cluster, node)
    matching = match_devices(devinfo(cluster, node, check), glob)
    assert matching, f"{node.name}: no RDMA device matches {glob!r}, so no port can be active"
    inactive = [
        f"{dev.name} port {port.number} is {port.reported_state or 'in an unknown state'}"
        for dev in matching
        for port in dev.ports
        if port.state != "ACTIVE"
    ]
    check.measure("inactive_ports", len(inactive), "ports", 0, "==", "eRDMA ports must be active")
    assert not inactive, f"{node.name}: {'; '.join(inactive)}"
    unreported = [
        f"{dev.name} port {port.number}"
        for dev in matching
        for port in dev.ports
        if port.active_mtu is None or port.link_layer is None
    ]
    assert not unreported, f"{node.name}: no active MTU or link layer reported for {unreported}"


def test_rdma_tools_agree(cluster, node, check):
    facts = cluster.facts(node, check)
    verbs = parse_ibv_devinfo(facts.text("ibv_devinfo"))
    links = parse_rdma_link(facts.text("rdma_link"))
    if verbs.tool_missing or links.tool_missing:
        pytest.skip(f"{node.name}: ibv_devinfo or rdma (iproute2) not installed")
    disagreements = compare_sources(verbs, links)
    assert not disagreements, f"{node.name}: {'; '.join(disagreements)}"


def test_erdma_kernel_module_loaded(cluster, node, check):
    module = cluster.expect.rdma.kernel_module
    if not module:
        pytest.skip("not applicable: no kernel module expected (expect.rdma.kernel_module is null)")
    state = parse_erdma_module(cluster.facts(node, check).text("erdma_module"), module)
    check.measure("module_loaded", str(state.loaded), "", "True", "==", "expect.rdma.kernel_module")
    assert state.loaded, f"{node.name}: kernel module {module} is not loaded"


def test_erdma_compat_mode(cluster, node, check):
    wanted = cluster.expect.rdma.compat_mode
    if wanted is None:
        pytest.skip("not applicable: no compat_mode expected (expect.rdma.compat_mode is unset)")
    mode = parse_compat_mode(cluster.facts(node, check).text("compat_mode"))
    check.measure("compat_mode", mode.raw, "", wanted, "==", "expect.rdma.compat_mode")
    assert mode.raw == wanted, f"{node.name}: compat_mode is {mode.raw!r}, expected {wanted!r}"
