"""Network interfaces (ENIs and ERIs) of an instance, from ECS DescribeNetworkInterfaces.

Security groups and the vSwitch belong to each interface, not to the instance: a secondary
ENI, and an elastic RDMA interface (ERI, an ENI whose `NetworkInterfaceTrafficMode` is
`HighPerformance`), can sit in other groups and vSwitches than the primary ENI. "The ERI
shares the IP addresses and security group rules of the ENI" (ECS *ERIs*,
https://help.aliyun.com/en/ecs/user-guide/elastic-rdma-network-interface-card-eri), so an
ERI is judged with its own ENI's groups and vSwitch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_hpcnet.cloud.rules import CloudModelError

HIGH_PERFORMANCE = "HighPerformance"
"""`NetworkInterfaceTrafficMode` of an ERI (`Standard` for an ordinary ENI)."""
PRIMARY = "Primary"


@dataclass(frozen=True)
class NetworkInterface:
    """One ENI: its groups, vSwitch and addresses (primary private IPv4 first)."""

    interface_id: str
    instance_id: str | None
    kind: str
    """`Primary` or `Secondary` (the API's `Type`)."""
    traffic_mode: str
    vswitch_id: str | None
    security_group_ids: tuple[str, ...]
    private_ips: tuple[str, ...]
    ipv6_addresses: tuple[str, ...] = ()
    network_card_index: int | None = None

    @property
    def role(self) -> str:
        """`eri` (HighPerformance), `primary` or `secondary`: flows pair interfaces of one role."""
        if self.traffic_mode == HIGH_PERFORMANCE:
            return "eri"
        return "primary" if self.kind == PRIMARY else "secondary"

    @property
    def address(self) -> str | None:
        """The primary private IPv4 address."""
        return self.private_ips[0] if self.private_ips else None

    def __str__(self) -> str:
        label = {"eri": "ERI", "primary": "primary ENI", "secondary": "secondary ENI"}[self.role]
        return f"{label} {self.interface_id} {self.address or '?'}"


def _list(container: Any, key: str) -> list[Any]:
    if not container:
        return []
    if isinstance(container, Mapping):
        inner = container.get(key) or []
        return list(inner) if isinstance(inner, list) else [inner]
    raise CloudModelError(f"expected {{{key!r}: [...]}}, got {type(container).__name__}")


def interface_from_api(item: Mapping[str, Any]) -> NetworkInterface:
    """One `NetworkInterfaceSets.NetworkInterfaceSet[]` item as a NetworkInterface."""
    interface_id = str(item.get("NetworkInterfaceId") or "").strip()
    if not interface_id:
        raise CloudModelError("network interface without NetworkInterfaceId")
    primary_ip = str(item.get("PrivateIpAddress") or "").strip()
    ips = [primary_ip] if primary_ip else []
    for entry in _list(item.get("PrivateIpSets"), "PrivateIpSet"):
        address = str(entry.get("PrivateIpAddress") or "").strip()
        if address and address not in ips:
            ips.append(address)
    ipv6 = [
        str(entry.get("Ipv6Address")).strip()
        for entry in _list(item.get("Ipv6Sets"), "Ipv6Set")
        if entry.get("Ipv6Address")
    ]
    card = (item.get("Attachment") or {}).get("NetworkCardIndex")
    return NetworkInterface(
        interface_id=interface_id,
        instance_id=item.get("InstanceId") or None,
        kind=str(item.get("Type") or "").strip() or "Secondary",
        traffic_mode=str(item.get("NetworkInterfaceTrafficMode") or "Standard").strip(),
        vswitch_id=item.get("VSwitchId") or None,
        security_group_ids=tuple(_list(item.get("SecurityGroupIds"), "SecurityGroupId")),
        private_ips=tuple(ips),
        ipv6_addresses=tuple(ipv6),
        network_card_index=int(card) if card is not None else None,
    )
