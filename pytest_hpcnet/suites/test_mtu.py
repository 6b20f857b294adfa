"""MTU: the data-plane interface, and each ERI's own interface (erdma_1's eth1: an ERI is
an ENI), carry the expected MTU on every node, end to end."""

import pytest

from pytest_hpcnet.probes.links import parse_interfaces
from pytest_hpcnet.requirements import mtu
from pytest_hpcnet.requirements.registry import mark
from pytest_hpcnet.requirements.verdict import combine

pytestmark = pytest.mark.static


def interfaces_of(cluster, node, check):
    """(data-plane interface or None, [(label, ERI interface or None)], [(ERI, why)]) of
    the node: each planned ERI's own netdev other than the data-plane one (`eth1
    (erdma_1)` on a two-ERI node), and each planned ERI whose netdev is unknown (netdev
    not named, listing cut, not listed), which the check names not measured."""
    facts = cluster.facts(node, check)
    interfaces = parse_interfaces(facts.text("links"))
    for section in ("erdma_identity", "ibv_devinfo_v", "rdma_link"):
        facts.whole(section)  # the ERI listing and each ERI's netdev (named as read)
    eris, unmeasured, seen = [], [], {node.interface}
    for eri in cluster.facts_campaign.planned_eris(node.name):
        if eri.unknown:
            unmeasured.append((eri.device, eri.unknown))
        elif eri.netdev not in seen:
            seen.add(eri.netdev)
            eris.append((f"{eri.netdev} ({eri.device})", interfaces.get(eri.netdev)))
    return interfaces.get(node.interface), eris, unmeasured


@mark("mtu")
def test_interface_mtu_is_expected(cluster, node, check):
    expected = cluster.expect.mtu
    primary, eris, unmeasured = interfaces_of(cluster, node, check)
    labels = {iface.name: label for label, iface in eris if iface is not None}
    verdict = mtu.judge_each_interface(
        node.name,
        primary,
        node.interface,
        eris,
        lambda iface: mtu.judge_interface_mtu(expected, iface, labels.get(iface.name, "")),
        unmeasured,
    )
    check.judge(verdict)


@mark("mtu")
def test_erdma_mtu_rule_for_nccl_ll128(cluster, node, check):
    jumbo = cluster.expect.jumbo_frames
    primary, eris, unmeasured = interfaces_of(cluster, node, check)
    check.judge(
        mtu.judge_each_interface(
            node.name,
            primary,
            node.interface,
            eris,
            lambda i: mtu.judge_erdma_mtu_rule(i, jumbo),
            unmeasured,
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
    for eri in cluster.eri_path_mtu(source, target, check):  # each planned ERI, own interface
        label = f"{eri.path.device} ({eri.path.netdev})" if eri.path.netdev else eri.path.device
        if eri.path.unmeasured:  # named: never left out
            why = f"{eri.path.device}: {eri.path.unmeasured}"
            verdicts.append(mtu.path_not_measured(label, why, expected))
            continue
        own = mtu.judge_path_mtu(eri.result, expected, label)
        verdicts.append(own.with_reason(f"{label} to {eri.path.target_address}: {own.reason}"))
    found = combine(verdicts)
    bad = mtu.off_reasons(verdicts)
    check.judge(found if found.ok else found.with_reason(bad), f"{source.name}->{target.name}")
