"""Property tests: the evaluators against brute-force references on the raw API JSON.

The references read the `Permission` / `AclEntry` dicts directly (no models), enumerate
every matching rule, sort and pick, exactly as the documentation words it: one peer field
takes effect (CIDR, IPv4 or IPv6, over group over prefix list: ROS
*ALIYUN::ECS::SecurityGroupIngress*), `PortRange` over `PortRangeListId`
(*AuthorizeSecurityGroup*), IANA protocol numbers, the group type from
DescribeSecurityGroups (enterprise groups deny by default both ways and have no
intra-group access), and ACL entries whose peer is a prefix list or an IPv6 CIDR.
"""

from __future__ import annotations

import ipaddress
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_hpcnet.cloud import nacl, secgroup, verdicts
from pytest_hpcnet.cloud.nacl_model import network_acl_from_api
from pytest_hpcnet.cloud.plane import ControlPlane
from pytest_hpcnet.cloud.rules import Direction, Flow, PortRange
from pytest_hpcnet.cloud.secgroup_model import security_group_from_api

ADDRESSES = [f"10.0.0.{i}" for i in range(8)] + ["192.168.0.1", "192.168.0.2"]
ADDRESSES_V6 = ["2001:db8::1", "2001:db8::2", "2001:db8::9", "fd00::1"]
GROUP_IDS = ["sg-a", "sg-b", "sg-c"]
PREFIX_LISTS = {
    "pl-1": ["10.0.0.0/30", "192.168.0.2/32", "2001:db8::/126"],
    "pl-2": ["10.0.0.4/31"],
}
MAX_TEST_PORT = 12
PORT_LISTS = {"prl-1": ["1/3", "7/7"], "prl-2": ["5/12"]}
PROTOCOL_NAMES = {"6": "TCP", "17": "UDP", "1": "ICMP", "-1": "ALL"}
LISTS = {"prefix_lists": PREFIX_LISTS, "port_range_lists": PORT_LISTS}

cidrs = st.one_of(
    st.just("0.0.0.0/0"),
    st.builds(
        lambda address, prefix: str(ipaddress.ip_network(f"{address}/{prefix}", strict=False)),
        st.sampled_from(ADDRESSES),
        st.integers(min_value=28, max_value=32),
    ),
)
cidrs_v6 = st.one_of(
    st.just("::/0"),
    st.builds(
        lambda address, prefix: str(ipaddress.ip_network(f"{address}/{prefix}", strict=False)),
        st.sampled_from(ADDRESSES_V6),
        st.integers(min_value=124, max_value=128),
    ),
)


@st.composite
def port_ranges(draw, protocol: str) -> str:
    if protocol.upper() not in ("TCP", "UDP") or (draw(st.booleans()) and draw(st.booleans())):
        return "-1/-1"
    low = draw(st.integers(min_value=1, max_value=MAX_TEST_PORT))
    high = draw(st.integers(min_value=low, max_value=MAX_TEST_PORT))
    return f"{low}/{high}"


@st.composite
def permissions(draw, direction: str) -> dict:
    protocol = draw(st.sampled_from(["TCP", "UDP", "ICMP", "ALL", "tcp", "all", "6", "17", "-1"]))
    item = {
        "Direction": direction,
        "IpProtocol": protocol,
        "PortRange": draw(port_ranges(PROTOCOL_NAMES.get(protocol, protocol))),
        "Policy": draw(st.sampled_from(["Accept", "Drop", "accept", "drop"])),
        "Priority": str(draw(st.integers(min_value=1, max_value=4))),
        "NicType": "intranet",
    }
    if draw(st.integers(min_value=0, max_value=3)) == 0:
        item["PortRangeListId"] = draw(st.sampled_from(sorted(PORT_LISTS)))
    prefix = "Source" if direction == "ingress" else "Dest"
    local = "Dest" if direction == "ingress" else "Source"
    kinds = draw(
        st.sets(st.sampled_from(["cidr", "cidr6", "group", "prefix"]), min_size=1, max_size=3)
    )
    if "cidr" in kinds:
        item[f"{prefix}CidrIp"] = draw(cidrs)
    elif "cidr6" in kinds:  # the API carries one family per rule
        item[f"Ipv6{prefix}CidrIp"] = draw(cidrs_v6)
    if "group" in kinds:
        item[f"{prefix}GroupId"] = draw(st.sampled_from(GROUP_IDS))
    if "prefix" in kinds:
        item[f"{prefix}PrefixListId"] = draw(st.sampled_from(sorted(PREFIX_LISTS)))
    if draw(st.integers(min_value=0, max_value=4)) == 0:
        item[f"{local}CidrIp"] = draw(cidrs)
    return item


