"""Security groups and network ACLs: required ports open between nodes; listed flows enforced
(judges: requirements/network.py)."""

import pytest

from pytest_hpcnet.campaigns.pairs.campaign import flow_id
from pytest_hpcnet.requirements.network import judge_acl_flow, judge_required_ports
from pytest_hpcnet.requirements.registry import mark

pytestmark = pytest.mark.static


@mark("security_group")
def test_required_ports_open_between_nodes(cluster, node_pair, check):
    source, target = node_pair
    facts = cluster.pair_facts(source, target, check)
    verdict = judge_required_ports(facts.ports, facts.listener, cluster.expect)
    check.judge(verdict, context=f"{source.name}->{target.name} ({facts.target_address})")


@mark("acl")
def test_acl_flow_enforced(cluster, acl_flow, check):
    kind, flow = acl_flow
    facts = cluster.flow_facts(flow_id(kind, flow), check)
    result, listener = (facts.result, facts.listener) if facts is not None else (None, None)
    verdict = judge_acl_flow(kind, flow.protocol, flow.port, result, listener)
    subject = f"{flow.protocol}/{flow.port} {flow.source}->{flow.target}"
    check.judge(verdict, context=f"{kind} flow {subject}")
