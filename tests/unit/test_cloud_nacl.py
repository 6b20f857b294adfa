"""Hand-written cases for every documented network ACL semantic."""

from __future__ import annotations

import json

import pytest

from pytest_hpcnet.cloud.nacl import (
    NetworkAclConfigError,
    acl_for_vswitch,
    denied_ports,
    evaluate_flow,
    evaluate_reply,
)
from pytest_hpcnet.cloud.nacl_model import network_acl_from_api
from pytest_hpcnet.cloud.rules import Direction, Flow, Policy

CLIENT = "10.0.1.10"  # in vsw-a
SERVER = "10.0.2.20"  # in vsw-b


def entry(cidr="0.0.0.0/0", policy="accept", protocol="all", port="-1/-1", name=None):
    return {
        "NetworkAclEntryName": name or f"{policy}-{protocol}-{port}-{cidr}",
        "Policy": policy,
        "Protocol": protocol,
        "Port": port,
        "CidrIp": cidr,
        "EntryType": "custom",
        "IpVersion": "IPV4",
    }


def acl(acl_id, vswitches, ingress=(), egress=()):
    def side(entries, cidr_key):
        return [
            {**{k: v for k, v in item.items() if k != "CidrIp"}, cidr_key: item["CidrIp"]}
            for item in entries
        ]

    return network_acl_from_api(
        {
            "NetworkAclAttribute": {
                "NetworkAclId": acl_id,
                "IngressAclEntries": {"IngressAclEntry": side(ingress, "SourceCidrIp")},
                "EgressAclEntries": {"EgressAclEntry": side(egress, "DestinationCidrIp")},
                "Resources": {
                    "Resource": [{"ResourceId": v, "ResourceType": "VSwitch"} for v in vswitches]
                },
            }
        }
    )


ALLOW_ALL = [entry()]


def tcp(port, src=CLIENT, dst=SERVER):
    return Flow(src, dst, "TCP", port)


def test_first_match_wins_accept_before_drop():
    server_acl = acl(
        "nacl-b",
        ["vsw-b"],
        ingress=[entry("10.0.1.0/24", "accept", "tcp", "22/22"), entry("10.0.0.0/8", "drop")],
    )
    verdict = evaluate_flow(tcp(22), "vsw-a", "vsw-b", [server_acl])
    assert verdict.accepted
    assert verdict.ingress.entry.priority == 1
    assert verdict.ingress.entry.policy is Policy.ACCEPT


def test_first_match_wins_drop_before_accept():
    server_acl = acl(
        "nacl-b",
        ["vsw-b"],
        ingress=[entry("10.0.0.0/8", "drop"), entry("10.0.1.0/24", "accept", "tcp", "22/22")],
    )
    verdict = evaluate_flow(tcp(22), "vsw-a", "vsw-b", [server_acl])
    assert not verdict.accepted
    assert verdict.ingress.entry.priority == 1
    assert verdict.ingress.network_acl_id == "nacl-b"
    assert "nacl-b" in str(verdict)


def test_a_non_matching_entry_is_skipped():
    server_acl = acl(
        "nacl-b",
        ["vsw-b"],
        ingress=[
            entry("10.0.1.0/24", "drop", "udp"),  # other protocol
            entry("10.9.0.0/16", "drop"),  # other source
            entry("10.0.1.0/24", "drop", "tcp", "23/100"),  # other port
            entry("10.0.1.0/24", "accept", "tcp", "1/200", name="ok"),
        ],
    )
    verdict = evaluate_flow(tcp(22), "vsw-a", "vsw-b", [server_acl])
    assert verdict.accepted
    assert verdict.ingress.entry.label == "ok"
    assert verdict.ingress.entry.priority == 4


def test_no_matching_entry_denies():
    server_acl = acl("nacl-b", ["vsw-b"], ingress=[entry("192.168.0.0/16")])
    verdict = evaluate_flow(tcp(22), "vsw-a", "vsw-b", [server_acl])
    assert not verdict.accepted
    assert verdict.ingress.entry is None
    assert "implicit deny" in verdict.ingress.reason


def test_empty_acl_denies_both_ways():
    empty = acl("nacl-a", ["vsw-a"])
    verdict = evaluate_flow(tcp(22), "vsw-a", "vsw-b", [empty])
    assert not verdict.egress.accepted
    assert verdict.ingress.accepted  # vsw-b has no ACL


