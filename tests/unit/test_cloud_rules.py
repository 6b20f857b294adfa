"""Parsing of Alibaba Cloud security group and network ACL API documents."""

from __future__ import annotations

import ipaddress
import json

import pytest

from pytest_hpcnet.cloud.nacl_model import network_acl_from_api
from pytest_hpcnet.cloud.rules import (
    ALL_PORTS,
    CloudModelError,
    Direction,
    Flow,
    Policy,
    PortRange,
    Protocol,
)
from pytest_hpcnet.cloud.secgroup_model import security_group_from_api


@pytest.fixture
def sg_body(fixture_text):
    return json.loads(fixture_text("cloud", "describe_security_group_attribute.json"))


@pytest.fixture
def acl_body(fixture_text):
    return json.loads(fixture_text("cloud", "describe_network_acl_attributes.json"))


@pytest.mark.parametrize(
    ("text", "inside", "outside"),
    [
        ("22/22", [22], [21, 23, None]),
        ("1/200", [1, 100, 200], [201, 65535, None]),
        ("-1/-1", [1, 22, 65535, None], []),
        ("1024/65535", [1024, 65535], [1023]),
    ],
)
def test_port_range_contains(text, inside, outside):
    port_range = PortRange.parse(text)
    assert all(port_range.contains(port) for port in inside)
    assert not any(port_range.contains(port) for port in outside)


def test_all_ports_is_the_singleton_and_prints_back():
    assert PortRange.parse("-1/-1") is ALL_PORTS
    assert str(PortRange.parse("1/200")) == "1/200"
    assert ALL_PORTS.bounds() == (1, 65535)


@pytest.mark.parametrize("text", ["0/5", "5/1", "1/65536", "22", "a/b", "-1/5", ""])
def test_port_range_rejects_malformed(text):
    with pytest.raises(CloudModelError):
        PortRange.parse(text)


@pytest.mark.parametrize(
    ("text", "protocol"),
    [
        ("ALL", Protocol.ALL),
        ("all", Protocol.ALL),
        ("tcp", Protocol.TCP),
        ("UDP", Protocol.UDP),
        ("ICMPv6", Protocol.ICMPV6),
        ("gre", Protocol.GRE),
    ],
)
def test_protocol_parse_is_case_insensitive(text, protocol):
    assert Protocol.parse(text) is protocol


def test_protocol_parse_rejects_unknown():
    with pytest.raises(CloudModelError):
        Protocol.parse("SCTP")


def test_security_group_from_api_reads_every_documented_field(sg_body):
    group = security_group_from_api(sg_body)
    assert group.security_group_id == "sg-gpu"
    assert group.name == "gpu-nodes"
    assert group.vpc_id.startswith("vpc-")
    assert group.inner_access_policy is Policy.ACCEPT
    assert not group.is_enterprise
    assert len(group.rules) == 6
    by_id = {rule.rule_id: rule for rule in group.rules}

    ssh = by_id["sgr-ssh"]
    assert ssh.direction is Direction.INGRESS
    assert ssh.protocol is Protocol.TCP
    assert ssh.port_range == PortRange(22, 22)
    assert ssh.priority == 1
    assert ssh.policy is Policy.ACCEPT
    assert ssh.source_cidr == ipaddress.ip_network("10.0.0.0/8")
    assert ssh.source_group_id is None  # empty strings read as absent
    assert ssh.dest_cidr is None
    assert ssh.security_group_id == "sg-gpu"

    assert by_id["sgr-mgmt"].source_group_id == "sg-mgmt"
    assert by_id["sgr-mgmt"].port_range.is_all
    assert by_id["sgr-office"].source_prefix_list_id == "pl-office"
    assert by_id["sgr-block-bad"].policy is Policy.DROP
    egress = by_id["sgr-egress-drop-smtp"]
    assert egress.direction is Direction.EGRESS
    assert egress.dest_cidr == ipaddress.ip_network("0.0.0.0/0")
    ping6 = by_id["sgr-ping6"]
    assert ping6.protocol is Protocol.ICMPV6
    assert ping6.source_cidr == ipaddress.ip_network("2001:db8::/32")
    assert ping6.policy is Policy.ACCEPT  # lower-case "accept" accepted
    assert group.rules_in(Direction.EGRESS) == (egress,)


def test_security_group_pages_are_concatenated(sg_body):
    first = dict(sg_body, Permissions={"Permission": sg_body["Permissions"]["Permission"][:2]})
    second = {
        "SecurityGroupId": "sg-gpu",
        "Permissions": {"Permission": sg_body["Permissions"]["Permission"][2:]},
    }
    group = security_group_from_api(first, extra_pages=[second])
    assert [rule.rule_id for rule in group.rules] == [
        item["SecurityGroupRuleId"] for item in sg_body["Permissions"]["Permission"]
    ]


def test_security_group_pages_of_another_group_are_refused(sg_body):
    with pytest.raises(CloudModelError):
        security_group_from_api(sg_body, extra_pages=[{"SecurityGroupId": "sg-other"}])


def test_security_group_defaults_and_enterprise_type():
    basic = security_group_from_api({"SecurityGroupId": "sg-1"})
    assert basic.inner_access_policy is Policy.ACCEPT
    assert basic.rules == ()
    enterprise = security_group_from_api({"SecurityGroupId": "sg-2"}, group_type="enterprise")
    assert enterprise.is_enterprise
    assert enterprise.inner_access_policy is Policy.DROP
    typed = security_group_from_api({"SecurityGroupId": "sg-3", "SecurityGroupType": "enterprise"})
    assert typed.is_enterprise


