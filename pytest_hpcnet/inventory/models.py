"""The pydantic models of the inventory file: as written (`InventoryFile`) and as loaded.

`InventoryFile` is the validated shape of the YAML (cluster, ssh, nodes or nodes_from,
expect, benchmarks, cloud, waivers, scheduler, actions, scope); `Inventory` is the loaded
cluster with `Node`s expanded from their `NodeSpec` ranges and expectations merged. The
one `Waiver` model lives here. `inventory.loader.load_inventory` builds an `Inventory`.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pytest_hpcnet.inventory.bench_settings import BenchmarkSettings, CloudSettings
from pytest_hpcnet.inventory.burnin_settings import BurninSettings
from pytest_hpcnet.inventory.expectations import Expectations, Strict
from pytest_hpcnet.inventory.gate_settings import ActionSettings, GateSettings, SchedulerSettings
from pytest_hpcnet.inventory.sources import NodesFrom
from pytest_hpcnet.inventory.ssh_files import file_problem

NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
RANGE = re.compile(r"\[([^\[\]]*)\]")
"""A bracketed range in a node name or host: Slurm `[001-004,010]` or Ansible `[01:16]`."""


JUMP_HOST = re.compile(
    r"^(?:[A-Za-z0-9_][A-Za-z0-9._-]*@)?[A-Za-z0-9_][A-Za-z0-9._-]{0,252}(?::(?P<port>\d{1,5}))?$"
)
"""`[user@]host[:port]`, as fabric splits a gateway's address."""


def check_jump_host(value: str | None) -> str | None:
    """A jump host fabric can split (`[user@]host[:port]`, port 1-65535): a typo is found
    when the inventory is read, not on every node at run time."""
    if value is None:
        return None
    found = JUMP_HOST.match(value)
    if found is None or (found["port"] is not None and not 1 <= int(found["port"]) <= 65535):
        raise ValueError(f"{value!r} is not [user@]host[:port] (port 1-65535)")
    return value


class SshSettings(Strict):
    """How to reach nodes; every field may be overridden per node."""

    user: str | None = None
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    identity_file: str | None = None
    passphrase: str | None = None
    known_hosts: str = "~/.ssh/known_hosts"
    host_key_policy: Literal["strict", "accept-new"] = "strict"
    connect_timeout_s: Annotated[float, Field(gt=0, le=600)] = 10.0
    command_timeout_s: Annotated[float, Field(gt=0, le=86400)] = 120.0
    concurrency: Annotated[int, Field(ge=1, le=1024)] = 64
    connect_retries: Annotated[int, Field(ge=1, le=10)] = 3
    jump_host: str | None = None
    config_file: str | None = None  # None: ~/.ssh/config and /etc/ssh/ssh_config

    _jump_host = field_validator("jump_host")(check_jump_host)

    @field_validator("config_file")
    @classmethod
    def _config_file_exists(cls, value: str | None) -> str | None:
        """Like `ssh -F`: only this file is read, so it must be there."""
        if value is not None and not Path(value).expanduser().exists():
            raise ValueError(f"ssh_config file {value!r} not found")
        problem = file_problem(value) if value is not None else None
        if problem:
            raise ValueError(f"ssh_config file {problem}")
        return value


class SshOverride(Strict):
    """Per-node SSH overrides (the connection-wide settings stay global)."""

    user: str | None = None
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    identity_file: str | None = None
    jump_host: str | None = None

    _jump_host = field_validator("jump_host")(check_jump_host)


class NodeRdma(Strict):
    device_glob: str | None = None
    min_devices: Annotated[int, Field(ge=0)] | None = None
    gid_index: Annotated[int, Field(ge=0)] | None = None


class NodeSpec(Strict):
    """One node, or a range of nodes (`gpu-[001-128]`) as written in the file."""

    name: str
    host: str | None = None
    interface: str = "eth0"
    rdma: NodeRdma = Field(default_factory=NodeRdma)
    labels: list[str] = Field(default_factory=list)
    ssh: SshOverride = Field(default_factory=SshOverride)
    connection: Literal["ssh", "local"] = "ssh"
    """`local`: the node is the controller itself; its commands run here, with no SSH."""


