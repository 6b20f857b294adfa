"""The flows the control-plane audit requires, and flows from hosts outside the cluster.

`CloudExpect.required_flows` (profile/inventory key `expect.cloud.required_flows`) are the
flows every pair of cluster nodes needs, each saying whether Alibaba Cloud documents it
(`documented`) or it is read from code (`inferred`) and where from.
`ExternalFlow` (inventory key `cloud.external_flows`) is a flow between a cluster node and
a host that is not a node (bastion, monitoring, CPFS mount target), declared with its
address so the audit can judge it.

The defaults follow docs/sources.md: Alibaba documents no eRDMA port. An ERI
"shares the IP addresses and security group rules of the ENI" (ECS *ERIs*), and eRDMA
runs iWARP by default, so its connections are TCP (RDMA_CM on the application's port);
NCCL's bootstrap and socket connections use ephemeral TCP ports, so nodes need all TCP
from each other (an intra-group accept gives it). The driver reserves TCP 30608-30623 for
compat-mode queue pairs (`reserve_ports_base`, a reading of alibaba/elastic-rdma-drivers).
UDP 4791 (RoCEv2) is not required: the driver uses it only on a software MAD path built
with ERDMA_FORCE_MAD_ENABLE.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MIN_PORT, MAX_PORT = 1, 65535


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _port_bounds(text: str) -> tuple[int, int]:
    low, _, high = str(text).strip().partition("-")
    first, last = int(low), int(high or low)
    if not MIN_PORT <= first <= last <= MAX_PORT:
        raise ValueError(f"port range {text!r} is out of 1..65535 or reversed")
    return first, last


class RequiredFlow(_Strict):
    """TCP or UDP on a port range that every pair of cluster nodes needs, both ways, on
    every pair of interfaces of one kind (primary ENIs, secondary ENIs, ERIs)."""

    protocol: Literal["tcp", "udp"]
    ports: str
    """`22` or `1-65535`."""
    basis: Literal["documented", "inferred"]
    source: str
    why: str = ""

    @field_validator("ports")
    @classmethod
    def _valid_ports(cls, value: str) -> str:
        try:
            _port_bounds(value)
        except ValueError as error:
            raise ValueError(f"ports must be N or A-B within 1..65535: {error}") from None
        return value

    @property
    def bounds(self) -> tuple[int, int]:
        """(first, last) port, inclusive."""
        return _port_bounds(self.ports)


def _default_required() -> list[RequiredFlow]:
    return [
        RequiredFlow(
            protocol="tcp",
            ports="22",
            basis="documented",
            source="sshd(8): port 22 by default; the suite reaches every node over SSH",
            why="the suite's own transport",
        ),
        RequiredFlow(
            protocol="tcp",
            ports="1-65535",
            basis="inferred",
            source=(
                "NCCL bootstrap and socket transport listen on ephemeral ports "
                "(NVIDIA/nccl src/bootstrap.cc binds port 0); iWARP eRDMA sets up "
                "connections over TCP on the application's port (alibaba/elastic-rdma-drivers)"
            ),
            why="NCCL and eRDMA connections between nodes; an intra-group accept covers it",
        ),
        RequiredFlow(
            protocol="tcp",
            ports="30608-30623",
            basis="inferred",
            source=(
                "alibaba/elastic-rdma-drivers erdma_main.c: reserve_ports_base 0x7790 (30608), "
                "16 ports for compat-mode queue pairs; not documented by Alibaba"
            ),
            why="eRDMA compat-mode (RoCE-compatible) data QPs",
        ),
    ]


class CloudExpect(_Strict):
    """What the control plane must let through between cluster nodes."""

    required_flows: list[RequiredFlow] = Field(default_factory=_default_required)


class ExternalFlow(_Strict):
    """A flow between a cluster node and a host outside the cluster.

    `inbound` is `address -> target`, `outbound` is `target -> address`. Give the host's
    `security_group_ids` (and `vswitch_id`) when it is an ECS instance in the VPC, so its
    own egress and its vSwitch's ACL are judged too; the node side is its primary ENI.
    """

    name: str
    address: str
    target: str
    protocol: Literal["tcp", "udp"] = "tcp"
    port: Annotated[int, Field(ge=MIN_PORT, le=MAX_PORT)]
    direction: Literal["inbound", "outbound"] = "inbound"
    expect: Literal["allow", "deny"] = "allow"
    security_group_ids: list[str] = Field(default_factory=list)
    vswitch_id: str | None = None

    @field_validator("address")
    @classmethod
    def _ip_address(cls, value: str) -> str:
        try:
            return str(ipaddress.ip_address(value.strip()))
        except ValueError:
            raise ValueError(f"address {value!r} is not an IPv4 or IPv6 address") from None

    @property
    def label(self) -> str:
        arrow = f"{self.name}->{self.target}"
        if self.direction == "outbound":
            arrow = f"{self.target}->{self.name}"
        return f"{self.expect}:{self.protocol}/{self.port}:{arrow}"