@pytest.mark.parametrize(
    "permission",
    [
        {"Direction": "ingress", "PortRange": "22/22"},
        {"IpProtocol": "TCP", "PortRange": "22/22"},
        {"Direction": "ingress", "IpProtocol": "TCP"},
        {"Direction": "ingress", "IpProtocol": "TCP", "PortRange": "22/22", "Priority": "0"},
        {"Direction": "ingress", "IpProtocol": "TCP", "PortRange": "22/22", "Priority": "101"},
        {"Direction": "sideways", "IpProtocol": "TCP", "PortRange": "22/22"},
        {"Direction": "ingress", "IpProtocol": "TCP", "PortRange": "22/22", "Policy": "maybe"},
        {"Direction": "ingress", "IpProtocol": "TCP", "PortRange": "22/22", "SourceCidrIp": "x"},
    ],
)
def test_malformed_permissions_are_refused(permission):
    body = {"SecurityGroupId": "sg-1", "Permissions": {"Permission": [permission]}}
    with pytest.raises(CloudModelError):
        security_group_from_api(body)


def test_port_range_list_reference_is_kept():
    body = {
        "SecurityGroupId": "sg-1",
        "Permissions": {
            "Permission": [
                {
                    "Direction": "ingress",
                    "IpProtocol": "TCP",
                    "PortRangeListId": "prl-1",
                    "SourceCidrIp": "0.0.0.0/0",
                }
            ]
        },
    }
    (rule,) = security_group_from_api(body).rules
    assert rule.port_range_list_id == "prl-1"
    assert rule.priority == 1  # priority defaults to 1 as in AuthorizeSecurityGroup


def test_network_acl_from_api_reads_entries_in_order(acl_body):
    acl = network_acl_from_api(acl_body)
    assert acl.network_acl_id == "nacl-gpu"
    assert acl.vswitch_ids == ("vsw-gpu-a", "vsw-gpu-b")  # UNBINDED left out
    assert [entry.entry_id for entry in acl.ingress_entries] == ["nae-in-1", "nae-in-2", "nae-in-3"]
    assert [entry.priority for entry in acl.ingress_entries] == [1, 2, 3]
    first = acl.ingress_entries[0]
    assert first.policy is Policy.DROP
    assert first.protocol is Protocol.ALL
    assert first.port_range.is_all
    assert first.cidr == ipaddress.ip_network("10.66.0.0/16")
    assert first.entry_type == "custom"
    assert first.label == "deny-bad"
    (out,) = acl.egress_entries
    assert out.direction is Direction.EGRESS
    assert out.cidr == ipaddress.ip_network("0.0.0.0/0")
    assert acl.entries(Direction.EGRESS) == (out,)


def test_network_acl_accepts_the_bare_attribute_and_priority_keys(acl_body):
    attribute = acl_body["NetworkAclAttribute"]
    entries = attribute["IngressAclEntries"]["IngressAclEntry"]
    attribute["IngressAclEntries"]["IngressAclEntry"] = [
        dict(entries[0], Priority=3),
        dict(entries[1], Priority=1),
        dict(entries[2], Priority=2),
    ]
    acl = network_acl_from_api(attribute)
    assert [entry.entry_id for entry in acl.ingress_entries] == ["nae-in-2", "nae-in-3", "nae-in-1"]


def test_network_acl_without_entries_or_resources():
    acl = network_acl_from_api({"NetworkAclAttribute": {"NetworkAclId": "nacl-empty"}})
    assert acl.ingress_entries == acl.egress_entries == acl.vswitch_ids == ()


def test_network_acl_entry_without_cidr_is_refused():
    body = {
        "NetworkAclId": "nacl-1",
        "EgressAclEntries": {"EgressAclEntry": [{"Protocol": "all", "Policy": "accept"}]},
    }
    with pytest.raises(CloudModelError):
        network_acl_from_api(body)


def test_flow_parses_and_validates():
    flow = Flow("10.0.0.1", "10.0.0.2", "tcp", 22, src_groups=["sg-a"], dst_groups="sg-b")
    assert flow.protocol is Protocol.TCP
    assert flow.src_ip == ipaddress.ip_address("10.0.0.1")
    assert flow.src_groups == frozenset({"sg-a"})
    assert flow.dst_groups == frozenset({"sg-b"})
    assert str(flow) == "TCP 10.0.0.1 -> 10.0.0.2:22"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"protocol": "TCP"},  # no port
        {"protocol": "ALL", "dst_port": None},
        {"protocol": "ICMP", "dst_port": 22},
        {"protocol": "UDP", "dst_port": 0},
        {"protocol": "UDP", "dst_port": 70000},
    ],
)
def test_flow_rejects_impossible_flows(kwargs):
    with pytest.raises(CloudModelError):
        Flow(src_ip="10.0.0.1", dst_ip="10.0.0.2", **kwargs)


def test_flow_reply_swaps_endpoints_and_ports():
    flow = Flow("10.0.0.1", "10.0.0.2", "TCP", 22, src_groups={"sg-a"}, dst_groups={"sg-b"})
    reply = flow.reply(40000)
    assert (reply.src_ip, reply.dst_ip) == (flow.dst_ip, flow.src_ip)
    assert (reply.dst_port, reply.src_port) == (40000, 22)
    assert (reply.src_groups, reply.dst_groups) == (flow.dst_groups, flow.src_groups)
    ping = Flow("10.0.0.1", "10.0.0.2", "ICMP").reply()
    assert ping.dst_port is None and ping.protocol is Protocol.ICMP