HOST = re.compile(r"^[A-Za-z0-9_\[{][A-Za-z0-9._:\[\]{}-]{0,252}$")
INTERFACE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@:-]{0,14}$")


class Node(BaseModel):
    """One concrete node after range expansion."""

    name: str
    host: str
    interface: str = "eth0"
    rdma: NodeRdma = Field(default_factory=NodeRdma)
    labels: list[str] = Field(default_factory=list)
    ssh: SshOverride = Field(default_factory=SshOverride)
    connection: Literal["ssh", "local"] = "ssh"


class Contact(Strict):
    name: str
    role: str | None = None
    email: str | None = None


class ClusterInfo(Strict):
    name: str
    region: str
    description: str | None = None
    operator: str | None = None  # who runs the acceptance ("Name <mail>"), for the certificate
    contacts: list[Contact] = Field(default_factory=list)


class Waiver(Strict):
    """An accepted deviation: the check (`id` or `id[subject]`) waived, why, who granted it and
    until when (inclusive). The one waiver model: the inventory declares it, the evidence
    carries it, `report.verdict` judges it on the run's date."""

    check: str = ""
    reason: str
    by: str | None = None
    expires: date

    def applies_on(self, run_date: date) -> bool:
        """True unless the waiver expired before `run_date` (the run's UTC date)."""
        return run_date <= self.expires


WAIVER_HORIZON_DAYS = 90
"""How far ahead a waiver may expire, counted from the day the inventory is loaded."""


class ScopeSettings(Strict):
    """Requirements the user leaves out of the verdict on purpose, and why (the certificate
    lists them under "Not in scope"). Ids are checked against the registry at run start."""

    exclude: Annotated[list[str], Field(min_length=1)]
    reason: Annotated[str, Field(min_length=1)]


def waiver_problem(waiver: Waiver, today: date, horizon_days: int) -> str | None:
    """What makes an inventory's waiver unacceptable on its own (reason, grantor, expiry
    within `horizon_days` of `today`), or None. Its check id and subject are checked against
    the registry and the nodes at run start (`run_scope.check_waivers`)."""
    if not waiver.reason.strip():
        return "reason is empty (say why the deviation is accepted)"
    if not (waiver.by or "").strip():
        return "by: who granted it is missing"
    if (waiver.expires - today).days > horizon_days:
        return (
            f"expires {waiver.expires} is more than {horizon_days} days from today ({today}); "
            "renew it nearer the date or set waiver_horizon_days"
        )
    return None


class InventoryFile(Strict):
    """The inventory as written: validated shape, before range expansion and merging."""

    cluster: ClusterInfo
    ssh: SshSettings = Field(default_factory=SshSettings)
    nodes_from: NodesFrom | None = None
    nodes: Annotated[list[NodeSpec], Field(min_length=1)] | None = Field(
        default=None, validate_default=True
    )
    expect: dict[str, Any] = Field(default_factory=dict)
    benchmarks: BenchmarkSettings = Field(default_factory=BenchmarkSettings)
    cloud: CloudSettings = Field(default_factory=CloudSettings)
    waivers: list[Waiver] = Field(default_factory=list)
    waiver_horizon_days: Annotated[int, Field(ge=1, le=3660)] = WAIVER_HORIZON_DAYS
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    actions: ActionSettings = Field(default_factory=ActionSettings)
    gate: GateSettings = Field(default_factory=GateSettings)
    scope: ScopeSettings | None = None
    burnin: BurninSettings = Field(default_factory=BurninSettings)

    @field_validator("waivers")
    @classmethod
    def _waivers_name_a_check(cls, waivers: list[Waiver]) -> list[Waiver]:
        for waiver in waivers:
            if not waiver.check:
                raise ValueError("a waiver needs check: (a check id, or id[subject])")
        return waivers

    @field_validator("nodes")
    @classmethod
    def _names_are_valid(
        cls, nodes: list[NodeSpec] | None, info: ValidationInfo
    ) -> list[NodeSpec] | None:
        if "nodes_from" not in info.data:  # nodes_from itself is invalid: that error is shown
            return nodes
        if (nodes is None) == (info.data["nodes_from"] is None):
            if nodes is None:
                raise ValueError(
                    "required key is missing (or give nodes_from: to read the nodes from "
                    "an Ansible inventory or Terraform output)"
                )
            raise ValueError("give nodes or nodes_from, not both")
        if nodes is not None:
            check_node_specs(nodes)
        return nodes


