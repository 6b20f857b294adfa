"""What the audit read of the control plane: nodes, their interfaces, groups, lists, ACLs.

Gathered once per session by `audit.gather` and judged by `verdicts` without further
calls. Everything that could not be read is kept with its one-line reason, so that a
verdict that needs it says what is missing instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_hpcnet.cloud.interfaces import NetworkInterface
from pytest_hpcnet.cloud.nacl_model import NetworkAcl
from pytest_hpcnet.cloud.readers import InstanceInfo, InstanceTypeInfo
from pytest_hpcnet.cloud.rules import PortRange
from pytest_hpcnet.cloud.secgroup_model import SecurityGroup


@dataclass(frozen=True)
class NodeCloud:
    """One node as the control plane knows it; `problem` says why it is not matched."""

    name: str
    instance: InstanceInfo | None = None
    address: str | None = None
    matched_by: str = ""
    problem: str | None = None
    interfaces: tuple[NetworkInterface, ...] = ()
    """Every ENI of the instance (DescribeNetworkInterfaces): primary, secondary, ERIs."""

    @property
    def primary(self) -> NetworkInterface | None:
        """The primary ENI."""
        return next((i for i in self.interfaces if i.role == "primary"), None)

    @property
    def vswitch_id(self) -> str | None:
        """The primary ENI's vSwitch."""
        primary = self.primary
        return primary.vswitch_id if primary else None

    @property
    def security_group_ids(self) -> tuple[str, ...]:
        """The groups of every interface of the node."""
        found: list[str] = []
        for interface in self.interfaces:
            found.extend(g for g in interface.security_group_ids if g not in found)
        return tuple(found)

    def interface_with(self, address: str) -> NetworkInterface | None:
        """The interface holding `address` (IPv4 or IPv6), None when none does."""
        for interface in self.interfaces:
            if address in interface.private_ips or address in interface.ipv6_addresses:
                return interface
        return None


@dataclass(frozen=True)
class ControlPlane:
    """Everything the audit read, gathered once."""

    region_id: str
    nodes: dict[str, NodeCloud]
    eri: dict[str, int] = field(default_factory=dict)
    groups: dict[str, SecurityGroup] = field(default_factory=dict)
    missing_groups: dict[str, str] = field(default_factory=dict)
    """Group id -> why it could not be read (deleted, another region, type unknown)."""
    acls: tuple[NetworkAcl, ...] = ()
    prefix_lists: dict[str, tuple[str, ...]] = field(default_factory=dict)
    port_lists: dict[str, tuple[PortRange, ...]] = field(default_factory=dict)
    missing_lists: dict[str, str] = field(default_factory=dict)
    """Prefix or port list id -> why it could not be read."""
    instance_types: dict[str, InstanceTypeInfo] = field(default_factory=dict)
    """Instance type -> its ERIs, vCPUs and memory (the DescribeInstanceTypes answer `eri`
    is read from)."""

    def node(self, name: str) -> NodeCloud:
        """A node by name (an unmatched placeholder for a node not in the snapshot)."""
        return self.nodes.get(name) or NodeCloud(name, problem=f"{name}: not in the snapshot")

    def gaps(self, *names: str) -> list[str]:
        """One line per reason these nodes cannot be judged (unmatched, no interface,
        unreadable group)."""
        found = []
        for name in names:
            node = self.node(name)
            if node.problem:
                found.append(node.problem)
                continue
            for interface in node.interfaces:
                for group_id in interface.security_group_ids:
                    if group_id in self.missing_groups:
                        found.append(
                            f"{name}: security group {group_id} of {interface.interface_id} "
                            f"could not be read ({self.missing_groups[group_id]})"
                        )
        return found

    def explain(self, message: str) -> str:
        """`message` plus why a prefix or port list it names could not be read."""
        for list_id, reason in sorted(self.missing_lists.items()):
            if list_id in message:
                return f"{message}: {list_id} could not be read ({reason})"
        return message
