"""Typed models of Alibaba Cloud security groups, parsed from API JSON.

`security_group_from_api` takes the body of ECS `DescribeSecurityGroupAttribute`
(`Permissions.Permission[]`, `InnerAccessPolicy`, ...) or the `to_map()` output of the
official SDK response body, which has the same keys. `secgroup` evaluates these models
for a flow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_hpcnet.cloud.rules import (
    ALL_PORTS,
    CloudModelError,
    Direction,
    IpNetwork,
    Policy,
    PortRange,
    Protocol,
    api_items,
    api_text,
    parse_cidr,
)

MIN_SG_PRIORITY = 1
MAX_SG_PRIORITY = 100


@dataclass(frozen=True)
class Peer:
    """The peer of a rule: `kind` is `cidr`, `group` or `prefix_list`."""

    kind: str
    value: IpNetwork | str


@dataclass(frozen=True)
class SecurityGroupRule:
    """One `Permission` of a security group.

    For an ingress rule the peer is the source (`source_cidr`, `source_group_id`,
    `source_prefix_list_id`) and `dest_cidr`, when set, narrows the local address
    (a "quintuple" rule); for an egress rule the other way round.
    """

    security_group_id: str
    direction: Direction
    protocol: Protocol
    port_range: PortRange
    policy: Policy
    priority: int
    source_cidr: IpNetwork | None = None
    dest_cidr: IpNetwork | None = None
    source_group_id: str | None = None
    dest_group_id: str | None = None
    source_prefix_list_id: str | None = None
    dest_prefix_list_id: str | None = None
    source_port_range: PortRange = ALL_PORTS
    port_range_list_id: str | None = None
    nic_type: str | None = None
    rule_id: str | None = None
    description: str | None = None

    def effective_peer(self) -> Peer | None:
        """The one peer field that takes effect: CIDR, else group, else prefix list.

        "If both SourceGroupId and SourceCidrIp are specified, SourceCidrIp prevails" and
        "if you specify SourceCidrIp, Ipv6SourceCidrIp, or SourceGroupId, the system
        ignores SourcePrefixListId" (ROS *ALIYUN::ECS::SecurityGroupIngress*,
        https://www.alibabacloud.com/help/en/ros/developer-reference/aliyun-ecs-securitygroupingress;
        the egress page says the same of DestCidrIp, DestGroupId and DestPrefixListId).
        None when the rule names no peer (it then authorizes nothing).
        """
        if self.direction is Direction.INGRESS:
            cidr, group, prefix_list = (
                self.source_cidr,
                self.source_group_id,
                self.source_prefix_list_id,
            )
        else:
            cidr, group, prefix_list = self.dest_cidr, self.dest_group_id, self.dest_prefix_list_id
        if cidr is not None:
            return Peer("cidr", cidr)
        if group is not None:
            return Peer("group", group)
        if prefix_list is not None:
            return Peer("prefix_list", prefix_list)
        return None

    @property
    def local_cidr(self) -> IpNetwork | None:
        """The local-side CIDR of a quintuple rule (DestCidrIp in, SourceCidrIp out)."""
        return self.dest_cidr if self.direction is Direction.INGRESS else self.source_cidr

    @property
    def peer_text(self) -> str:
        """The peer that takes effect, as text (CIDR, group or prefix list)."""
        peer = self.effective_peer()
        return str(peer.value) if peer else "?"

    def __str__(self) -> str:
        ports = self.port_range_list_id or str(self.port_range)
        ident = f" {self.rule_id}" if self.rule_id else ""
        return (
            f"{self.security_group_id}{ident} {self.direction.value} {self.policy.value} "
            f"{self.protocol.value} {ports} peer {self.peer_text} priority {self.priority}"
        )


def security_group_rule_from_api(
    permission: Mapping[str, Any], security_group_id: str
) -> SecurityGroupRule:
    """One `Permissions.Permission[]` item as a SecurityGroupRule."""

    def cidr(v4_key: str, v6_key: str) -> IpNetwork | None:
        text = api_text(permission, v4_key) or api_text(permission, v6_key)
        return parse_cidr(text) if text else None

    direction_text = api_text(permission, "Direction")
    protocol_text = api_text(permission, "IpProtocol")
    if direction_text is None or protocol_text is None:
        raise CloudModelError(f"permission without Direction or IpProtocol: {dict(permission)}")
    port_text = api_text(permission, "PortRange")
    port_list = api_text(permission, "PortRangeListId")
    # "If you specify PortRange, PortRangeListId is ignored" (AuthorizeSecurityGroup,
    # https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-authorizesecuritygroup).
    # A port-list rule may come back with an empty or `-1/-1` PortRange: then the list decides.
    port_range = PortRange.parse(port_text) if port_text else ALL_PORTS
    if port_list and not port_range.is_all:
        port_list = None
    if not port_text and not port_list:
        raise CloudModelError(f"permission without PortRange: {dict(permission)}")
    priority_text = api_text(permission, "Priority") or "1"
    try:
        priority = int(priority_text)
    except ValueError:
        raise CloudModelError(f"priority {priority_text!r} is not an integer") from None
    if not MIN_SG_PRIORITY <= priority <= MAX_SG_PRIORITY:
        raise CloudModelError(f"priority {priority} is out of 1..100")
    source_ports = api_text(permission, "SourcePortRange")
    return SecurityGroupRule(
        security_group_id=security_group_id,
        direction=Direction.parse(direction_text),
        protocol=Protocol.parse(protocol_text),
        port_range=port_range,
        policy=Policy.parse(api_text(permission, "Policy"), default=Policy.ACCEPT),
        priority=priority,
        source_cidr=cidr("SourceCidrIp", "Ipv6SourceCidrIp"),
        dest_cidr=cidr("DestCidrIp", "Ipv6DestCidrIp"),
        source_group_id=api_text(permission, "SourceGroupId"),
        dest_group_id=api_text(permission, "DestGroupId"),
        source_prefix_list_id=api_text(permission, "SourcePrefixListId"),
        dest_prefix_list_id=api_text(permission, "DestPrefixListId"),
        source_port_range=PortRange.parse(source_ports) if source_ports else ALL_PORTS,
        port_range_list_id=port_list,
        nic_type=api_text(permission, "NicType"),
        rule_id=api_text(permission, "SecurityGroupRuleId"),
        description=api_text(permission, "Description"),
    )


BASIC_GROUP_TYPE = "normal"
ENTERPRISE_GROUP_TYPE = "enterprise"


@dataclass(frozen=True)
class SecurityGroup:
    """A security group with its rules.

    `group_type` is `normal` (basic) or `enterprise` (advanced); the attribute call does
    not return it (DescribeSecurityGroups does), so it defaults to basic.
    """

    security_group_id: str
    inner_access_policy: Policy
    rules: tuple[SecurityGroupRule, ...] = ()
    group_type: str = BASIC_GROUP_TYPE
    name: str | None = None
    vpc_id: str | None = None

    @property
    def is_enterprise(self) -> bool:
        """True for an enterprise (advanced) security group."""
        return self.group_type == ENTERPRISE_GROUP_TYPE

    def rules_in(self, direction: Direction) -> tuple[SecurityGroupRule, ...]:
        """The rules of one direction."""
        return tuple(rule for rule in self.rules if rule.direction is direction)


def _group_type(text: str | None) -> str:
    lowered = (text or BASIC_GROUP_TYPE).strip().lower()
    if lowered in ("normal", "basic"):
        return BASIC_GROUP_TYPE
    if lowered in ("enterprise", "advanced"):
        return ENTERPRISE_GROUP_TYPE
    raise CloudModelError(f"unknown security group type {text!r}")


def security_group_from_api(
    body: Mapping[str, Any],
    *,
    group_type: str | None = None,
    extra_pages: Iterable[Mapping[str, Any]] = (),
) -> SecurityGroup:
    """A SecurityGroup from a `DescribeSecurityGroupAttribute` body.

    `extra_pages` are the bodies of the following pages (NextToken) whose permissions
    are appended; `group_type` (`normal`/`enterprise`) overrides a `SecurityGroupType`
    key when the body has one. A missing `InnerAccessPolicy` reads as `Accept` for a
    basic group (the documented default) and `Drop` for an enterprise group.
    """
    group_id = api_text(body, "SecurityGroupId")
    if group_id is None:
        raise CloudModelError("security group body without SecurityGroupId")
    kind = _group_type(group_type or api_text(body, "SecurityGroupType"))
    default_inner = Policy.DROP if kind == ENTERPRISE_GROUP_TYPE else Policy.ACCEPT
    rules: list[SecurityGroupRule] = []
    for page in (body, *extra_pages):
        page_id = api_text(page, "SecurityGroupId")
        if page_id is not None and page_id != group_id:
            raise CloudModelError(f"page of {page_id} mixed into {group_id}")
        for permission in api_items(page.get("Permissions"), "Permission"):
            rules.append(security_group_rule_from_api(permission, group_id))
    return SecurityGroup(
        security_group_id=group_id,
        inner_access_policy=Policy.parse(
            api_text(body, "InnerAccessPolicy"), default=default_inner
        ),
        rules=tuple(rules),
        group_type=kind,
        name=api_text(body, "SecurityGroupName"),
        vpc_id=api_text(body, "VpcId"),
    )
