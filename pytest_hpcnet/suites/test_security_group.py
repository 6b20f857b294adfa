"""Security groups and network ACLs: required ports open between nodes; listed flows enforced."""

import pytest

from pytest_hpcnet.campaigns.pairs import flow_id, required_flows
from pytest_hpcnet.requirements.registry import mark

pytestmark = pytest.mark.static

MEANING = {
    "refused": "refused (answered with a reset or port unreachable: a REJECT rule or no listener)",
    "timeout": "silently dropped (no answer in time: security group, ACL or firewall DROP)",
}


@mark("security_group")
def test_required_ports_open_between_nodes(cluster, node_pair, check):
    source, target = node_pair
    facts = cluster.pair_facts(source, target, check)
    assert not facts.ports.tool_missing, f"{source.name}: python3 is needed to probe ports"
    closed = []
    required = required_flows(cluster.expect)
    for flow in required:
        result = facts.ports.get(flow.proto, flow.port)
        if result is None:
            closed.append(f"{flow.proto}/{flow.port} not tried")
        elif not result.open:
            if not facts.listener.listening(flow.proto, flow.port):
                closed.append(f"{flow.proto}/{flow.port} could not be listened on at {target.name}")
            else:
                closed.append(
                    f"{flow.proto}/{flow.port} {MEANING.get(result.outcome, result.outcome)}"
                )
    total = len(required)
    check.measure("open_ports", total - len(closed), "ports", total, ">=", "expect.ports")
    assert not closed, f"{source.name}->{target.name} ({facts.target_address}): {'; '.join(closed)}"


@mark("acl")
def test_acl_flow_enforced(cluster, acl_flow, check):
    kind, flow = acl_flow
    subject = f"{flow.protocol}/{flow.port} {flow.source}->{flow.target}"
    facts = cluster.flow_facts(flow_id(kind, flow), check)
    assert facts is not None, f"{kind} flow {subject}: could not be tried (node unreachable?)"
    result = facts.result.get(flow.protocol, flow.port)
    assert result is not None, f"{kind} flow {subject}: no result ({facts.result.problems})"
    check.measure(
        "outcome",
        result.outcome,
        "",
        "open" if kind == "allow" else "refused|timeout",
        "==",
        f"expect.flows.{kind}",
    )
    if kind == "allow":
        assert result.open, (
            f"must-allow flow {subject} is {MEANING.get(result.outcome, result.outcome)}"
        )
    else:
        assert not result.open, f"must-deny flow {subject} connected: the ACL lets it through"
