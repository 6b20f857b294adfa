"""The terms of Alibaba Cloud security-group rules and network-ACL entries, and `Flow`.

Protocol, policy, direction, port range and IP/CIDR parsing are shared by the parsed API
models (`secgroup_model`, `nacl_model`) and by their evaluators (`secgroup`, `nacl`);
`api_text` and `api_items` read the API's JSON shapes. `Flow` is the traffic the
evaluators judge.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeAlias

IpAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network

MIN_PORT = 1
MAX_PORT = 65535


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


@functools.lru_cache(maxsize=4096)
def parse_ip(text: str | IpAddress) -> IpAddress:
    """An IPv4 or IPv6 address from text (parsed once: each pair's flows ask again)."""
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise CloudModelError(f"not an IP address: {text!r}") from None


@functools.lru_cache(maxsize=4096)
def parse_cidr(text: str) -> IpNetwork:
    """A CIDR block (`10.0.0.0/8`, a bare address as /32 or /128); host bits tolerated."""
    try:
        return ipaddress.ip_network(str(text).strip(), strict=False)
    except ValueError:
        raise CloudModelError(f"not a CIDR block: {text!r}") from None


def network_contains(network: IpNetwork, address: IpAddress) -> bool:
    """Whether `address` is in `network`; False across address families."""
    return network.version == address.version and address in network


def api_text(item: Mapping[str, Any], key: str) -> str | None:
    """`item[key]` as stripped text, None when missing or empty."""
    value = item.get(key)
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def api_items(container: Any, key: str) -> list[dict[str, Any]]:
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