@st.composite
def group_bodies(draw) -> list[dict]:
    enterprise = draw(st.booleans())
    bodies = []
    for group_id in GROUP_IDS:
        rules = draw(
            st.lists(
                st.one_of(permissions("ingress"), permissions("egress")), min_size=0, max_size=6
            )
        )
        body = {
            "SecurityGroupId": group_id,
            "InnerAccessPolicy": draw(st.sampled_from(["Accept", "Drop"])),
            "Permissions": {"Permission": rules},
        }
        # The type comes from DescribeSecurityGroups, not from this body: kept beside it.
        body["_type"] = "enterprise" if enterprise else "normal"
        bodies.append(body)
    return bodies


def parse_group(body: dict):
    """The model of a body, its type given as DescribeSecurityGroups would."""
    attribute = {key: value for key, value in body.items() if key != "_type"}
    return security_group_from_api(attribute, group_type=body["_type"])


@st.composite
def flows(draw) -> Flow:
    protocol = draw(st.sampled_from(["TCP", "UDP", "ICMP"]))
    port = draw(st.integers(min_value=1, max_value=MAX_TEST_PORT)) if protocol != "ICMP" else None
    pool = draw(st.sampled_from([ADDRESSES, ADDRESSES, ADDRESSES_V6]))
    return Flow(
        src_ip=draw(st.sampled_from(pool)),
        dst_ip=draw(st.sampled_from(pool)),
        protocol=protocol,
        dst_port=port,
        src_groups=draw(st.frozensets(st.sampled_from(GROUP_IDS), max_size=3)),
        dst_groups=draw(st.frozensets(st.sampled_from(GROUP_IDS), max_size=3)),
    )


# -- reference security-group evaluator ----------------------------------------------------


def ref_in(cidr: str, address) -> bool:
    network = ipaddress.ip_network(cidr, strict=False)
    return network.version == address.version and address in network


def ref_ports(item: dict) -> list[tuple[int, int]]:
    """Destination port ranges of a permission: PortRange, unless it is empty or -1/-1 and
    a port list is named ("if you specify PortRange, PortRangeListId is ignored")."""
    low, high = (int(part) for part in item["PortRange"].split("/"))
    if (low, high) == (-1, -1) and "PortRangeListId" in item:
        return [
            tuple(int(part) for part in text.split("/"))
            for text in PORT_LISTS[item["PortRangeListId"]]
        ]
    return [(1, 65535)] if low == -1 else [(low, high)]


def ref_permission_matches(item: dict, flow: Flow) -> bool:
    protocol = PROTOCOL_NAMES.get(item["IpProtocol"], item["IpProtocol"]).upper()
    if protocol != "ALL" and protocol != flow.protocol.value:
        return False
    if flow.protocol.value in ("TCP", "UDP") and not any(
        low <= flow.dst_port <= high for low, high in ref_ports(item)
    ):
        return False
    if item["Direction"] == "ingress":
        peer, peer_groups, local, prefix, local_key = (
            flow.src_ip, flow.src_groups, flow.dst_ip, "Source", "DestCidrIp"
        )  # fmt: skip
    else:
        peer, peer_groups, local, prefix, local_key = (
            flow.dst_ip, flow.dst_groups, flow.src_ip, "Dest", "SourceCidrIp"
        )  # fmt: skip
    # One peer field takes effect: a CIDR (IPv4 or IPv6), else a group, else a prefix list.
    cidr = item.get(f"{prefix}CidrIp") or item.get(f"Ipv6{prefix}CidrIp")
    if cidr is not None:
        matched = ref_in(cidr, peer)
    elif f"{prefix}GroupId" in item:
        matched = item[f"{prefix}GroupId"] in peer_groups
    else:
        matched = any(ref_in(c, peer) for c in PREFIX_LISTS[item[f"{prefix}PrefixListId"]])
    return matched and (local_key not in item or ref_in(item[local_key], local))


