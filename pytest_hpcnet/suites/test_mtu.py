"""MTU: the data-plane interface, and each ERI's own interface (erdma_1's eth1: an ERI is
an ENI), carry the expected MTU on every node, end to end."""

import pytest

from pytest_hpcnet.probes.erdma import ERDMA_IDENTITY
from pytest_hpcnet.probes.links import LINKS
from pytest_hpcnet.probes.rdma_parsers import IBV_DEVINFO, RDMA_LINK
from pytest_hpcnet.requirements import mtu
from pytest_hpcnet.requirements.registry import mark

pytestmark = pytest.mark.static


def planned(cluster, node, check):
    """(`ip -s link`, the ERIs the node's checks must cover), the ERI listing and each
    ERI's netdev named as read."""
    facts = cluster.facts(node, check)
    links = facts.get(LINKS)
    for section in (ERDMA_IDENTITY, IBV_DEVINFO, RDMA_LINK):
        facts.get_or_none(section)
    return links, cluster.facts_campaign.planned_eris(node.name)


@mark("mtu")
def test_interface_mtu_is_expected(cluster, node, check):
    links, eris = planned(cluster, node, check)
    expected = cluster.expect.mtu
    check.judge(mtu.judge_node_mtu(node.name, node.interface, links, eris, expected))


@mark("mtu")
def test_erdma_mtu_rule_for_nccl_ll128(cluster, node, check):
    links, eris = planned(cluster, node, check)
    jumbo = cluster.expect.jumbo_frames
    check.judge(mtu.judge_node_ll128_rule(node.name, node.interface, links, eris, jumbo))


@mark("mtu")
def test_mtu_same_on_all_nodes(cluster, check):
    found = {
        node.name: cluster.facts(node, check).get(LINKS).get(node.interface)
        for node in cluster.reachable_nodes()
    }
    verdict = mtu.judge_same_interface_mtu(found, cluster.expect.mtu)
    check.suspect(*verdict.extra.get("suspects", ()))
    check.judge(verdict)


@mark("path_mtu")
def test_full_mtu_crosses_the_path(cluster, node_pair, check):
    source, target = node_pair
    facts = cluster.pair_facts(source, target, check)
    eris = cluster.eri_path_mtu(source, target, check)  # each planned ERI, own interface
    verdict = mtu.judge_pair_path_mtu(facts.path_mtu, eris, cluster.expect.mtu)
    check.judge(verdict, f"{source.name}->{target.name}")
