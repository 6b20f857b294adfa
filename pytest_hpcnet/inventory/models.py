"""The inventory: one YAML file describing a cluster, validated before any connection.

`load_inventory(path)` returns an `Inventory` or raises `InventoryError` whose one-line
message names the file, the key path and the problem (with the nearest valid key for
a typo). `${VAR}` values come from the environment and are registered as secrets.
Nodes may come from an Ansible inventory or `terraform output -json` instead
(`nodes_from:`, or the path given directly; see `inventory_sources`).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pytest_hpcnet.gate.config import ActionSettings, SchedulerSettings
from pytest_hpcnet.inventory.bench_settings import BenchmarkSettings, CloudSettings
from pytest_hpcnet.inventory.expectations import (
    DEFAULT_SYSCTL,
    Expectations,
    Strict,
    load_profile,
    merge,
    profile_names,
)
from pytest_hpcnet.inventory.sources import (
    InventorySourceError,
    NodesFrom,
    SourceNodes,
    detect_kind,
    one_line,
    read_nodes_from,
)
from pytest_hpcnet.inventory.ssh_files import file_problem, ssh_file_problems
from pytest_hpcnet.inventory.validation_messages import first_error
from pytest_hpcnet.inventory.yaml_mapping import YamlMappingError, load_mapping
from pytest_hpcnet.redact import register_secret

NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
RANGE = re.compile(r"\[(\d+)-(\d+)\]")
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MAX_RANGE = 10000


class InventoryError(Exception):
    """A bad inventory: one line naming file, key path and problem."""


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


class Contact(Strict):
    name: str
    role: str | None = None
    email: str | None = None


class ClusterInfo(Strict):
    name: str
    region: str
    description: str | None = None
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


class ScopeSettings(Strict):
    """Requirements the user leaves out of the verdict on purpose, and why (the certificate
    lists them under "Not in scope"). Ids are checked against the registry at run start."""

    exclude: Annotated[list[str], Field(min_length=1)]
    reason: Annotated[str, Field(min_length=1)]


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
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    actions: ActionSettings = Field(default_factory=ActionSettings)
    scope: ScopeSettings | None = None

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
            _check_node_specs(nodes)
        return nodes


def _check_node_specs(nodes: list[NodeSpec]) -> None:
    """Names, hosts and interfaces must be safe to put on an SSH or shell command line."""
    for i, spec in enumerate(nodes):
        plain = RANGE.sub("0", spec.name)
        if not NODE_NAME.match(plain):
            raise ValueError(
                f"[{i}].name {spec.name!r} is not a valid node name "
                "(letters, digits, '.', '_', '-'; a range like gpu-[001-128])"
            )
        if spec.host is not None and not HOST.match(spec.host):
            raise ValueError(
                f"[{i}].host {spec.host!r} is not a host name or address "
                "(no spaces, shell characters or leading '-')"
            )
        if not INTERFACE.match(spec.interface):
            raise ValueError(f"[{i}].interface {spec.interface!r} is not a Linux interface name")


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
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    actions: ActionSettings = Field(default_factory=ActionSettings)
    scope: ScopeSettings | None = None

    @model_validator(mode="after")
    def _unique(self) -> Inventory:
        seen: set[str] = set()
        for node in self.nodes:
            if node.name in seen:
                raise ValueError(f"duplicate node name {node.name!r}")
            seen.add(node.name)
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


def expand_range(name: str) -> list[str]:
    """`gpu-[001-003]` -> gpu-001, gpu-002, gpu-003 (zero padding kept); one range at most."""
    matches = list(RANGE.finditer(name))
    if not matches:
        return [name]
    if len(matches) > 1:
        raise ValueError(f"{name!r}: only one [a-b] range per name")
    m = matches[0]
    lo, hi = int(m.group(1)), int(m.group(2))
    if hi < lo:
        raise ValueError(f"{name!r}: range end {hi} is below its start {lo}")
    if hi - lo + 1 > MAX_RANGE:
        raise ValueError(f"{name!r}: range of {hi - lo + 1} nodes exceeds {MAX_RANGE}")
    width = len(m.group(1)) if m.group(1).startswith("0") else 0
    return [f"{name[: m.start()]}{i:0{width}d}{name[m.end() :]}" for i in range(lo, hi + 1)]


def _expand_nodes(specs: list[NodeSpec]) -> list[Node]:
    nodes: list[Node] = []
    for i, spec in enumerate(specs):
        try:
            names = expand_range(spec.name)
        except ValueError as exc:
            raise InventoryError(f"nodes[{i}].name: {exc}") from None
        hosts: list[str]
        if spec.host is None:
            hosts = names
        elif RANGE.search(spec.host):
            try:
                hosts = expand_range(spec.host)
            except ValueError as exc:
                raise InventoryError(f"nodes[{i}].host: {exc}") from None
            if len(hosts) != len(names):
                raise InventoryError(
                    f"nodes[{i}].host: range gives {len(hosts)} hosts for {len(names)} names"
                )
        else:
            hosts = [spec.host.replace("{name}", n) for n in names]
            if len(names) > 1 and "{name}" not in spec.host:
                raise InventoryError(
                    f"nodes[{i}].host: {len(names)} nodes share one host {spec.host!r}; "
                    "use a range ([11-138]) or {name}"
                )
        for name, host in zip(names, hosts, strict=False):
            fields = spec.model_dump(exclude={"name", "host"})
            nodes.append(Node(name=name, host=host, **fields))
    return nodes


def _substitute_env(value: Any, where: str) -> Any:
    """Replace `${VAR}` in every string; each value read is registered as a secret."""
    if isinstance(value, dict):
        return {
            k: _substitute_env(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_substitute_env(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    def lookup(m: re.Match[str]) -> str:
        var = m.group(1)
        if var not in os.environ:
            raise InventoryError(f"{where}: environment variable ${{{var}}} is not set")
        secret = os.environ[var]
        register_secret(secret)
        return secret

    return ENV_REF.sub(lookup, value)


def _merged_expectations(raw: dict[str, Any]) -> tuple[Expectations, str]:
    data: dict[str, Any] = {"sysctl": dict(DEFAULT_SYSCTL)}
    profile = raw.get("profile")
    if profile is not None:
        names = profile_names()
        if profile not in names:
            near = difflib.get_close_matches(str(profile), names, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise InventoryError(
                f"expect.profile: unknown profile {profile!r} ({hint}shipped: {', '.join(names)})"
            )
        data = merge(data, load_profile(profile))
    if "ib_write_bw" in raw:  # a bound of the inventory replaces the profile's reference
        data.pop("ib_write_bw", None)
    data = merge(data, raw)
    try:
        expect = Expectations.model_validate(data)
    except ValidationError as exc:
        raise InventoryError(first_error(exc, Expectations, "expect.")) from None
    digest = hashlib.sha256(expect.model_dump_json().encode()).hexdigest()
    return expect, digest


def load_inventory(path: str | os.PathLike[str]) -> Inventory:
    """Read, validate and expand an inventory file; `InventoryError` names what is wrong."""
    path = Path(path)
    try:
        raw_bytes = path.read_bytes()
    except OSError as exc:
        raise InventoryError(f"{path}: cannot read inventory: {exc.strerror or exc}") from None
    try:
        return _load(path, raw_bytes)
    except InventoryError as exc:
        message = one_line(str(exc))  # a key may hold a newline
        if not message.startswith(str(path)):
            message = f"{path}: {message}"
        raise InventoryError(message) from None


def _nodes_from(path: Path, parsed: InventoryFile, direct: bool) -> SourceNodes:
    """Read `parsed.nodes_from` into `parsed.nodes`; the source's SSH defaults (Ansible `all`
    vars) fill the `ssh:` keys the inventory leaves unset."""
    assert parsed.nodes_from is not None
    prefix = "" if direct else "nodes_from: "
    try:
        source = read_nodes_from(parsed.nodes_from, path.parent)
    except InventorySourceError as exc:
        raise InventoryError(f"{prefix}{exc}") from None
    where = "" if direct else f"{source.path}: "
    try:
        specs = [NodeSpec.model_validate(node) for node in source.nodes]
        _check_node_specs(specs)
        ssh = {**parsed.ssh.model_dump(), **source.ssh, **parsed.ssh.model_dump(exclude_unset=True)}
        parsed.ssh = SshSettings.model_validate(ssh)
    except ValidationError as exc:
        raise InventoryError(f"{prefix}{where}{first_error(exc, NodeSpec)}") from None
    except ValueError as exc:
        raise InventoryError(f"{prefix}{where}nodes{exc}") from None
    parsed.nodes = specs
    return source


def _load(path: Path, raw_bytes: bytes) -> Inventory:
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InventoryError(f"not UTF-8 text (byte {exc.start})") from None
    kind = detect_kind(path, text)
    if kind != "native":  # an Ansible inventory or Terraform output given directly
        parsed = InventoryFile(
            cluster=ClusterInfo(name=path.stem, region="unknown"),
            nodes_from=NodesFrom(**{kind: path.name}),
        )
        _nodes_from(path, parsed, direct=True)
        return _build(path, hashlib.sha256(raw_bytes).hexdigest(), parsed)
    try:
        data = load_mapping(text, "a mapping with cluster, ssh, nodes, expect")
    except YamlMappingError as exc:
        raise InventoryError(str(exc)) from None
    data = _substitute_env(data, "")
    try:
        parsed = InventoryFile.model_validate(data)
    except ValidationError as exc:
        raise InventoryError(first_error(exc, InventoryFile)) from None
    digest = hashlib.sha256(raw_bytes)
    known_hosts_named = "known_hosts" in parsed.ssh.model_fields_set
    if parsed.nodes_from is not None:  # the digest covers the node source too
        digest.update(_nodes_from(path, parsed, direct=False).raw)
    return _build(path, digest.hexdigest(), parsed, known_hosts_named)


def _build(
    path: Path, sha256: str, parsed: InventoryFile, known_hosts_named: bool = False
) -> Inventory:
    assert parsed.nodes is not None
    register_secret(parsed.ssh.passphrase)
    expect, expect_digest = _merged_expectations(parsed.expect)
    nodes = _expand_nodes(parsed.nodes)
    problems = ssh_file_problems(parsed.ssh, nodes, known_hosts_named)
    if problems:
        raise InventoryError(problems[0])
    try:
        return Inventory(
            path=path,
            sha256=sha256,
            cluster=parsed.cluster,
            ssh=parsed.ssh,
            nodes=nodes,
            expect=expect,
            expect_sha256=expect_digest,
            benchmarks=parsed.benchmarks,
            cloud=parsed.cloud,
            waivers=parsed.waivers,
            scheduler=parsed.scheduler,
            actions=parsed.actions,
            scope=parsed.scope,
        )
    except ValidationError as exc:
        raise InventoryError(
            f"nodes: {exc.errors()[0]['msg'].removeprefix('Value error, ')}"
        ) from None