def ref_side(flow: Flow, direction: str, bodies: list[dict]) -> tuple[bool, object]:
    """(accepted, deciding permission dict or a tag) for one side."""
    if not bodies:
        return True, "no groups"
    peer_groups = flow.src_groups if direction == "ingress" else flow.dst_groups
    for body in bodies:
        if (
            body["_type"] != "enterprise"
            and body["InnerAccessPolicy"] == "Accept"
            and body["SecurityGroupId"] in peer_groups
        ):
            return True, ("inner", body["SecurityGroupId"])
    matching = [
        item
        for body in bodies
        for item in body["Permissions"]["Permission"]
        if item["Direction"] == direction and ref_permission_matches(item, flow)
    ]
    matching.sort(key=lambda item: (int(item["Priority"]), item["Policy"].lower() != "drop"))
    if matching:
        return matching[0]["Policy"].lower() == "accept", matching[0]
    enterprise = bodies[0]["_type"] == "enterprise"
    return direction == "egress" and not enterprise, "default"


def describe(decision_rule) -> object:
    """The evaluator's deciding rule in the reference's vocabulary."""
    if isinstance(decision_rule, str):
        if decision_rule.startswith("inner access Accept in "):
            return ("inner", decision_rule.rsplit(" ", 1)[1])
        if decision_rule.startswith("default"):
            return "default"
        return "no groups"
    return decision_rule


@settings(max_examples=300, deadline=None)
@given(bodies=group_bodies(), flow=flows())
def test_security_groups_agree_with_reference(bodies, flow):
    groups = [parse_group(body) for body in bodies]
    verdict = secgroup.evaluate_flow(flow, groups, **LISTS)
    by_id = {body["SecurityGroupId"]: body for body in bodies}
    for direction, decision, local in (
        ("egress", verdict.egress, flow.src_groups),
        ("ingress", verdict.ingress, flow.dst_groups),
    ):
        local_bodies = [by_id[group_id] for group_id in sorted(local)]
        accepted, deciding = ref_side(flow, direction, local_bodies)
        assert decision.accepted is accepted, (direction, decision, deciding)
        if isinstance(deciding, dict):
            # Same priority and policy; the exact rule may differ among equals.
            assert not isinstance(decision.rule, str), (decision, deciding)
            assert decision.rule.priority == int(deciding["Priority"])
            assert decision.rule.policy.value.lower() == deciding["Policy"].lower()
            assert secgroup.rule_matches(decision.rule, flow, **LISTS)
        else:
            assert describe(decision.rule) == deciding
    ref_accepted = (
        ref_side(flow, "egress", [by_id[g] for g in sorted(flow.src_groups)])[0]
        and ref_side(flow, "ingress", [by_id[g] for g in sorted(flow.dst_groups)])[0]
    )
    assert verdict.accepted is ref_accepted


@settings(max_examples=200, deadline=None)
@given(bodies=group_bodies(), flow=flows())
def test_rule_order_within_and_across_groups_does_not_change_the_verdict(bodies, flow):
    groups = [parse_group(body) for body in bodies]
    reversed_groups = [
        parse_group(dict(body, Permissions={"Permission": body["Permissions"]["Permission"][::-1]}))
        for body in bodies
    ]
    forward = secgroup.evaluate_flow(flow, groups, **LISTS)
    backward = secgroup.evaluate_flow(flow, reversed_groups[::-1], **LISTS)
    assert forward.accepted is backward.accepted
    assert forward.ingress.accepted is backward.ingress.accepted
    assert forward.egress.accepted is backward.egress.accepted


# -- reference network-ACL evaluator ---------------------------------------------------------


