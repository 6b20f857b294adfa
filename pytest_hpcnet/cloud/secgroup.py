"""Stateful evaluation of Alibaba Cloud ECS security groups for a flow.

Semantics (Alibaba Cloud ECS documentation, as read for this module):

* Rules of every security group of the instance's ENI are pooled and sorted together
  ("When an instance belongs to multiple security groups, rules from all groups are
  aggregated, sorted, and applied together with default rules" -- ECS user guide,
  *Security group rules*).
* Priority 1..100, a smaller number wins; at equal priority Drop beats Accept
  ("When multiple security group rules have the same priority, drop rules take
  precedence" -- API reference, *AuthorizeSecurityGroup*).
* A rule matches on protocol (`ALL` matches any), destination port range (TCP/UDP only;
  `-1/-1` is every port; `PortRange` wins over `PortRangeListId`) and peer: a CIDR
  containing the peer address, a security group the peer's ENI is in, or a prefix list
  one of whose CIDRs contains the peer. Only one peer field takes effect, CIDR over group
  over prefix list (`SecurityGroupRule.effective_peer`, with its source).
  The optional local-side CIDR (`DestCidrIp` of an ingress rule, `SourceCidrIp` of an
  egress rule) and `SourcePortRange` of quintuple rules must match too.
* Internal access policy of a basic group: with `Accept`, members of the group reach
  each other whatever the custom rules say ("the Accept internal access control policy
  takes precedence over user-created security group rules"; newer text: "other custom
  access rules are ignored" -- API reference, *ModifySecurityGroupPolicy*). With `Drop`
  the custom rules decide ("user-created security group rules take precedence over the
  Drop internal access control policy"), so `Drop` only removes the implicit accept;
  isolation has the lowest priority, so one shared group with `Accept` is enough
  (ECS use case *Network isolation within a basic security group*). Enterprise groups
  never have intra-group access.
* Defaults when nothing decides: basic groups deny inbound and allow all outbound;
  enterprise groups deny both ("Basic security groups allow inbound internal traffic
  from instances in the same group and allow all outbound traffic by default.
  Enterprise security groups deny both inbound and outbound traffic by default" --
  ECS user guide, *Security group rules*). One ENI cannot mix the two types.
* Stateful: a flow is accepted iff egress at the source and ingress at the
  destination both accept; replies of an accepted flow need no rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pytest_hpcnet.cloud.rules import (
    Direction,
    Flow,
    IpAddress,
    IpNetwork,
    Policy,
    PortRange,
    Protocol,
    network_contains,
    parse_cidr,
)
from pytest_hpcnet.cloud.secgroup_model import SecurityGroup, SecurityGroupRule

PrefixLists = Mapping[str, Iterable[str | IpNetwork]]
PortRangeLists = Mapping[str, Iterable[str | PortRange]]


class SecurityGroupConfigError(ValueError):
    """A configuration that cannot be evaluated (unknown reference, mixed group types)."""


@dataclass(frozen=True)
class Decision:
    """Verdict of one side: `rule` is the deciding rule or a description of the implicit
    policy (`default ingress deny`, `inner access Accept in sg-...`)."""

    accepted: bool
    rule: SecurityGroupRule | str
    direction: Direction

    @property
    def by_rule(self) -> bool:
        """True when a custom rule decided, False for an implicit policy."""
        return isinstance(self.rule, SecurityGroupRule)

    def __str__(self) -> str:
        verdict = "accept" if self.accepted else "deny"
        return f"{self.direction.value} {verdict}: {self.rule}"


@dataclass(frozen=True)
class FlowDecision:
    """Verdict of both sides of a flow; accepted iff both sides accept."""

    flow: Flow
    egress: Decision
    ingress: Decision

    @property
    def accepted(self) -> bool:
        """True when egress at the source and ingress at the destination accept."""
        return self.egress.accepted and self.ingress.accepted

    def __str__(self) -> str:
        verdict = "accepted" if self.accepted else "denied"
        return f"{self.flow} {verdict} by security groups ({self.egress}; {self.ingress})"


def _resolve_prefix_list(list_id: str, prefix_lists: PrefixLists | None) -> list[IpNetwork]:
    if prefix_lists is None or list_id not in prefix_lists:
        raise SecurityGroupConfigError(f"prefix list {list_id} is referenced but not given")
    return [
        entry if not isinstance(entry, str) else parse_cidr(entry)
        for entry in prefix_lists[list_id]
    ]


def _resolve_port_ranges(
    rule: SecurityGroupRule, port_range_lists: PortRangeLists | None
) -> list[PortRange]:
    list_id = rule.port_range_list_id
    if list_id is None:
        return [rule.port_range]
    if port_range_lists is None or list_id not in port_range_lists:
        raise SecurityGroupConfigError(f"port range list {list_id} is referenced but not given")
    return [
        entry if isinstance(entry, PortRange) else PortRange.parse(entry)
        for entry in port_range_lists[list_id]
    ]


def _source_port_matches(rule: SecurityGroupRule, flow: Flow) -> bool:
    """`SourcePortRange` of a quintuple rule against the flow's client port. An unknown
    client port could be any: it matches a Drop rule and never an Accept rule, so an
    unknown never opens a port."""
    if rule.source_port_range.is_all:
        return True
    if flow.src_port is None:
        return rule.policy is Policy.DROP
    return rule.source_port_range.contains(flow.src_port)


def _peer_and_local(
    rule: SecurityGroupRule, flow: Flow
) -> tuple[IpAddress, frozenset[str], IpAddress]:
    """(peer address, peer groups, local address) of `flow` as seen by `rule`."""
    if rule.direction is Direction.INGRESS:
        return flow.src_ip, flow.src_groups, flow.dst_ip
    return flow.dst_ip, flow.dst_groups, flow.src_ip


def rule_matches(
    rule: SecurityGroupRule,
    flow: Flow,
    *,
    prefix_lists: PrefixLists | None = None,
    port_range_lists: PortRangeLists | None = None,
) -> bool:
    """Whether `rule` applies to `flow` (direction is the caller's business).

    Raises SecurityGroupConfigError when the rule references a prefix list or port
    range list that is not given.
    """
    if rule.protocol is not Protocol.ALL and rule.protocol is not flow.protocol:
        return False
    if flow.protocol.has_ports:
        ranges = _resolve_port_ranges(rule, port_range_lists)
        if not any(port_range.contains(flow.dst_port) for port_range in ranges):
            return False
        if not _source_port_matches(rule, flow):
            return False
    peer_ip, peer_groups, local_ip = _peer_and_local(rule, flow)
    peer = rule.effective_peer()
    if peer is None:
        return False  # a rule without a peer authorizes nothing
    if peer.kind == "cidr":
        matched = network_contains(peer.value, peer_ip)
    elif peer.kind == "group":
        matched = peer.value in peer_groups
    else:
        matched = any(
            network_contains(network, peer_ip)
            for network in _resolve_prefix_list(str(peer.value), prefix_lists)
        )
    if not matched:
        return False
    local_cidr = rule.local_cidr
    return local_cidr is None or network_contains(local_cidr, local_ip)


def _default_decision(direction: Direction, groups: Sequence[SecurityGroup]) -> Decision:
    kinds = {group.is_enterprise for group in groups}
    if len(kinds) > 1:
        names = ", ".join(group.security_group_id for group in groups)
        raise SecurityGroupConfigError(f"basic and enterprise security groups mixed: {names}")
    enterprise = kinds == {True}
    if direction is Direction.INGRESS:
        kind = "enterprise" if enterprise else "basic"
        return Decision(False, f"default ingress deny ({kind} security group)", direction)
    if enterprise:
        return Decision(False, "default egress deny (enterprise security group)", direction)
    return Decision(True, "default egress accept (basic security group)", direction)


def evaluate_side(
    flow: Flow,
    direction: Direction,
    local_groups: Sequence[SecurityGroup],
    *,
    prefix_lists: PrefixLists | None = None,
    port_range_lists: PortRangeLists | None = None,
) -> Decision:
    """Verdict of the instance owning `local_groups` on `flow` in `direction`.

    Ingress is judged at the destination (`local_groups` are the destination's groups),
    egress at the source.
    """
    if not local_groups:
        side = "destination" if direction is Direction.INGRESS else "source"
        return Decision(True, f"{side} is in no security group (not an audited ENI)", direction)
    peer_groups = flow.src_groups if direction is Direction.INGRESS else flow.dst_groups
    for group in local_groups:
        if (
            not group.is_enterprise
            and group.inner_access_policy is Policy.ACCEPT
            and group.security_group_id in peer_groups
        ):
            return Decision(True, f"inner access Accept in {group.security_group_id}", direction)
    by_priority: dict[int, list[SecurityGroupRule]] = {}
    for group in local_groups:
        for rule in group.rules_in(direction):
            by_priority.setdefault(rule.priority, []).append(rule)
    for priority in sorted(by_priority):
        matching = [
            rule
            for rule in by_priority[priority]
            if rule_matches(
                rule, flow, prefix_lists=prefix_lists, port_range_lists=port_range_lists
            )
        ]
        drops = [rule for rule in matching if rule.policy is Policy.DROP]
        if drops:
            return Decision(False, drops[0], direction)
        if matching:
            return Decision(True, matching[0], direction)
    return _default_decision(direction, local_groups)


def _lookup(group_ids: Iterable[str], groups: Mapping[str, SecurityGroup]) -> list[SecurityGroup]:
    missing = sorted(set(group_ids) - set(groups))
    if missing:
        raise SecurityGroupConfigError(f"security groups not given: {', '.join(missing)}")
    return [groups[group_id] for group_id in sorted(group_ids)]


def index_groups(groups: Iterable[SecurityGroup]) -> dict[str, SecurityGroup]:
    """Security groups by id."""
    return {group.security_group_id: group for group in groups}


def evaluate_flow(
    flow: Flow,
    groups: Mapping[str, SecurityGroup] | Iterable[SecurityGroup],
    *,
    prefix_lists: PrefixLists | None = None,
    port_range_lists: PortRangeLists | None = None,
) -> FlowDecision:
    """Security-group verdict on `flow`: egress at the source and ingress at the
    destination, each instance's rules taken from `flow.src_groups`/`flow.dst_groups`
    looked up in `groups`."""
    catalog = groups if isinstance(groups, Mapping) else index_groups(groups)
    options = {"prefix_lists": prefix_lists, "port_range_lists": port_range_lists}
    egress = evaluate_side(flow, Direction.EGRESS, _lookup(flow.src_groups, catalog), **options)
    ingress = evaluate_side(flow, Direction.INGRESS, _lookup(flow.dst_groups, catalog), **options)
    return FlowDecision(flow=flow, egress=egress, ingress=ingress)
