"""MTU: the data-plane interface, and each ERI's own interface (erdma_1's eth1: an ERI is
an ENI), carry the expected MTU on every node, end to end."""

import pytest

from pytest_hpcnet.probes.links import parse_interfaces
from pytest_hpcnet.requirements import mtu
from pytest_hpcnet.requirements.registry import mark
from pytest_hpcnet.requirements.verdict import combine

pytestmark = pytest.mark.static


def interfaces_of(cluster, node, check):
    """(data-plane interface or None, [(label, ERI interface or None)]) of the node: each
    ERI's own netdev other than the data-plane one (`eth1 (erdma_1)` on a two-ERI node)."""
    interfaces = parse_interfaces(cluster.facts(node, check).text("links"))
    netdevs = cluster.facts_campaign.eri_netdevs(node.name)
    eris, seen = [], {node.interface}
    for dev in cluster.facts_campaign.eri_devices(node.name):
        netdev = netdevs.get(dev, (None, None))[0]
        if netdev and netdev not in seen:
            seen.add(netdev)
            eris.append((f"{netdev} ({dev})", interfaces.get(netdev)))
    return interfaces.get(node.interface), eris


@mark("mtu")
def test_interface_mtu_is_expected(cluster, node, check):
    expected = cluster.expect.mtu
    primary, eris = interfaces_of(cluster, node, check)
    labels = {iface.name: label for label, iface in eris if iface is not None}
    verdict = mtu.judge_each_interface(
        node.name,
        primary,
        node.interface,
        eris,
        lambda iface: mtu.judge_interface_mtu(expected, iface, labels.get(iface.name, "")),
    )
    check.judge(verdict)


@mark("mtu")
def test_erdma_mtu_rule_for_nccl_ll128(cluster, node, check):
    jumbo = cluster.expect.jumbo_frames
    primary, eris = interfaces_of(cluster, node, check)
    check.judge(
        mtu.judge_each_interface(
            node.name, primary, node.interface, eris, lambda i: mtu.judge_erdma_mtu_rule(i, jumbo)
        )
    )


@mark("mtu")
def test_mtu_same_on_all_nodes(cluster, check):
    mtus = {}
    for node in cluster.reachable_nodes():
        iface = parse_interfaces(cluster.facts(node, check).text("links")).get(node.interface)
        mtus[node.name] = iface.mtu if iface else None
    verdict = mtu.judge_mtu_same(mtus, cluster.expect.mtu)
    check.suspect(*verdict.extra.get("suspects", ()))
    check.judge(verdict)


@mark("path_mtu")
def test_full_mtu_crosses_the_path(cluster, node_pair, check):
    source, target = node_pair
    facts = cluster.pair_facts(source, target, check)
    expected = cluster.expect.mtu
    verdicts = [mtu.judge_path_mtu(facts.path_mtu, expected)]
    for eri in cluster.eri_path_mtu(source, target, check):  # each ERI's own interface
        label = f"{eri.path.device} ({eri.path.netdev})"
        own = mtu.judge_path_mtu(eri.result, expected, label)
        verdicts.append(own.with_reason(f"{label} to {eri.path.target_address}: {own.reason}"))
    found = combine(verdicts)
    bad = "; ".join(v.reason for v in verdicts if not v.ok)
    check.judge(found if found.ok else found.with_reason(bad), f"{source.name}->{target.name}")