def test_needs_egress_of_the_source_and_ingress_of_the_destination():
    client_acl = acl("nacl-a", ["vsw-a"], ingress=ALLOW_ALL, egress=[entry(policy="drop")])
    server_acl = acl("nacl-b", ["vsw-b"], ingress=ALLOW_ALL, egress=ALLOW_ALL)
    verdict = evaluate_flow(tcp(22), "vsw-a", "vsw-b", [client_acl, server_acl])
    assert not verdict.accepted
    assert not verdict.egress.accepted
    assert verdict.ingress.accepted

    client_acl = acl("nacl-a", ["vsw-a"], ingress=ALLOW_ALL, egress=ALLOW_ALL)
    server_acl = acl("nacl-b", ["vsw-b"], ingress=[entry(policy="drop")], egress=ALLOW_ALL)
    verdict = evaluate_flow(tcp(22), "vsw-a", "vsw-b", [client_acl, server_acl])
    assert not verdict.accepted
    assert verdict.egress.accepted
    assert not verdict.ingress.accepted


def test_egress_entries_match_the_destination_address():
    client_acl = acl("nacl-a", ["vsw-a"], egress=[entry(f"{SERVER}/32", "accept", "tcp", "22/22")])
    assert evaluate_flow(tcp(22), "vsw-a", "vsw-b", [client_acl]).accepted
    other = tcp(22, dst="10.0.2.21")
    assert not evaluate_flow(other, "vsw-a", "vsw-b", [client_acl]).accepted


def test_port_is_always_the_destination_port():
    # An egress entry for port 22 applies to traffic *to* 22, not from it.
    client_acl = acl("nacl-a", ["vsw-a"], egress=[entry(port="22/22", protocol="tcp")])
    from_22 = Flow(CLIENT, SERVER, "TCP", 40000, src_port=22)
    assert not evaluate_flow(from_22, "vsw-a", "vsw-b", [client_acl]).accepted
    assert evaluate_flow(tcp(22), "vsw-a", "vsw-b", [client_acl]).accepted


def test_vswitch_without_acl_allows():
    unrelated = acl("nacl-z", ["vsw-z"], ingress=[entry(policy="drop")])
    verdict = evaluate_flow(tcp(22), "vsw-a", "vsw-b", [unrelated])
    assert verdict.accepted
    assert "no network ACL" in verdict.egress.reason
    assert "no network ACL" in verdict.ingress.reason


def test_same_vswitch_is_not_filtered():
    deny_all = acl(
        "nacl-a", ["vsw-a"], ingress=[entry(policy="drop")], egress=[entry(policy="drop")]
    )
    verdict = evaluate_flow(tcp(22, dst="10.0.1.11"), "vsw-a", "vsw-a", [deny_all])
    assert verdict.accepted
    assert "same vSwitch" in verdict.ingress.reason


def test_metaserver_and_dns_are_always_allowed():
    deny_all = acl("nacl-a", ["vsw-a"], egress=[entry(policy="drop")])
    metadata = Flow(CLIENT, "100.100.100.200", "TCP", 80)
    dns = Flow(CLIENT, "100.100.2.136", "UDP", 53)
    assert evaluate_flow(metadata, "vsw-a", None, [deny_all]).accepted
    assert evaluate_flow(dns, "vsw-a", None, [deny_all]).accepted
    assert not evaluate_flow(tcp(80, dst="100.100.100.201"), "vsw-a", None, [deny_all]).accepted


def test_icmp_ignores_port_ranges_of_all_entries():
    server_acl = acl("nacl-b", ["vsw-b"], ingress=[entry("10.0.0.0/8", "accept", "icmp")])
    ping = Flow(CLIENT, SERVER, "ICMP")
    assert evaluate_flow(ping, "vsw-a", "vsw-b", [server_acl]).accepted
    assert not evaluate_flow(tcp(22), "vsw-a", "vsw-b", [server_acl]).accepted


def test_a_vswitch_bound_to_two_acls_is_refused():
    first = acl("nacl-1", ["vsw-a"])
    second = acl("nacl-2", ["vsw-a"])
    with pytest.raises(NetworkAclConfigError, match="vsw-a"):
        acl_for_vswitch([first, second], "vsw-a")


