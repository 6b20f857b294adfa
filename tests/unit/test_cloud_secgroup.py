"""Hand-written cases for every documented security-group semantic."""

from __future__ import annotations

import json

import pytest

from pytest_hpcnet.cloud.rules import Direction, Flow, Policy
from pytest_hpcnet.cloud.secgroup import (
    SecurityGroupConfigError,
    evaluate_flow,
    evaluate_side,
    rule_matches,
)
from pytest_hpcnet.cloud.secgroup_model import security_group_from_api

SRC = "10.0.1.10"
DST = "10.0.2.20"


def permission(direction="ingress", protocol="TCP", ports="22/22", policy="Accept", priority=1,
               **peer):  # fmt: skip
    """A `Permissions.Permission[]` item; `peer` holds SourceCidrIp, DestGroupId, ..."""
    item = {
        "Direction": direction,
        "IpProtocol": protocol,
        "PortRange": ports,
        "Policy": policy,
        "Priority": str(priority),
        "NicType": "intranet",
    }
    peer_keys = ("SourceCidrIp", "SourceGroupId", "SourcePrefixListId")
    if direction == "egress":
        peer_keys = ("DestCidrIp", "DestGroupId", "DestPrefixListId")
    if not any(key in peer for key in peer_keys):
        item[peer_keys[0]] = "0.0.0.0/0"
    item.update(peer)
    return item


def group(group_id, *permissions, inner="Drop", group_type=None):
    body = {
        "SecurityGroupId": group_id,
        "InnerAccessPolicy": inner,
        "Permissions": {"Permission": list(permissions)},
    }
    return security_group_from_api(body, group_type=group_type)


def tcp(port, src_groups=("sg-src",), dst_groups=("sg-dst",), src=SRC, dst=DST):
    return Flow(src, dst, "TCP", port, src_groups=src_groups, dst_groups=dst_groups)


def ingress(flow, *groups, **options):
    return evaluate_side(flow, Direction.INGRESS, list(groups), **options)


def egress(flow, *groups, **options):
    return evaluate_side(flow, Direction.EGRESS, list(groups), **options)


# -- priority and tie-breaking ---------------------------------------------------------


@pytest.mark.parametrize("accept_first", [True, False])
def test_drop_beats_accept_at_equal_priority_whatever_the_order(accept_first):
    accept = permission(policy="Accept", priority=5)
    drop = permission(policy="Drop", priority=5, SourceCidrIp=f"{SRC}/32")
    ordered = (accept, drop) if accept_first else (drop, accept)
    decision = ingress(tcp(22), group("sg-dst", *ordered))
    assert not decision.accepted
    assert decision.rule.policy is Policy.DROP
    assert decision.rule.priority == 5


def test_lower_priority_number_wins_over_drop():
    decision = ingress(
        tcp(22),
        group(
            "sg-dst",
            permission(policy="Drop", priority=2),
            permission(policy="Accept", priority=1, SourceCidrIp="10.0.1.0/24"),
        ),
    )
    assert decision.accepted
    assert decision.rule.priority == 1


def test_lower_priority_number_wins_over_accept():
    decision = ingress(
        tcp(22),
        group(
            "sg-dst",
            permission(policy="Accept", priority=100),
            permission(policy="Drop", priority=99, SourceCidrIp="10.0.0.0/8"),
        ),
    )
    assert not decision.accepted
    assert decision.rule.priority == 99


# -- internal access policy ------------------------------------------------------------


def test_inner_access_accept_lets_members_talk_with_no_rule():
    shared = group("sg-a", inner="Accept")
    flow = tcp(8080, src_groups={"sg-a"}, dst_groups={"sg-a"})
    verdict = evaluate_flow(flow, [shared])
    assert verdict.accepted
    assert verdict.ingress.rule == "inner access Accept in sg-a"
    assert verdict.egress.rule == "inner access Accept in sg-a"
    assert not verdict.ingress.by_rule


def test_inner_access_accept_overrides_a_matching_drop_rule():
    shared = group("sg-a", permission(policy="Drop", priority=1), inner="Accept")
    decision = ingress(tcp(22, src_groups={"sg-a"}, dst_groups={"sg-a"}), shared)
    assert decision.accepted
    assert decision.rule == "inner access Accept in sg-a"