@st.composite
def acl_entries(draw, cidr_key: str) -> dict:
    protocol = draw(st.sampled_from(["tcp", "udp", "icmp", "all", "6", "-1"]))
    peer = draw(st.one_of(cidrs, cidrs_v6, st.sampled_from(sorted(PREFIX_LISTS))))
    entry = {
        "NetworkAclEntryId": f"nae-{draw(st.integers(min_value=0, max_value=10**6))}",
        "Policy": draw(st.sampled_from(["accept", "drop"])),
        "Protocol": protocol,
        "Port": draw(port_ranges(PROTOCOL_NAMES.get(protocol, protocol))),
        cidr_key: peer,
        "EntryType": "custom",
    }
    if not peer.startswith("pl-"):
        entry["IpVersion"] = "IPV6" if ":" in peer else "IPV4"
    return entry


@st.composite
def acl_bodies(draw, acl_id: str, vswitch: str) -> dict:
    return {
        "NetworkAclAttribute": {
            "NetworkAclId": acl_id,
            "IngressAclEntries": {
                "IngressAclEntry": draw(st.lists(acl_entries("SourceCidrIp"), max_size=6))
            },
            "EgressAclEntries": {
                "EgressAclEntry": draw(st.lists(acl_entries("DestinationCidrIp"), max_size=6))
            },
            "Resources": {"Resource": [{"ResourceId": vswitch, "ResourceType": "VSwitch"}]},
        }
    }


def ref_acl_side(body: dict | None, flow: Flow, direction: str) -> bool:
    if body is None:
        return True
    attribute = body["NetworkAclAttribute"]
    if direction == "ingress":
        entries = attribute["IngressAclEntries"]["IngressAclEntry"]
        key, peer = "SourceCidrIp", flow.src_ip
    else:
        entries = attribute["EgressAclEntries"]["EgressAclEntry"]
        key, peer = "DestinationCidrIp", flow.dst_ip
    for item in entries:
        protocol = PROTOCOL_NAMES.get(item["Protocol"], item["Protocol"]).upper()
        if protocol != "ALL" and protocol != flow.protocol.value:
            continue
        peers = PREFIX_LISTS.get(item[key], [item[key]])  # a prefix list, or one CIDR
        if not any(ref_in(cidr, peer) for cidr in peers):
            continue
        if flow.protocol.value in ("TCP", "UDP"):
            low, high = (int(part) for part in item["Port"].split("/"))
            if low != -1 and not low <= flow.dst_port <= high:
                continue
        return item["Policy"] == "accept"
    return False


@settings(max_examples=300, deadline=None)
@given(
    src_body=acl_bodies("nacl-src", "vsw-src"),
    dst_body=acl_bodies("nacl-dst", "vsw-dst"),
    src_has_acl=st.booleans(),
    dst_has_acl=st.booleans(),
    flow=flows(),
)
def test_network_acls_agree_with_reference(src_body, dst_body, src_has_acl, dst_has_acl, flow):
    bodies = [body for body, bound in ((src_body, src_has_acl), (dst_body, dst_has_acl)) if bound]
    acls = [network_acl_from_api(body) for body in bodies]
    verdict = nacl.evaluate_flow(flow, "vsw-src", "vsw-dst", acls, prefix_lists=PREFIX_LISTS)
    egress = ref_acl_side(src_body if src_has_acl else None, flow, "egress")
    ingress = ref_acl_side(dst_body if dst_has_acl else None, flow, "ingress")
    assert verdict.egress.accepted is egress
    assert verdict.ingress.accepted is ingress
    assert verdict.accepted is (egress and ingress)
    if verdict.ingress.entry is not None:
        assert nacl.entry_matches(verdict.ingress.entry, flow, PREFIX_LISTS)
        assert verdict.ingress.accepted is (verdict.ingress.entry.policy.value == "Accept")