# -- stateless replies -------------------------------------------------------------------


def replies_acls(server_egress, client_ingress):
    client_acl = acl("nacl-a", ["vsw-a"], ingress=client_ingress, egress=ALLOW_ALL)
    server_acl = acl("nacl-b", ["vsw-b"], ingress=ALLOW_ALL, egress=server_egress)
    return [client_acl, server_acl]


def test_reply_allowed_over_the_whole_ephemeral_range():
    acls = replies_acls(
        server_egress=[entry("10.0.1.0/24", "accept", "tcp", "1024/65535")],
        client_ingress=[entry("10.0.2.0/24", "accept", "tcp", "1024/65535")],
    )
    assert evaluate_flow(tcp(22), "vsw-a", "vsw-b", acls).accepted
    reply = evaluate_reply(tcp(22), "vsw-a", "vsw-b", acls)
    assert reply.accepted
    assert reply.ephemeral_ports == (1024, 65535)
    assert "allowed" in str(reply)


def test_reply_partly_denied_reports_the_ports():
    acls = replies_acls(
        server_egress=[
            entry("10.0.1.0/24", "drop", "tcp", "5000/6000"),
            entry("10.0.1.0/24", "accept", "tcp", "1024/65535"),
        ],
        client_ingress=[entry("10.0.2.0/24", "accept", "tcp", "32768/61000")],
    )
    reply = evaluate_reply(tcp(22), "vsw-a", "vsw-b", acls)
    assert not reply.accepted
    assert reply.denied_egress == ((5000, 6000),)
    assert reply.denied_ingress == ((1024, 32767), (61001, 65535))
    # The forward flow is allowed: only the stateless return path is broken.
    assert evaluate_flow(tcp(22), "vsw-a", "vsw-b", acls).accepted
    assert evaluate_reply(tcp(22), "vsw-a", "vsw-b", acls, client_port=40000).accepted
    assert not evaluate_reply(tcp(22), "vsw-a", "vsw-b", acls, client_port=5500).accepted


def test_reply_of_a_flow_whose_forward_direction_is_allowed_only_one_way():
    # Ingress at the server allows ssh but nothing lets the reply leave the server.
    acls = replies_acls(server_egress=[entry("10.0.1.0/24", "accept", "tcp", "22/22")],
                        client_ingress=ALLOW_ALL)  # fmt: skip
    reply = evaluate_reply(tcp(22), "vsw-a", "vsw-b", acls)
    assert not reply.accepted
    assert reply.denied_egress == ((1024, 65535),)
    assert reply.denied_ingress == ()


def test_reply_of_icmp_is_the_reversed_flow():
    acls = replies_acls(server_egress=[entry("10.0.1.0/24", "accept", "icmp")],
                        client_ingress=[entry("10.0.2.0/24", "drop", "icmp")])  # fmt: skip
    reply = evaluate_reply(Flow(CLIENT, SERVER, "ICMP"), "vsw-a", "vsw-b", acls)
    assert not reply.accepted
    assert reply.decision.egress.accepted
    assert not reply.decision.ingress.accepted


def test_denied_ports_validates_its_interval():
    with pytest.raises(ValueError):
        denied_ports(tcp(22), Direction.EGRESS, "vsw-a", [], (2000, 1000))


def test_fixture_acl_end_to_end(fixture_text):
    gpu_acl = network_acl_from_api(
        json.loads(fixture_text("cloud", "describe_network_acl_attributes.json"))
    )
    acls = [gpu_acl]
    assert evaluate_flow(tcp(22, dst="10.0.3.3"), "vsw-x", "vsw-gpu-a", acls).accepted
    blocked = evaluate_flow(tcp(22, src="10.66.0.1"), "vsw-x", "vsw-gpu-b", acls)
    assert blocked.ingress.entry.label == "deny-bad"
    assert not evaluate_flow(tcp(80), "vsw-x", "vsw-gpu-a", acls).accepted
    # Unbound vSwitch is not filtered; the ACL's egress allows all, so replies leave.
    assert evaluate_flow(tcp(80), "vsw-x", "vsw-old", acls).accepted
    outbound = Flow("10.0.3.3", "10.0.9.9", "TCP", 443)
    assert evaluate_reply(outbound, "vsw-gpu-a", "vsw-x", acls).accepted