def test_inner_access_accept_does_not_cover_non_members():
    shared = group("sg-a", inner="Accept")
    decision = ingress(tcp(22, src_groups={"sg-other"}, dst_groups={"sg-a"}), shared)
    assert not decision.accepted
    assert "default ingress deny" in decision.rule


def test_inner_access_drop_isolates_members_by_default():
    isolated = group("sg-a", inner="Drop")
    decision = ingress(tcp(22, src_groups={"sg-a"}, dst_groups={"sg-a"}), isolated)
    assert not decision.accepted
    assert decision.rule == "default ingress deny (basic security group)"


def test_inner_access_drop_yields_to_a_custom_rule():
    isolated = group("sg-a", permission(SourceGroupId="sg-a", priority=7), inner="Drop")
    decision = ingress(tcp(22, src_groups={"sg-a"}, dst_groups={"sg-a"}), isolated)
    assert decision.accepted
    assert decision.rule.source_group_id == "sg-a"


def test_one_shared_accept_group_is_enough_when_another_isolates():
    # ECS use case "network isolation within a basic security group": isolation has
    # the lowest priority, so instances in G1 (isolated) and G2 (accept) communicate.
    g1 = group("sg-g1", inner="Drop")
    g2 = group("sg-g2", inner="Accept")
    flow = tcp(22, src_groups={"sg-g1", "sg-g2"}, dst_groups={"sg-g1", "sg-g2"})
    assert evaluate_flow(flow, [g1, g2]).accepted


def test_enterprise_groups_never_have_inner_access():
    advanced = group("sg-e", inner="Accept", group_type="enterprise")
    decision = ingress(tcp(22, src_groups={"sg-e"}, dst_groups={"sg-e"}), advanced)
    assert not decision.accepted


# -- peers -------------------------------------------------------------------------------


def test_group_member_peer_matches_only_members():
    dst = group("sg-dst", permission(ports="-1/-1", protocol="ALL", SourceGroupId="sg-web"))
    assert ingress(tcp(443, src_groups={"sg-web"}), dst).accepted
    assert not ingress(tcp(443, src_groups={"sg-db"}), dst).accepted
    assert not ingress(tcp(443, src_groups=()), dst).accepted


def test_egress_group_peer_is_the_destination_group():
    src = group("sg-src", permission("egress", policy="Drop", DestGroupId="sg-dst"))
    assert not egress(tcp(22, dst_groups={"sg-dst"}), src).accepted
    assert egress(tcp(22, dst_groups={"sg-else"}), src).accepted  # default egress accept


def test_prefix_list_peer():
    dst = group("sg-dst", permission(SourcePrefixListId="pl-office"))
    prefix_lists = {"pl-office": ["192.168.10.0/24", "10.0.1.0/28"]}
    assert ingress(tcp(22), dst, prefix_lists=prefix_lists).accepted
    decision = ingress(tcp(22, src="10.0.1.99"), dst, prefix_lists=prefix_lists)
    assert not decision.accepted


def test_unknown_prefix_list_is_an_error_not_a_guess():
    dst = group("sg-dst", permission(SourcePrefixListId="pl-missing"))
    with pytest.raises(SecurityGroupConfigError, match="pl-missing"):
        ingress(tcp(22), dst, prefix_lists={})


def test_cidr_peer_must_contain_the_peer_address():
    dst = group("sg-dst", permission(SourceCidrIp="10.0.1.0/25"))
    assert ingress(tcp(22, src="10.0.1.127"), dst).accepted
    assert not ingress(tcp(22, src="10.0.1.128"), dst).accepted


def test_ipv4_cidr_never_matches_an_ipv6_peer():
    dst = group("sg-dst", permission(SourceCidrIp="0.0.0.0/0"))
    assert not ingress(tcp(22, src="2001:db8::1", dst="2001:db8::2"), dst).accepted


