"""Stateless evaluation of Alibaba Cloud VPC network ACLs for a flow.

Semantics (Alibaba Cloud VPC documentation, *Network ACLs* / *Overview of network
ACLs*, as read for this module):

* An ACL is bound to vSwitches (`Resources.Resource[]`); one ACL per vSwitch.
  A vSwitch without an ACL filters nothing.
* Entries are evaluated in ascending priority starting at 1; the first entry matching
  protocol, address and port decides ("The first matching rule applies its allow or
  deny policy, and evaluation stops"). The API returns entries in that order and has no
  priority field, so list order is priority.
* "For both inbound and outbound rules, the port range always matches the destination
  port of the traffic." Inbound entries match the source address (`SourceCidrIp`),
  outbound entries the destination (`DestinationCidrIp`); either may be an IPv6 CIDR
  (`IpVersion` IPV6) or a prefix list id ("You can also specify a prefix list",
  *UpdateNetworkAclEntries*), whose CIDRs are read with ECS DescribePrefixListAttributes.
* "Network ACLs deny all inbound and outbound traffic if no rules are configured": an
  ACL in which no entry matches denies (implicit deny).
* "The traffic between ECS instances in a vSwitch is not filtered by the network ACL
  linked to that vSwitch", and the ACL always allows the DNS servers 100.100.2.128/28,
  100.100.2.112/28 and the metaserver 100.100.100.200/32.
* A flow between vSwitches passes iff the source vSwitch's ACL allows it outbound and
  the destination vSwitch's ACL allows it inbound.
* Stateless: the reply is a flow of its own, from the server port to the client's
  ephemeral port. The documentation recommends allowing 1024-65535 for replies;
  `evaluate_reply` checks that whole range unless a client port is given.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pytest_hpcnet.cloud.nacl_model import NetworkAcl, NetworkAclEntry
from pytest_hpcnet.cloud.rules import (
    MAX_PORT,
    MIN_PORT,
    Direction,
    Flow,
    IpAddress,
    IpNetwork,
    Policy,
    Protocol,
    network_contains,
    parse_cidr,
)

PrefixLists = Mapping[str, Iterable[str | IpNetwork]]

EPHEMERAL_PORTS: tuple[int, int] = (1024, 65535)
ALWAYS_ALLOWED_NETWORKS = tuple(
    ipaddress.ip_network(cidr)
    for cidr in ("100.100.2.128/28", "100.100.2.112/28", "100.100.100.200/32")
)


class NetworkAclConfigError(ValueError):
    """A configuration that cannot be evaluated (a vSwitch bound to two ACLs)."""


@dataclass(frozen=True)
class AclDecision:
    """Verdict of one ACL side: `entry` is the deciding entry, None for an implicit one."""

    accepted: bool
    direction: Direction
    reason: str
    entry: NetworkAclEntry | None = None
    network_acl_id: str | None = None

    def __str__(self) -> str:
        verdict = "allow" if self.accepted else "deny"
        return f"{self.direction.value} {verdict}: {self.reason}"


@dataclass(frozen=True)
class AclFlowDecision:
    """Verdict of both ACL sides of a flow; allowed iff both sides allow."""

    flow: Flow
    egress: AclDecision
    ingress: AclDecision

    @property
    def accepted(self) -> bool:
        """True when the source vSwitch's egress and destination's ingress allow."""
        return self.egress.accepted and self.ingress.accepted

    def __str__(self) -> str:
        verdict = "allowed" if self.accepted else "denied"
        return f"{self.flow} {verdict} by network ACLs ({self.egress}; {self.ingress})"


def acl_for_vswitch(acls: Iterable[NetworkAcl], vswitch_id: str) -> NetworkAcl | None:
    """The ACL bound to `vswitch_id`, None when it has none."""
    bound = [acl for acl in acls if vswitch_id in acl.vswitch_ids]
    if len(bound) > 1:
        names = ", ".join(acl.network_acl_id for acl in bound)
        raise NetworkAclConfigError(f"vSwitch {vswitch_id} bound to several ACLs: {names}")
    return bound[0] if bound else None


def _entry_networks(entry: NetworkAclEntry, prefix_lists: PrefixLists | None) -> list[IpNetwork]:
    if entry.cidr is not None:
        return [entry.cidr]
    list_id = str(entry.prefix_list_id)
    if prefix_lists is None or list_id not in prefix_lists:
        raise NetworkAclConfigError(f"prefix list {list_id} is referenced but not given")
    return [parse_cidr(str(item)) for item in prefix_lists[list_id]]


def _matches_ignoring_port(
    entry: NetworkAclEntry, flow: Flow, prefix_lists: PrefixLists | None = None
) -> bool:
    if entry.protocol is not Protocol.ALL and entry.protocol is not flow.protocol:
        return False
    peer = flow.src_ip if entry.direction is Direction.INGRESS else flow.dst_ip
    return any(network_contains(network, peer) for network in _entry_networks(entry, prefix_lists))


def entry_matches(
    entry: NetworkAclEntry, flow: Flow, prefix_lists: PrefixLists | None = None
) -> bool:
    """Whether `entry` applies to `flow`: protocol, peer address (CIDR, IPv4 or IPv6, or a
    prefix list's CIDRs), destination port."""
    if not _matches_ignoring_port(entry, flow, prefix_lists):
        return False
    return not flow.protocol.has_ports or entry.port_range.contains(flow.dst_port)


def _always_allowed(address: IpAddress) -> bool:
    return any(network_contains(network, address) for network in ALWAYS_ALLOWED_NETWORKS)


def evaluate_acl(
    acl: NetworkAcl, flow: Flow, direction: Direction, prefix_lists: PrefixLists | None = None
) -> AclDecision:
    """First-match verdict of one ACL on `flow` in `direction` (no exemptions)."""
    for entry in acl.entries(direction):
        if entry_matches(entry, flow, prefix_lists):
            return AclDecision(
                accepted=entry.policy is Policy.ACCEPT,
                direction=direction,
                reason=f"{acl.network_acl_id} entry {entry}",
                entry=entry,
                network_acl_id=acl.network_acl_id,
            )
    return AclDecision(
        accepted=False,
        direction=direction,
        reason=f"{acl.network_acl_id}: no entry matched (implicit deny)",
        network_acl_id=acl.network_acl_id,
    )


def _exemption(
    flow: Flow,
    direction: Direction,
    vswitch_id: str | None,
    acls: Sequence[NetworkAcl],
    peer_vswitch_id: str | None,
) -> tuple[AclDecision | None, NetworkAcl | None]:
    """(allow decision, None) when the side is not filtered, else (None, its ACL)."""
    side = "source" if direction is Direction.EGRESS else "destination"
    if vswitch_id is None:
        return AclDecision(True, direction, f"{side} is in no vSwitch of the audit"), None
    if vswitch_id == peer_vswitch_id:
        reason = f"same vSwitch {vswitch_id}: not filtered by ACL"
        return AclDecision(True, direction, reason), None
    acl = acl_for_vswitch(acls, vswitch_id)
    if acl is None:
        return AclDecision(True, direction, f"vSwitch {vswitch_id} has no network ACL"), None
    peer = flow.dst_ip if direction is Direction.EGRESS else flow.src_ip
    if _always_allowed(peer):
        reason = f"{acl.network_acl_id}: {peer} is an always-allowed DNS/metaserver address"
        return AclDecision(True, direction, reason, network_acl_id=acl.network_acl_id), None
    return None, acl


def evaluate_side(
    flow: Flow,
    direction: Direction,
    vswitch_id: str | None,
    acls: Sequence[NetworkAcl],
    *,
    peer_vswitch_id: str | None = None,
    prefix_lists: PrefixLists | None = None,
) -> AclDecision:
    """Verdict of `vswitch_id`'s ACL: egress at the source vSwitch, ingress at the
    destination vSwitch, with the documented exemptions."""
    exempt, acl = _exemption(flow, direction, vswitch_id, acls, peer_vswitch_id)
    if exempt is not None or acl is None:
        return exempt or AclDecision(True, direction, "not filtered")
    return evaluate_acl(acl, flow, direction, prefix_lists)


def evaluate_flow(
    flow: Flow,
    src_vswitch_id: str | None,
    dst_vswitch_id: str | None,
    acls: Iterable[NetworkAcl],
    *,
    prefix_lists: PrefixLists | None = None,
) -> AclFlowDecision:
    """ACL verdict on `flow`: the source vSwitch's egress entries and the destination
    vSwitch's ingress entries must both allow it."""
    acl_list = list(acls)
    egress = evaluate_side(
        flow,
        Direction.EGRESS,
        src_vswitch_id,
        acl_list,
        peer_vswitch_id=dst_vswitch_id,
        prefix_lists=prefix_lists,
    )
    ingress = evaluate_side(
        flow,
        Direction.INGRESS,
        dst_vswitch_id,
        acl_list,
        peer_vswitch_id=src_vswitch_id,
        prefix_lists=prefix_lists,
    )
    return AclFlowDecision(flow=flow, egress=egress, ingress=ingress)


PortInterval = tuple[int, int]


def _subtract(intervals: list[PortInterval], low: int, high: int) -> list[PortInterval]:
    """`intervals` minus [low, high]."""
    remaining = []
    for start, end in intervals:
        if end < low or start > high:
            remaining.append((start, end))
            continue
        if start < low:
            remaining.append((start, low - 1))
        if end > high:
            remaining.append((high + 1, end))
    return remaining


def _merge(intervals: Iterable[PortInterval]) -> tuple[PortInterval, ...]:
    merged: list[PortInterval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def denied_ports(
    flow: Flow,
    direction: Direction,
    vswitch_id: str | None,
    acls: Sequence[NetworkAcl],
    ports: PortInterval,
    *,
    peer_vswitch_id: str | None = None,
    prefix_lists: PrefixLists | None = None,
) -> tuple[PortInterval, ...]:
    """Destination ports in `ports` (inclusive) that one ACL side denies for `flow`
    (a TCP/UDP flow whose own `dst_port` is ignored), as merged intervals."""
    low, high = ports
    if not MIN_PORT <= low <= high <= MAX_PORT:
        raise ValueError(f"port interval {ports} is out of 1..65535 or reversed")
    exempt, acl = _exemption(flow, direction, vswitch_id, acls, peer_vswitch_id)
    if exempt is not None or acl is None:
        return ()
    undecided: list[PortInterval] = [(low, high)]
    denied: list[PortInterval] = []
    for entry in acl.entries(direction):
        if not undecided:
            break
        if not _matches_ignoring_port(entry, flow, prefix_lists):
            continue
        entry_low, entry_high = entry.port_range.bounds()
        if entry.policy is Policy.DROP:
            denied.extend(
                (max(start, entry_low), min(end, entry_high))
                for start, end in undecided
                if start <= entry_high and end >= entry_low
            )
        undecided = _subtract(undecided, entry_low, entry_high)
    denied.extend(undecided)  # implicit deny
    return _merge(denied)


@dataclass(frozen=True)
class ReplyDecision:
    """Verdict on the reply of a flow: for TCP/UDP without a client port, the ephemeral
    ports that the ACLs deny on the way back (empty when the whole range passes)."""

    flow: Flow
    accepted: bool
    ephemeral_ports: PortInterval | None
    denied_egress: tuple[PortInterval, ...] = ()
    denied_ingress: tuple[PortInterval, ...] = ()
    decision: AclFlowDecision | None = None

    def __str__(self) -> str:
        verdict = "allowed" if self.accepted else "denied"
        if self.decision is not None:
            return f"reply of {self.flow} {verdict}: {self.decision}"
        detail = ""
        if not self.accepted:
            detail = (
                f" (denied client ports: egress {list(self.denied_egress)},"
                f" ingress {list(self.denied_ingress)})"
            )
        low, high = self.ephemeral_ports or (0, 0)
        return f"reply of {self.flow} to ports {low}-{high} {verdict}{detail}"


def evaluate_reply(
    flow: Flow,
    src_vswitch_id: str | None,
    dst_vswitch_id: str | None,
    acls: Iterable[NetworkAcl],
    *,
    client_port: int | None = None,
    ephemeral_ports: PortInterval = EPHEMERAL_PORTS,
    prefix_lists: PrefixLists | None = None,
) -> ReplyDecision:
    """Whether the ACLs let the reply of `flow` back (stateless: the reply is checked
    as its own flow, from the server's vSwitch egress to the client's vSwitch ingress).

    For TCP/UDP with no `client_port`, every port of `ephemeral_ports` (default
    1024-65535, the documented recommendation) must pass; ICMP/GRE replies are the
    reversed flow.
    """
    acl_list = list(acls)
    if not flow.protocol.has_ports or client_port is not None:
        decision = evaluate_flow(
            flow.reply(client_port),
            dst_vswitch_id,
            src_vswitch_id,
            acl_list,
            prefix_lists=prefix_lists,
        )
        return ReplyDecision(flow, decision.accepted, None, decision=decision)
    reply = flow.reply(ephemeral_ports[0])
    denied_egress = denied_ports(
        reply,
        Direction.EGRESS,
        dst_vswitch_id,
        acl_list,
        ephemeral_ports,
        peer_vswitch_id=src_vswitch_id,
        prefix_lists=prefix_lists,
    )
    denied_ingress = denied_ports(
        reply,
        Direction.INGRESS,
        src_vswitch_id,
        acl_list,
        ephemeral_ports,
        peer_vswitch_id=dst_vswitch_id,
        prefix_lists=prefix_lists,
    )
    return ReplyDecision(
        flow=flow,
        accepted=not denied_egress and not denied_ingress,
        ephemeral_ports=ephemeral_ports,
        denied_egress=denied_egress,
        denied_ingress=denied_ingress,
    )
