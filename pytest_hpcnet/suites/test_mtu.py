"""MTU: the data-plane interface, and each ERI's own interface (erdma_1's eth1: an ERI is
an ENI), carry the expected MTU on every node, end to end."""

import pytest

from pytest_hpcnet.probes.links import Verdict, erdma_mtu_verdict, mtu_matches, parse_interfaces
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


def eri_interfaces(cluster, node, check):
    """(label, interface or None) of each ERI's own netdev other than the data-plane one:
    `eth1 (erdma_1)` on a two-ERI node; none where the netdevs are unknown."""
    interfaces = parse_interfaces(cluster.facts(node, check).text("links"))
    netdevs = cluster.facts_campaign.eri_netdevs(node.name)
    out, seen = [], {node.interface}
    for dev in cluster.facts_campaign.eri_devices(node.name):
        netdev = netdevs.get(dev, (None, None))[0]
        if netdev and netdev not in seen:
            seen.add(netdev)
            out.append((f"{netdev} ({dev})", interfaces.get(netdev)))
    return out


def _each_interface(cluster, node, check, judge) -> list[str]:
    """The data-plane interface and every ERI's own, through `judge(iface) -> Verdict`:
    the failing ones' reasons."""
    bad = []
    primary = judge(data_interface(cluster, node, check))
    if not primary.ok:
        bad.append(primary.reason)
    for label, iface in eri_interfaces(cluster, node, check):
        if iface is None:
            bad.append(f"{label}: interface not in ip link")
            continue
        verdict = judge(iface)
        if not verdict.ok:
            bad.append(f"{label}: {verdict.reason.removeprefix(f'{iface.name}: ')}")
    return bad


@mark("mtu")
def test_interface_mtu_is_expected(cluster, node, check):
    expected = cluster.expect.mtu
    iface = data_interface(cluster, node, check)
    check.measure("mtu", iface.mtu, "bytes", expected, "==", "expect.mtu")
    for label, other in eri_interfaces(cluster, node, check):
        mtu = other.mtu if other else None
        check.measure(f"{label} mtu", mtu, "bytes", expected, "==", "expect.mtu")
    bad = _each_interface(cluster, node, check, lambda i: mtu_matches(expected, i))
    assert not bad, f"{node.name}: {'; '.join(bad)}"


@mark("mtu")
def test_erdma_mtu_rule_for_nccl_ll128(cluster, node, check):
    jumbo = cluster.expect.jumbo_frames

    def judge(iface):
        verdict = erdma_mtu_verdict(iface.mtu, jumbo)
        return Verdict(verdict.ok, f"{iface.name}: {verdict.reason}")

    bad = _each_interface(cluster, node, check, judge)
    assert not bad, f"{node.name}: {'; '.join(bad)}"


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
    bad = [] if verdict.ok else [verdict.reason]
    for eri in cluster.eri_path_mtu(source, target, check):  # each ERI's own interface
        label = f"{eri.path.device} ({eri.path.netdev})"
        own = path_mtu_ok(eri.result, mtu)
        seen = eri.result.path_mtu or (mtu if own.ok else None)
        check.measure(f"{label} path_mtu", seen, "bytes", mtu, ">=", "expect.mtu")
        if not own.ok:
            bad.append(f"{label} to {eri.path.target_address}: {own.reason}")
    assert not bad, f"{source.name}->{target.name}: {'; '.join(bad)}"
