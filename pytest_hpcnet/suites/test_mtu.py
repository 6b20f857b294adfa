"""MTU: the data-plane interface carries the expected MTU on every node, end to end."""

import pytest

from pytest_hpcnet.probes.links import erdma_mtu_verdict, mtu_matches, parse_interfaces
from pytest_hpcnet.probes.ping import path_mtu_ok
from pytest_hpcnet.requirements.registry import mark

pytestmark = pytest.mark.static


def data_interface(cluster, node, check):
    interfaces = parse_interfaces(cluster.facts(node, check).text("links"))
    iface = interfaces.get(node.interface)
    assert iface is not None, (
        f"{node.name}: data-plane interface {node.interface!r} not found "
        f"(has: {', '.join(interfaces.names()) or 'none'})"
    )
    return iface


@mark("mtu")
def test_interface_mtu_is_expected(cluster, node, check):
    expected = cluster.expect.mtu
    iface = data_interface(cluster, node, check)
    check.measure("mtu", iface.mtu, "bytes", expected, "==", "expect.mtu")
    verdict = mtu_matches(expected, iface)
    assert verdict.ok, f"{node.name}: {verdict.reason}"


@mark("mtu")
def test_erdma_mtu_rule_for_nccl_ll128(cluster, node, check):
    iface = data_interface(cluster, node, check)
    verdict = erdma_mtu_verdict(iface.mtu, cluster.expect.jumbo_frames)
    assert verdict.ok, f"{node.name}: {verdict.reason}"


@mark("mtu")
def test_mtu_same_on_all_nodes(cluster, check):
    mtus = {}
    for node in cluster.nodes:
        if node.name in cluster.transport.unreachable():
            continue
        iface = parse_interfaces(cluster.facts(node, check).text("links")).get(node.interface)
        mtus[node.name] = iface.mtu if iface else None
    groups = {}
    for name, mtu in mtus.items():
        groups.setdefault(mtu, []).append(name)
    if len(groups) > 1:
        for mtu, names in groups.items():
            if mtu != cluster.expect.mtu:
                check.suspect(*names)
    listing = "; ".join(f"MTU {m}: {', '.join(n)}" for m, n in sorted(groups.items(), key=str))
    assert len(groups) <= 1, f"nodes disagree on the MTU: {listing}"


@mark("path_mtu")
def test_full_mtu_crosses_the_path(cluster, node_pair, check):
    source, target = node_pair
    facts = cluster.pair_facts(source, target, check)
    mtu = cluster.expect.mtu
    verdict = path_mtu_ok(facts.path_mtu, mtu)
    check.measure(
        "path_mtu",
        facts.path_mtu.path_mtu or (mtu if verdict.ok else None),
        "bytes",
        mtu,
        ">=",
        "expect.mtu",
    )
    assert verdict.ok, f"{source.name}->{target.name}: {verdict.reason}"