@settings(max_examples=200, deadline=None)
@given(
    body=acl_bodies("nacl-x", "vsw-x"),
    flow=flows().filter(lambda flow: flow.protocol.value != "ICMP"),
    direction=st.sampled_from([Direction.INGRESS, Direction.EGRESS]),
    low=st.integers(min_value=1, max_value=MAX_TEST_PORT + 2),
    span=st.integers(min_value=0, max_value=MAX_TEST_PORT),
)
def test_denied_ports_agree_with_port_by_port_evaluation(body, flow, direction, low, span):
    acls = [network_acl_from_api(body)]
    high = low + span
    intervals = nacl.denied_ports(
        flow, direction, "vsw-x", acls, (low, high), prefix_lists=PREFIX_LISTS
    )
    denied = {port for start, end in intervals for port in range(start, end + 1)}
    expected = set()
    for port in range(low, high + 1):
        probe = Flow(flow.src_ip, flow.dst_ip, flow.protocol, port)
        if not ref_acl_side(body, probe, direction.value):
            expected.add(port)
    assert denied == expected
    assert all(a <= b for a, b in intervals)
    assert all(b + 1 < c for (_, b), (c, _) in itertools.pairwise(intervals))


@settings(max_examples=200, deadline=None)
@given(
    client_body=acl_bodies("nacl-c", "vsw-c"),
    server_body=acl_bodies("nacl-s", "vsw-s"),
    flow=flows().filter(lambda flow: flow.protocol.value != "ICMP"),
    client_port=st.integers(min_value=1, max_value=MAX_TEST_PORT),
)
def test_reply_range_is_consistent_with_single_client_ports(
    client_body, server_body, flow, client_port
):
    acls = [network_acl_from_api(client_body), network_acl_from_api(server_body)]
    ports = (1, MAX_TEST_PORT)
    ranged = nacl.evaluate_reply(
        flow, "vsw-c", "vsw-s", acls, ephemeral_ports=ports, prefix_lists=PREFIX_LISTS
    )
    single = nacl.evaluate_reply(
        flow, "vsw-c", "vsw-s", acls, client_port=client_port, prefix_lists=PREFIX_LISTS
    )
    blocked = {
        port
        for start, end in ranged.denied_egress + ranged.denied_ingress
        for port in range(start, end + 1)
    }
    assert single.accepted is (client_port not in blocked)
    assert ranged.accepted is (not blocked)


# -- port ranges judged piece by piece -----------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    bodies=group_bodies(),
    acl_body=acl_bodies("nacl-d", "vsw-d"),
    protocol=st.sampled_from(["tcp", "udp"]),
    low=st.integers(min_value=1, max_value=MAX_TEST_PORT),
    span=st.integers(min_value=0, max_value=MAX_TEST_PORT),
    src=st.sampled_from(ADDRESSES),
    dst=st.sampled_from(ADDRESSES),
)
def test_range_verdict_agrees_with_port_by_port_evaluation(
    bodies, acl_body, protocol, low, span, src, dst
):
    plane = ControlPlane(
        "cn-test",
        {},
        groups={body["SecurityGroupId"]: parse_group(body) for body in bodies},
        acls=(network_acl_from_api(acl_body),),
        prefix_lists={k: tuple(v) for k, v in PREFIX_LISTS.items()},
        port_lists={k: tuple(PortRange.parse(r) for r in v) for k, v in PORT_LISTS.items()},
    )
    source = verdicts.Endpoint("a", src, frozenset({"sg-a"}), "vsw-s")
    target = verdicts.Endpoint("b", dst, frozenset({"sg-b", "sg-c"}), "vsw-d")
    pieces = verdicts.judge_range(plane, source, target, protocol, (low, low + span))
    assert pieces[0].ports[0] == low and pieces[-1].ports[1] == low + span
    assert all(a.ports[1] + 1 == b.ports[0] for a, b in itertools.pairwise(pieces))
    by_port = {p: piece for piece in pieces for p in range(piece.ports[0], piece.ports[1] + 1)}
    for port in range(low, low + span + 1):
        (single,) = verdicts.judge_range(plane, source, target, protocol, (port, port))
        assert single.accepted is by_port[port].accepted, (port, single, by_port[port])
        assert single.deciding() == by_port[port].deciding()