def test_quintuple_rule_narrows_the_local_address():
    dst = group("sg-dst", permission(SourceCidrIp="0.0.0.0/0", DestCidrIp="10.0.2.0/28"))
    assert ingress(tcp(22, dst="10.0.2.5"), dst).accepted
    assert not ingress(tcp(22, dst="10.0.2.20"), dst).accepted


def test_source_port_range_of_a_quintuple_rule():
    dst = group("sg-dst", permission(SourcePortRange="1000/2000"))
    inside = Flow(SRC, DST, "TCP", 22, src_port=1500, src_groups={"a"}, dst_groups={"b"})
    outside = Flow(SRC, DST, "TCP", 22, src_port=3000, src_groups={"a"}, dst_groups={"b"})
    unknown = Flow(SRC, DST, "TCP", 22, src_groups={"a"}, dst_groups={"b"})
    assert ingress(inside, dst).accepted
    assert not ingress(outside, dst).accepted
    assert not ingress(unknown, dst).accepted
    # An unknown client port could be in a Drop rule's range: it never opens the port.
    guarded = group(
        "sg-dst",
        permission(priority=50, SourceCidrIp="0.0.0.0/0"),
        permission(policy="Drop", SourcePortRange="1000/2000"),
    )
    assert not ingress(unknown, guarded).accepted
    assert ingress(outside, guarded).accepted


def test_port_range_list_is_resolved_or_refused():
    body = {
        "SecurityGroupId": "sg-dst",
        "Permissions": {
            "Permission": [
                {
                    "Direction": "ingress",
                    "IpProtocol": "TCP",
                    "PortRangeListId": "prl-1",
                    "SourceCidrIp": "0.0.0.0/0",
                    "Policy": "Accept",
                    "Priority": "1",
                }
            ]
        },
    }
    dst = security_group_from_api(body)
    lists = {"prl-1": ["80/80", "443/443"]}
    assert ingress(tcp(443), dst, port_range_lists=lists).accepted
    assert not ingress(tcp(22), dst, port_range_lists=lists).accepted
    with pytest.raises(SecurityGroupConfigError, match="prl-1"):
        ingress(tcp(443), dst)


# -- several groups per instance ---------------------------------------------------------


def test_rules_of_all_groups_are_pooled_drop_wins_tie_across_groups():
    allow = group("sg-1", permission(policy="Accept", priority=1))
    deny = group("sg-2", permission(policy="Drop", priority=1, SourceCidrIp=f"{SRC}/32"))
    flow = tcp(22, src_groups=(), dst_groups={"sg-1", "sg-2"})
    verdict = evaluate_flow(flow, [allow, deny])
    assert not verdict.ingress.accepted
    assert verdict.ingress.rule.security_group_id == "sg-2"


def test_rules_of_all_groups_are_pooled_priority_across_groups():
    deny = group("sg-1", permission(policy="Drop", priority=10))
    allow = group("sg-2", permission(policy="Accept", priority=5))
    verdict = evaluate_flow(tcp(22, src_groups=(), dst_groups={"sg-1", "sg-2"}), [deny, allow])
    assert verdict.ingress.accepted
    assert verdict.ingress.rule.security_group_id == "sg-2"


def test_mixed_basic_and_enterprise_groups_are_refused():
    basic = group("sg-b")
    advanced = group("sg-e", group_type="enterprise")
    with pytest.raises(SecurityGroupConfigError, match="mixed"):
        ingress(tcp(22), basic, advanced)


# -- ports and protocols -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("ports", "port", "accepted"),
    [
        ("1/200", 1, True),
        ("1/200", 200, True),
        ("1/200", 201, False),
        ("22/22", 22, True),
        ("22/22", 23, False),
        ("-1/-1", 65535, True),
    ],
)
def test_port_ranges(ports, port, accepted):
    dst = group("sg-dst", permission(ports=ports))
    assert ingress(tcp(port), dst).accepted is accepted


