"""Typed models of Alibaba Cloud security groups and network ACLs, parsed from API JSON.

`security_group_from_api` takes the body of ECS `DescribeSecurityGroupAttribute`
(`Permissions.Permission[]`, `InnerAccessPolicy`, ...); `network_acl_from_api` the body
of VPC `DescribeNetworkAclAttributes` (`NetworkAclAttribute.IngressAclEntries...`).
Both accept the `to_map()` output of the official SDK response bodies, which has the
same keys. `Flow` is the traffic the evaluators judge.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeAlias

IpAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network

MIN_PORT = 1
MAX_PORT = 65535
MIN_SG_PRIORITY = 1
MAX_SG_PRIORITY = 100
PREFIX_LIST_PREFIX = "pl-"


class CloudModelError(ValueError):
    """An API document that does not have the documented shape."""


class Protocol(str, Enum):
    """IP protocol of a rule (`ALL` matches every protocol) or of a flow."""

    TCP = "TCP"
    UDP = "UDP"
    ICMP = "ICMP"
    ICMPV6 = "ICMPV6"
    GRE = "GRE"
    ALL = "ALL"

    @classmethod
    def parse(cls, text: str | int) -> Protocol:
        """`TCP`, `tcp`, `all`, `ICMPv6`, ... or an IANA protocol number (`6`, `-1`).

        Some regions return `IpProtocol` as the IANA number; the numbers are those of the
        IANA *Protocol Numbers* registry (https://www.iana.org/assignments/protocol-numbers),
        `-1` being "all" as in the API's own `-1/-1` port notation.
        """
        cleaned = str(text).strip().upper()
        if cleaned in IANA_PROTOCOLS:
            return IANA_PROTOCOLS[cleaned]
        try:
            return cls(cleaned)
        except ValueError:
            raise CloudModelError(f"unknown IP protocol {text!r}") from None

    @property
    def has_ports(self) -> bool:
        """True for TCP and UDP, whose rules and flows carry ports."""
        return self in (Protocol.TCP, Protocol.UDP)


IANA_PROTOCOLS: dict[str, Protocol] = {
    "1": Protocol.ICMP,
    "6": Protocol.TCP,
    "17": Protocol.UDP,
    "47": Protocol.GRE,
    "58": Protocol.ICMPV6,
    "-1": Protocol.ALL,
}
"""IANA protocol numbers of the protocols a rule can name."""


class Policy(str, Enum):
    """Action of a rule or entry."""

    ACCEPT = "Accept"
    DROP = "Drop"

    @classmethod
    def parse(cls, text: str | None, default: Policy | None = None) -> Policy:
        """`Accept`/`accept`/`Drop`/`drop` as a Policy (`default` when missing)."""
        if not text:
            if default is None:
                raise CloudModelError("missing policy")
            return default
        lowered = str(text).strip().lower()
        if lowered == "accept":
            return cls.ACCEPT
        if lowered == "drop":
            return cls.DROP
        raise CloudModelError(f"unknown policy {text!r}")


class Direction(str, Enum):
    """Direction of a rule, seen from the instance (security group) or vSwitch (ACL)."""

    INGRESS = "ingress"
    EGRESS = "egress"

    @classmethod
    def parse(cls, text: str) -> Direction:
        """`ingress`/`egress` in any case as a Direction."""
        try:
            return cls(str(text).strip().lower())
        except ValueError:
            raise CloudModelError(f"unknown direction {text!r}") from None


@dataclass(frozen=True, order=True)
class PortRange:
    """Inclusive port range; `-1/-1` (start == end == -1) means every port."""

    start: int
    end: int

    @classmethod
    def parse(cls, text: str) -> PortRange:
        """`22/22`, `1/200` or `-1/-1` as a PortRange."""
        parts = str(text).strip().split("/")
        if len(parts) != 2:
            raise CloudModelError(f"port range {text!r} is not of the form a/b")
        try:
            start, end = int(parts[0]), int(parts[1])
        except ValueError:
            raise CloudModelError(f"port range {text!r} is not numeric") from None
        if (start, end) == (-1, -1):
            return ALL_PORTS
        if not MIN_PORT <= start <= end <= MAX_PORT:
            raise CloudModelError(f"port range {text!r} is out of 1..65535 or reversed")
        return cls(start, end)

    @property
    def is_all(self) -> bool:
        """True for `-1/-1`."""
        return self.start == -1

    def contains(self, port: int | None) -> bool:
        """Whether `port` is in the range; a missing port is only in `-1/-1`."""
        if self.is_all:
            return True
        return port is not None and self.start <= port <= self.end

    def bounds(self) -> tuple[int, int]:
        """(first, last) port covered, `-1/-1` being 1..65535."""
        return (MIN_PORT, MAX_PORT) if self.is_all else (self.start, self.end)

    def __str__(self) -> str:
        return f"{self.start}/{self.end}"


ALL_PORTS = PortRange(-1, -1)


def parse_ip(text: str | IpAddress) -> IpAddress:
    """An IPv4 or IPv6 address from text."""
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise CloudModelError(f"not an IP address: {text!r}") from None


def parse_cidr(text: str) -> IpNetwork:
    """A CIDR block (`10.0.0.0/8`, a bare address as /32 or /128); host bits tolerated."""
    try:
        return ipaddress.ip_network(str(text).strip(), strict=False)
    except ValueError:
        raise CloudModelError(f"not a CIDR block: {text!r}") from None


def network_contains(network: IpNetwork, address: IpAddress) -> bool:
    """Whether `address` is in `network`; False across address families."""
    return network.version == address.version and address in network


def _text(item: Mapping[str, Any], key: str) -> str | None:
    """`item[key]` as stripped text, None when missing or empty."""
    value = item.get(key)
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def _items(container: Any, key: str) -> list[dict[str, Any]]:
    """The list under `{"Key": [...]}` (API shape), or `container` itself if a list."""
    if container is None:
        return []
    if isinstance(container, list):
        return container
    if isinstance(container, Mapping):
        inner = container.get(key)
        if inner is None:
            return []
        if isinstance(inner, list):
            return inner
        if isinstance(inner, Mapping):
            return [dict(inner)]
    raise CloudModelError(f"expected a list under {key!r}, got {type(container).__name__}")


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
        text = _text(permission, v4_key) or _text(permission, v6_key)
        return parse_cidr(text) if text else None

    direction_text = _text(permission, "Direction")
    protocol_text = _text(permission, "IpProtocol")
    if direction_text is None or protocol_text is None:
        raise CloudModelError(f"permission without Direction or IpProtocol: {dict(permission)}")
    port_text = _text(permission, "PortRange")
    port_list = _text(permission, "PortRangeListId")
    # "If you specify PortRange, PortRangeListId is ignored" (AuthorizeSecurityGroup,
    # https://www.alibabacloud.com/help/en/ecs/developer-reference/api-ecs-2014-05-26-authorizesecuritygroup).
    # A port-list rule may come back with an empty or `-1/-1` PortRange: then the list decides.
    port_range = PortRange.parse(port_text) if port_text else ALL_PORTS
    if port_list and not port_range.is_all:
        port_list = None
    if not port_text and not port_list:
        raise CloudModelError(f"permission without PortRange: {dict(permission)}")
    priority_text = _text(permission, "Priority") or "1"
    try:
        priority = int(priority_text)
    except ValueError:
        raise CloudModelError(f"priority {priority_text!r} is not an integer") from None
    if not MIN_SG_PRIORITY <= priority <= MAX_SG_PRIORITY:
        raise CloudModelError(f"priority {priority} is out of 1..100")
    source_ports = _text(permission, "SourcePortRange")
    return SecurityGroupRule(
        security_group_id=security_group_id,
        direction=Direction.parse(direction_text),
        protocol=Protocol.parse(protocol_text),
        port_range=port_range,
        policy=Policy.parse(_text(permission, "Policy"), default=Policy.ACCEPT),
        priority=priority,
        source_cidr=cidr("SourceCidrIp", "Ipv6SourceCidrIp"),
        dest_cidr=cidr("DestCidrIp", "Ipv6DestCidrIp"),
        source_group_id=_text(permission, "SourceGroupId"),
        dest_group_id=_text(permission, "DestGroupId"),
        source_prefix_list_id=_text(permission, "SourcePrefixListId"),
        dest_prefix_list_id=_text(permission, "DestPrefixListId"),
        source_port_range=PortRange.parse(source_ports) if source_ports else ALL_PORTS,
        port_range_list_id=port_list,
        nic_type=_text(permission, "NicType"),
        rule_id=_text(permission, "SecurityGroupRuleId"),
        description=_text(permission, "Description"),
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
    group_id = _text(body, "SecurityGroupId")
    if group_id is None:
        raise CloudModelError("security group body without SecurityGroupId")
    kind = _group_type(group_type or _text(body, "SecurityGroupType"))
    default_inner = Policy.DROP if kind == ENTERPRISE_GROUP_TYPE else Policy.ACCEPT
    rules: list[SecurityGroupRule] = []
    for page in (body, *extra_pages):
        page_id = _text(page, "SecurityGroupId")
        if page_id is not None and page_id != group_id:
            raise CloudModelError(f"page of {page_id} mixed into {group_id}")
        for permission in _items(page.get("Permissions"), "Permission"):
            rules.append(security_group_rule_from_api(permission, group_id))
    return SecurityGroup(
        security_group_id=group_id,
        inner_access_policy=Policy.parse(_text(body, "InnerAccessPolicy"), default=default_inner),
        rules=tuple(rules),
        group_type=kind,
        name=_text(body, "SecurityGroupName"),
        vpc_id=_text(body, "VpcId"),
    )


@dataclass(frozen=True)
class NetworkAclEntry:
    """One network ACL entry; `cidr` is the source (ingress) or destination (egress).

    `priority` is 1 for the first entry of its direction: the API returns entries in
    evaluation order and has no priority field, so order is priority.
    """

    direction: Direction
    priority: int
    policy: Policy
    protocol: Protocol
    port_range: PortRange
    cidr: IpNetwork | None
    entry_id: str | None = None
    name: str | None = None
    entry_type: str | None = None
    description: str | None = None
    prefix_list_id: str | None = None
    """Set instead of `cidr` when the entry's peer is a prefix list (`pl-...`)."""
    ip_version: str | None = None

    @property
    def peer_text(self) -> str:
        """The CIDR or prefix list the entry matches."""
        return str(self.cidr) if self.cidr is not None else str(self.prefix_list_id)

    @property
    def label(self) -> str:
        """Entry name or id, for reports."""
        return self.name or self.entry_id or f"{self.direction.value}#{self.priority}"

    def __str__(self) -> str:
        peer = "from" if self.direction is Direction.INGRESS else "to"
        return (
            f"{self.label} ({self.direction.value} priority {self.priority}): "
            f"{self.policy.value} {self.protocol.value} {self.port_range} {peer} {self.peer_text}"
        )


@dataclass(frozen=True)
class NetworkAcl:
    """A network ACL with its entries (in priority order) and bound vSwitches."""

    network_acl_id: str
    ingress_entries: tuple[NetworkAclEntry, ...] = ()
    egress_entries: tuple[NetworkAclEntry, ...] = ()
    vswitch_ids: tuple[str, ...] = ()
    name: str | None = None
    vpc_id: str | None = None
    status: str | None = None

    def entries(self, direction: Direction) -> tuple[NetworkAclEntry, ...]:
        """Entries of one direction, in evaluation order."""
        return self.ingress_entries if direction is Direction.INGRESS else self.egress_entries


def _acl_entries(
    container: Any, key: str, direction: Direction, cidr_key: str
) -> tuple[NetworkAclEntry, ...]:
    raw = _items(container, key)
    # A `Priority` key, should a future API version return one, orders entries;
    # otherwise the list order is the evaluation order (stable sort keeps it).
    indexed = list(enumerate(raw))
    if any(_text(item, "Priority") for item in raw):
        indexed.sort(key=lambda pair: (int(_text(pair[1], "Priority") or 10**9), pair[0]))
    entries = []
    for position, (_, item) in enumerate(indexed, start=1):
        cidr_text = _text(item, cidr_key)
        protocol_text = _text(item, "Protocol")
        if cidr_text is None or protocol_text is None:
            raise CloudModelError(f"ACL entry without {cidr_key} or Protocol: {dict(item)}")
        port_text = _text(item, "Port") or "-1/-1"
        # "The source CIDR block. You can also specify a prefix list" (UpdateNetworkAclEntries,
        # https://www.alibabacloud.com/help/en/vpc/developer-reference/api-vpc-2016-04-28-updatenetworkaclentries).
        is_list = cidr_text.lower().startswith(PREFIX_LIST_PREFIX)
        entries.append(
            NetworkAclEntry(
                direction=direction,
                priority=int(_text(item, "Priority") or position),
                policy=Policy.parse(_text(item, "Policy")),
                protocol=Protocol.parse(protocol_text),
                port_range=PortRange.parse(port_text),
                cidr=None if is_list else parse_cidr(cidr_text),
                entry_id=_text(item, "NetworkAclEntryId"),
                name=_text(item, "NetworkAclEntryName"),
                entry_type=_text(item, "EntryType"),
                description=_text(item, "Description"),
                prefix_list_id=cidr_text if is_list else None,
                ip_version=_text(item, "IpVersion"),
            )
        )
    return tuple(entries)


def network_acl_from_api(body: Mapping[str, Any]) -> NetworkAcl:
    """A NetworkAcl from a `DescribeNetworkAclAttributes` body (or its `NetworkAclAttribute`).

    Bound vSwitches are the `Resources.Resource[]` items of type `VSwitch` (or without a
    type) whose status is not `UNBINDED`.
    """
    attribute = body.get("NetworkAclAttribute", body)
    acl_id = _text(attribute, "NetworkAclId")
    if acl_id is None:
        raise CloudModelError("network ACL body without NetworkAclId")
    vswitches = []
    for resource in _items(attribute.get("Resources"), "Resource"):
        resource_type = (_text(resource, "ResourceType") or "VSwitch").lower()
        status = (_text(resource, "Status") or "").upper()
        resource_id = _text(resource, "ResourceId")
        if resource_type == "vswitch" and resource_id and status != "UNBINDED":
            vswitches.append(resource_id)
    return NetworkAcl(
        network_acl_id=acl_id,
        ingress_entries=_acl_entries(
            attribute.get("IngressAclEntries"), "IngressAclEntry", Direction.INGRESS, "SourceCidrIp"
        ),
        egress_entries=_acl_entries(
            attribute.get("EgressAclEntries"),
            "EgressAclEntry",
            Direction.EGRESS,
            "DestinationCidrIp",
        ),
        vswitch_ids=tuple(vswitches),
        name=_text(attribute, "NetworkAclName"),
        vpc_id=_text(attribute, "VpcId"),
        status=_text(attribute, "Status"),
    )


def _frozen_ids(ids: Iterable[str] | str) -> frozenset[str]:
    if isinstance(ids, str):
        return frozenset([ids])
    return frozenset(ids)


@dataclass(frozen=True)
class Flow:
    """Traffic from `src_ip` to `dst_ip`; the groups are those of each endpoint's ENI.

    `dst_port` is required for TCP and UDP and absent otherwise; an endpoint with no
    security groups is outside the audited instances (internet, IDC, cloud service).
    `src_port` is only needed to match quintuple rules with a `SourcePortRange`.
    """

    src_ip: IpAddress
    dst_ip: IpAddress
    protocol: Protocol
    dst_port: int | None = None
    src_groups: frozenset[str] = field(default_factory=frozenset)
    dst_groups: frozenset[str] = field(default_factory=frozenset)
    src_port: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "src_ip", parse_ip(self.src_ip))
        object.__setattr__(self, "dst_ip", parse_ip(self.dst_ip))
        protocol = self.protocol
        if not isinstance(protocol, Protocol):
            protocol = Protocol.parse(protocol)
            object.__setattr__(self, "protocol", protocol)
        if protocol is Protocol.ALL:
            raise CloudModelError("a flow has one concrete protocol, not ALL")
        object.__setattr__(self, "src_groups", _frozen_ids(self.src_groups))
        object.__setattr__(self, "dst_groups", _frozen_ids(self.dst_groups))
        for name in ("dst_port", "src_port"):
            port = getattr(self, name)
            if port is not None and not MIN_PORT <= port <= MAX_PORT:
                raise CloudModelError(f"{name} {port} is out of 1..65535")
        if protocol.has_ports and self.dst_port is None:
            raise CloudModelError(f"a {protocol.value} flow needs a dst_port")
        if not protocol.has_ports and (self.dst_port is not None or self.src_port is not None):
            raise CloudModelError(f"a {protocol.value} flow has no ports")

    def reply(self, client_port: int | None = None) -> Flow:
        """The return flow (dst -> src); for TCP/UDP `client_port` is its dst_port."""
        return Flow(
            src_ip=self.dst_ip,
            dst_ip=self.src_ip,
            protocol=self.protocol,
            dst_port=client_port if self.protocol.has_ports else None,
            src_groups=self.dst_groups,
            dst_groups=self.src_groups,
            src_port=self.dst_port,
        )

    def __str__(self) -> str:
        port = f":{self.dst_port}" if self.dst_port is not None else ""
        return f"{self.protocol.value} {self.src_ip} -> {self.dst_ip}{port}"
