"""Typed models of Alibaba Cloud network ACLs, parsed from API JSON.

`network_acl_from_api` takes the body of VPC `DescribeNetworkAclAttributes`
(`NetworkAclAttribute.IngressAclEntries...`) or the `to_map()` output of the official SDK
response body, which has the same keys. `nacl` evaluates these models for a flow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_hpcnet.cloud.rules import (
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

PREFIX_LIST_PREFIX = "pl-"


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
    raw = api_items(container, key)
    # A `Priority` key, should a future API version return one, orders entries;
    # otherwise the list order is the evaluation order (stable sort keeps it).
    indexed = list(enumerate(raw))
    if any(api_text(item, "Priority") for item in raw):
        indexed.sort(key=lambda pair: (int(api_text(pair[1], "Priority") or 10**9), pair[0]))
    entries = []
    for position, (_, item) in enumerate(indexed, start=1):
        cidr_text = api_text(item, cidr_key)
        protocol_text = api_text(item, "Protocol")
        if cidr_text is None or protocol_text is None:
            raise CloudModelError(f"ACL entry without {cidr_key} or Protocol: {dict(item)}")
        port_text = api_text(item, "Port") or "-1/-1"
        # "The source CIDR block. You can also specify a prefix list" (UpdateNetworkAclEntries,
        # https://www.alibabacloud.com/help/en/vpc/developer-reference/api-vpc-2016-04-28-updatenetworkaclentries).
        is_list = cidr_text.lower().startswith(PREFIX_LIST_PREFIX)
        entries.append(
            NetworkAclEntry(
                direction=direction,
                priority=int(api_text(item, "Priority") or position),
                policy=Policy.parse(api_text(item, "Policy")),
                protocol=Protocol.parse(protocol_text),
                port_range=PortRange.parse(port_text),
                cidr=None if is_list else parse_cidr(cidr_text),
                entry_id=api_text(item, "NetworkAclEntryId"),
                name=api_text(item, "NetworkAclEntryName"),
                entry_type=api_text(item, "EntryType"),
                description=api_text(item, "Description"),
                prefix_list_id=cidr_text if is_list else None,
                ip_version=api_text(item, "IpVersion"),
            )
        )
    return tuple(entries)


def network_acl_from_api(body: Mapping[str, Any]) -> NetworkAcl:
    """A NetworkAcl from a `DescribeNetworkAclAttributes` body (or its `NetworkAclAttribute`).

    Bound vSwitches are the `Resources.Resource[]` items of type `VSwitch` (or without a
    type) whose status is not `UNBINDED`.
    """
    attribute = body.get("NetworkAclAttribute", body)
    acl_id = api_text(attribute, "NetworkAclId")
    if acl_id is None:
        raise CloudModelError("network ACL body without NetworkAclId")
    vswitches = []
    for resource in api_items(attribute.get("Resources"), "Resource"):
        resource_type = (api_text(resource, "ResourceType") or "VSwitch").lower()
        status = (api_text(resource, "Status") or "").upper()
        resource_id = api_text(resource, "ResourceId")
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
        name=api_text(attribute, "NetworkAclName"),
        vpc_id=api_text(attribute, "VpcId"),
        status=api_text(attribute, "Status"),
    )