def check_node_specs(nodes: list[NodeSpec]) -> None:
    """Names, hosts and interfaces must be safe to put on an SSH or shell command line."""
    for i, spec in enumerate(nodes):
        plain = RANGE.sub("0", spec.name)
        if not NODE_NAME.match(plain):
            raise ValueError(
                f"[{i}].name {spec.name!r} is not a valid node name "
                "(letters, digits, '.', '_', '-'; a range like gpu-[001-128])"
            )
        if spec.host is not None and not HOST.match(RANGE.sub("0", spec.host)):
            raise ValueError(
                f"[{i}].host {spec.host!r} is not a host name or address "
                "(no spaces, shell characters or leading '-')"
            )
        port = _host_port(RANGE.sub("0", spec.host)) if spec.host is not None else None
        if port is not None and not (port.isdigit() and 1 <= int(port) <= 65535):
            raise ValueError(
                f"[{i}].host {spec.host!r}: port {port!r} is not a number from 1 to 65535 "
                "(host:port, or ssh.port)"
            )
        if not INTERFACE.match(spec.interface):
            raise ValueError(f"[{i}].interface {spec.interface!r} is not a Linux interface name")


def _host_port(host: str) -> str | None:
    """The port written after a host name or IPv4 address (`10.0.0.1:2222`), as fabric reads
    it; None when there is none (an IPv6 address has more than one colon)."""
    if host.count(":") != 1:
        return None
    return host.partition(":")[2]


class Inventory(BaseModel):
    """A loaded, validated cluster description with expanded nodes and merged expectations."""

    path: Path
    sha256: str
    cluster: ClusterInfo
    ssh: SshSettings
    nodes: list[Node]
    expect: Expectations
    expect_sha256: str
    benchmarks: BenchmarkSettings = Field(default_factory=BenchmarkSettings)
    cloud: CloudSettings = Field(default_factory=CloudSettings)
    waivers: list[Waiver]
    waiver_horizon_days: int = WAIVER_HORIZON_DAYS
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    actions: ActionSettings = Field(default_factory=ActionSettings)
    gate: GateSettings = Field(default_factory=GateSettings)
    scope: ScopeSettings | None = None
    burnin: BurninSettings = Field(default_factory=BurninSettings)

    @model_validator(mode="after")
    def _unique(self) -> Inventory:
        problems = duplicate_nodes(self.nodes, self.ssh)
        if problems:
            raise ValueError(problems[0])
        seen = {node.name for node in self.nodes}
        for kind in ("allow", "deny"):
            for i, flow in enumerate(getattr(self.expect.flows, kind)):
                for end in ("source", "target"):
                    if getattr(flow, end) not in seen:
                        raise ValueError(
                            f"expect.flows.{kind}[{i}].{end}: {getattr(flow, end)!r} "
                            "is not a node of the inventory"
                        )
        return self

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)


def duplicate_nodes(nodes: list[Node], ssh: SshSettings) -> list[str]:
    """Every repeated node name, and every two nodes on one address (same port, same jump
    host: one machine tested twice)."""
    problems: list[str] = []
    names: set[str] = set()
    where: dict[tuple[str, int | None, str | None], str] = {}
    for node in nodes:
        if node.name in names:
            problems.append(f"duplicate node name {node.name!r}")
            continue
        names.add(node.name)
        port = node.ssh.port or ssh.port
        key = (node.host, port, node.ssh.jump_host or ssh.jump_host)
        if key in where:
            on = f"{node.host}:{port}" if port else node.host
            problems.append(
                f"{where[key]!r} and {node.name!r} have the same host {on!r} "
                "(a copied line? each node needs its own address)"
            )
        else:
            where[key] = node.name
    return problems