@pytest.mark.parametrize(
    ("rule_protocol", "flow_protocol", "accepted"),
    [
        ("ALL", "UDP", True),
        ("ALL", "ICMP", True),
        ("ALL", "GRE", True),
        ("TCP", "UDP", False),
        ("UDP", "UDP", True),
        ("ICMP", "ICMP", True),
        ("ICMP", "TCP", False),
        ("GRE", "GRE", True),
    ],
)
def test_protocols(rule_protocol, flow_protocol, accepted):
    ports = "1/65535" if rule_protocol in ("TCP", "UDP") else "-1/-1"
    dst = group("sg-dst", permission(protocol=rule_protocol, ports=ports))
    port = 53 if flow_protocol in ("TCP", "UDP") else None
    flow = Flow(SRC, DST, flow_protocol, port, src_groups={"a"}, dst_groups={"sg-dst"})
    assert ingress(flow, dst).accepted is accepted


def test_rule_matches_is_direction_agnostic_about_the_peer():
    (rule,) = group("sg", permission("egress", DestCidrIp=f"{DST}/32")).rules
    assert rule_matches(rule, tcp(22))
    assert not rule_matches(rule, tcp(22, dst="10.0.2.21"))


# -- defaults and the flow verdict -------------------------------------------------------


def test_defaults_of_basic_groups():
    basic = group("sg-dst")
    flow = tcp(22)
    assert ingress(flow, basic).rule == "default ingress deny (basic security group)"
    decision = egress(flow, basic)
    assert decision.accepted
    assert decision.rule == "default egress accept (basic security group)"


def test_defaults_of_enterprise_groups():
    advanced = group("sg-e", group_type="enterprise")
    assert not ingress(tcp(22), advanced).accepted
    decision = egress(tcp(22), advanced)
    assert not decision.accepted
    assert decision.rule == "default egress deny (enterprise security group)"


def test_flow_needs_egress_and_ingress():
    src = group("sg-src", permission("egress", ports="22/22", policy="Drop"))
    dst = group("sg-dst", permission(ports="22/22"))
    verdict = evaluate_flow(tcp(22), [src, dst])
    assert verdict.ingress.accepted
    assert not verdict.egress.accepted
    assert not verdict.accepted
    assert "denied" in str(verdict)
    assert evaluate_flow(tcp(23), [src, dst]).accepted is False  # ingress default deny
    open_src = group("sg-src")
    assert evaluate_flow(tcp(22), [open_src, dst]).accepted


def test_endpoint_without_groups_is_not_judged():
    dst = group("sg-dst", permission(SourceCidrIp="203.0.113.0/24"))
    flow = Flow("203.0.113.7", DST, "TCP", 22, dst_groups={"sg-dst"})
    verdict = evaluate_flow(flow, {"sg-dst": dst})
    assert verdict.accepted
    assert "no security group" in verdict.egress.rule


def test_unknown_group_is_an_error():
    with pytest.raises(SecurityGroupConfigError, match="sg-dst"):
        evaluate_flow(tcp(22), [group("sg-src")])


def test_fixture_group_end_to_end(fixture_text):
    body = json.loads(fixture_text("cloud", "describe_security_group_attribute.json"))
    gpu = security_group_from_api(body)
    mgmt = group("sg-mgmt")
    catalog = [gpu, mgmt]
    lists = {"pl-office": ["192.168.10.0/24"]}

    def verdict(src, port, src_groups=("sg-mgmt",), protocol="TCP"):
        flow = Flow(src, DST, protocol, port, src_groups=src_groups, dst_groups={"sg-gpu"})
        return evaluate_flow(flow, catalog, prefix_lists=lists)

    assert verdict("10.0.1.10", 22).accepted  # sgr-ssh
    assert verdict("10.66.1.1", 22).ingress.rule.rule_id == "sgr-block-bad"  # drop at 1
    assert verdict("172.16.0.1", 9999).ingress.rule.rule_id == "sgr-mgmt"  # group peer
    assert verdict("192.168.10.5", 80, src_groups=()).ingress.rule.rule_id == "sgr-office"
    assert not verdict("192.168.10.5", 443, src_groups=()).accepted
    smtp = Flow(DST, "198.51.100.1", "TCP", 25, src_groups={"sg-gpu"})
    assert evaluate_flow(smtp, catalog).egress.rule.rule_id == "sgr-egress-drop-smtp"
