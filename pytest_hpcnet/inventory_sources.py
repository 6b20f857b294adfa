"""Node sources besides a native inventory: Ansible inventories and `terraform output -json`.

Pure parsers: they return `SourceNodes` (plain dicts in the shape of an inventory's `nodes:`
entries, plus SSH defaults) and raise nothing but `InventorySourceError`, whose one-line
message names the source file and the line or key. `inventory.py` validates the result
like a native inventory (names, hosts, duplicates). Jinja templating is not evaluated.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import model_validator

from pytest_hpcnet.expectations import Strict
from pytest_hpcnet.yaml_mapping import YamlMappingError, load_mapping

Kind = Literal["native", "ansible", "terraform"]
DEFAULT_OUTPUT = "hpcnet_nodes"
DEFAULT_GROUP = "all"
MAX_HOSTS = 10000
YAML_SUFFIXES = (".yaml", ".yml")
INI_SUFFIXES = (".ini",)

# Ansible host range: gpu[01:16], gpu[1:16:2], rack-[a:d]
ANSIBLE_RANGE = re.compile(r"\[([0-9]+|[a-zA-Z]):([0-9]+|[a-zA-Z])(?::([0-9]+))?\]")
SECTION = re.compile(r"^\[([^\]\s]+)\]\s*$")
HOST_PORT = re.compile(r"^(.+):([0-9]+)$")
GROUP_KEYS = ("hosts", "children", "vars")

# the Ansible variables hpcnet reads; every other variable is ignored
HOST_VARS = ("ansible_host", "ansible_ssh_host")
SSH_VARS: dict[str, str] = {
    "ansible_user": "user",
    "ansible_ssh_user": "user",
    "ansible_port": "port",
    "ansible_ssh_port": "port",
    "ansible_ssh_private_key_file": "identity_file",
    "ansible_private_key_file": "identity_file",
}
INTERFACE_VAR = "hpcnet_interface"


def one_line(text: str) -> str:
    """`text` with newlines and other unprintable characters escaped (keys may hold them)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class InventorySourceError(ValueError):
    """A bad node source: one line naming the source file, the line or key, and the problem."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


class NodesFrom(Strict):
    """`nodes_from:` in a native inventory: read the nodes from one Ansible or Terraform file."""

    ansible: str | None = None
    group: str | None = None
    terraform: str | None = None
    output: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> NodesFrom:
        if (self.ansible is None) == (self.terraform is None):
            raise ValueError("give exactly one of ansible: PATH or terraform: PATH")
        if self.group is not None and self.ansible is None:
            raise ValueError("group applies to ansible: only")
        if self.output is not None and self.terraform is None:
            raise ValueError("output applies to terraform: only")
        return self


@dataclass
class SourceNodes:
    """What a source yields: node dicts (`NodeSpec` shape) and SSH defaults (`SshSettings` keys)."""

    path: Path
    kind: Kind
    nodes: list[dict[str, Any]]
    ssh: dict[str, Any] = field(default_factory=dict)
    raw: bytes = b""


# --- detection --------------------------------------------------------------------------


_UNPARSED = object()


def _safe_yaml(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except Exception:  # only sniffing: the real reader reports the problem
        return _UNPARSED


def _looks_terraform(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and bool(data)
        and all(isinstance(v, dict) and "value" in v for v in data.values())
    )


def _looks_ansible(data: Any) -> bool:
    if not isinstance(data, dict) or not data:
        return False
    if {"cluster", "nodes", "nodes_from"} & {str(k) for k in data}:
        return False
    if not all(v is None or isinstance(v, dict) for v in data.values()):
        return False
    return "all" in data or any(
        isinstance(v, dict) and set(map(str, v)) & set(GROUP_KEYS) for v in data.values()
    )


def detect_kind(path: Path, text: str) -> Kind:
    """`terraform` (JSON outputs with `value`), `ansible` (INI or YAML groups), else `native`."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return "native"  # the YAML reader reports the syntax error
        if _looks_terraform(data) or isinstance(data, list):
            return "terraform"
        if isinstance(data, dict) and data and all(isinstance(v, str) for v in data.values()):
            return "terraform"
        return "native"
    if suffix in INI_SUFFIXES:
        return "ansible"
    data = _safe_yaml(text)
    if isinstance(data, dict):
        if "cluster" in data:
            return "native"
        if _looks_terraform(data):
            return "terraform"
        return "ansible" if _looks_ansible(data) else "native"
    if suffix not in YAML_SUFFIXES and text.strip() and data is not None:
        return "ansible"  # an INI file (`[group]` lines, or bare host lines)
    return "native"


# --- reading ----------------------------------------------------------------------------


def read_nodes_from(spec: NodesFrom, base: Path) -> SourceNodes:
    """Read the source a `nodes_from:` names; relative paths are relative to `base`."""
    if spec.ansible is not None:
        return read_ansible(base / Path(spec.ansible).expanduser(), spec.group or DEFAULT_GROUP)
    assert spec.terraform is not None
    return read_terraform(base / Path(spec.terraform).expanduser(), spec.output or DEFAULT_OUTPUT)


def _read(path: Path, what: str) -> tuple[bytes, str]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InventorySourceError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    try:
        return raw, raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InventorySourceError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def read_ansible(path: Path, group: str = DEFAULT_GROUP) -> SourceNodes:
    """Nodes of `group` (with its children) from an Ansible inventory, INI or YAML."""
    raw, text = _read(path, "Ansible inventory")
    suffix = path.suffix.lower()
    use_yaml = suffix in (*YAML_SUFFIXES, ".json") or (
        suffix not in INI_SUFFIXES and isinstance(_safe_yaml(text), dict)
    )
    try:
        inv = _parse_ansible_yaml(_yaml_or_error(text)) if use_yaml else _parse_ansible_ini(text)
        nodes, ssh = inv.select(group)
    except InventorySourceError as exc:
        raise InventorySourceError(f"{path}: {exc}") from None
    return SourceNodes(path=path, kind="ansible", nodes=nodes, ssh=ssh, raw=raw)


def read_terraform(path: Path, output: str = DEFAULT_OUTPUT) -> SourceNodes:
    """Nodes from `terraform output -json` (output `output`), or from that output's bare value."""
    raw, text = _read(path, "Terraform output")
    try:
        nodes = _terraform_nodes(text, output)
    except InventorySourceError as exc:
        raise InventorySourceError(f"{path}: {exc}") from None
    return SourceNodes(path=path, kind="terraform", nodes=nodes, raw=raw)


def _yaml_or_error(text: str) -> Any:
    try:
        return load_mapping(text, "a mapping of Ansible groups")
    except YamlMappingError as exc:
        raise InventorySourceError(str(exc)) from None


# --- Ansible model ----------------------------------------------------------------------

Var = tuple[Any, str]  # value, where it was set ("line 7" or a key path)


@dataclass
class _Group:
    hosts: dict[str, None] = field(default_factory=dict)  # an ordered set
    children: list[str] = field(default_factory=list)
    vars: dict[str, Var] = field(default_factory=dict)


@dataclass
class _Ansible:
    """Groups, hosts and variables as Ansible reads them; `all` and `ungrouped` are implicit."""

    groups: dict[str, _Group] = field(default_factory=lambda: {"all": _Group()})
    hostvars: dict[str, dict[str, Var]] = field(default_factory=dict)

    def group(self, name: str) -> _Group:
        return self.groups.setdefault(name, _Group())

    def add_host(self, group: str, host: str, variables: dict[str, Var]) -> None:
        self.group(group).hosts[host] = None
        self.hostvars.setdefault(host, {}).update(variables)

    def members(self, name: str, trail: tuple[str, ...] = ()) -> list[str]:
        if name == "all":
            return list(self.hostvars)
        if name == "ungrouped":
            grouped = {
                h
                for g in self.groups
                if g not in ("all", "ungrouped")
                for h in self.members(g, (*trail, name))
            }
            return [h for h in self.hostvars if h not in grouped]
        if name in trail:
            raise InventorySourceError(
                f"group {name!r}: children form a cycle ({' -> '.join((*trail, name))})"
            )
        found = dict(self.groups[name].hosts)
        for child in self.groups[name].children:
            found.update(dict.fromkeys(self.members(child, (*trail, name))))
        return list(found)

    def depth(self, name: str, trail: tuple[str, ...] = ()) -> int:
        """Distance from `all`: deeper groups' variables win, as in Ansible."""
        if name == "all" or name in trail:
            return 0
        parents = [g for g, grp in self.groups.items() if name in grp.children]
        return 1 + max((self.depth(p, (*trail, name)) for p in parents), default=0)

    def select(self, name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Node dicts for the hosts of group `name`, and SSH defaults from `all` vars."""
        if name not in self.groups and name != "ungrouped":
            real = [g for g in self.groups if g != "all"]
            near = difflib.get_close_matches(name, real, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise InventorySourceError(
                f"unknown group {name!r} ({hint}groups: {', '.join(['all', *real])})"
            )
        hosts = self.members(name)
        if not hosts:
            raise InventorySourceError(f"group {name!r} has no hosts")
        labelled = [g for g in self.groups if g not in ("all", "ungrouped")]
        memberships = {g: set(self.members(g)) for g in labelled}
        order = sorted(labelled, key=lambda g: (self.depth(g), g))
        defaults = _connection(self.groups["all"].vars)
        defaults.pop("host", None)
        defaults.pop("interface", None)
        nodes = []
        for host in hosts:
            merged = dict(self.groups["all"].vars)
            for g in order:
                if host in memberships[g]:
                    merged.update(self.groups[g].vars)
            merged.update(self.hostvars[host])
            conn = _connection(merged)
            node: dict[str, Any] = {"name": host}
            if "host" in conn:
                node["host"] = conn.pop("host")
            if "interface" in conn:
                node["interface"] = conn.pop("interface")
            labels = sorted(g for g in labelled if host in memberships[g])
            if labels:
                node["labels"] = labels
            ssh = {k: v for k, v in conn.items() if defaults.get(k) != v}
            if ssh:
                node["ssh"] = ssh
            nodes.append(node)
        return nodes, defaults


def _connection(variables: dict[str, Var]) -> dict[str, Any]:
    """The connection variables hpcnet reads, checked; other variables are ignored."""
    out: dict[str, Any] = {}
    for key, (value, where) in variables.items():
        if key in HOST_VARS:
            target = "host"
        elif key in SSH_VARS:
            target = SSH_VARS[key]
        elif key == INTERFACE_VAR:
            target = "interface"
        else:
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise InventorySourceError(f"{where}: {key} must be a string (got {value!r})")
        text = str(value).strip()
        if "{{" in text or "{%" in text:
            raise InventorySourceError(
                f"{where}: {key} uses Jinja templating ({text!r}), which hpcnet does not "
                "evaluate; write the value literally"
            )
        if target == "port":
            if not text.isdigit() or not 1 <= int(text) <= 65535:
                raise InventorySourceError(f"{where}: {key} is not a port (got {value!r})")
            out[target] = int(text)
        elif not text:
            raise InventorySourceError(f"{where}: {key} is empty")
        else:
            out[target] = text
    return out


def expand_ansible_range(pattern: str) -> list[str]:
    """`gpu[01:03]` -> gpu01, gpu02, gpu03; `[a:c]`, a stride `[1:9:2]` and several ranges too."""
    m = ANSIBLE_RANGE.search(pattern)
    if m is None:
        if "[" in pattern or "]" in pattern:
            raise InventorySourceError(
                f"host pattern {pattern!r}: a range is written [start:end] or [start:end:step]"
            )
        return [pattern]
    beg, end, step = m.group(1), m.group(2), int(m.group(3) or 1)
    if step < 1:
        raise InventorySourceError(f"host pattern {pattern!r}: step must be at least 1")
    if beg.isdigit() != end.isdigit():
        raise InventorySourceError(f"host pattern {pattern!r}: mixes digits and letters")
    if beg.isdigit():
        lo, hi = int(beg), int(end)
        if beg.startswith("0") and len(beg) > 1 and len(beg) != len(end):
            raise InventorySourceError(
                f"host pattern {pattern!r}: zero-padded start and end need the same width"
            )
        width = len(beg) if beg.startswith("0") and len(beg) > 1 else 0
        items = [f"{i:0{width}d}" for i in range(lo, hi + 1, step)] if hi - lo < MAX_HOSTS else []
    else:
        lo, hi = ord(beg), ord(end)
        items = [chr(i) for i in range(lo, hi + 1, step)]
    if hi < lo:
        raise InventorySourceError(f"host pattern {pattern!r}: range end is below its start")
    if not items or len(items) > MAX_HOSTS:
        raise InventorySourceError(f"host pattern {pattern!r}: more than {MAX_HOSTS} hosts")
    prefix, rest = pattern[: m.start()], pattern[m.end() :]
    out: list[str] = []
    for item in items:
        out += expand_ansible_range(prefix + item + rest)
        if len(out) > MAX_HOSTS:
            raise InventorySourceError(f"host pattern {pattern!r}: more than {MAX_HOSTS} hosts")
    return out


def _host_names(pattern: str) -> tuple[list[str], int | None]:
    """Expand a host pattern; a trailing `:port` (`node1:2222`) is returned apart."""
    port = None
    m = HOST_PORT.match(pattern)
    if m is not None and ":" not in ANSIBLE_RANGE.sub("", m.group(1)):  # not IPv6
        pattern, port = m.group(1), int(m.group(2))
        if not 1 <= port <= 65535:
            raise InventorySourceError(f"host {pattern!r}: port {port} is out of range")
    return expand_ansible_range(pattern), port


# --- Ansible INI ------------------------------------------------------------------------


def _parse_ansible_ini(text: str) -> _Ansible:
    inv = _Ansible()
    group, kind = "ungrouped", "hosts"
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"line {number}"
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        section = SECTION.match(stripped)
        if section is not None:
            group, _, kind = section.group(1).partition(":")
            kind = kind or "hosts"
            if not group or kind not in ("hosts", "vars", "children"):
                raise InventorySourceError(
                    f"{where}: malformed section {stripped!r} "
                    "(use [group], [group:vars] or [group:children])"
                )
            inv.group(group)
            continue
        if stripped.startswith("["):
            raise InventorySourceError(f"{where}: malformed section header {stripped!r}")
        if kind == "vars":
            key, eq, value = stripped.partition("=")
            if not eq or not key.strip() or " " in key.strip():
                raise InventorySourceError(
                    f"{where}: [{group}:vars] lines are key=value (got {stripped!r})"
                )
            inv.group(group).vars[key.strip()] = (_unquote(value.strip()), where)
            continue
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError as exc:
            raise InventorySourceError(f"{where}: malformed line ({exc})") from None
        if not tokens:
            continue
        if kind == "children":
            if len(tokens) != 1:
                raise InventorySourceError(
                    f"{where}: [{group}:children] lines name one group (got {stripped!r})"
                )
            child = tokens[0]
            if child == group:
                raise InventorySourceError(f"{where}: group {group!r} is its own child")
            if child not in inv.group(group).children:
                inv.group(group).children.append(child)
            inv.group(child)
            continue
        try:
            names, port = _host_names(tokens[0])
        except InventorySourceError as exc:
            raise InventorySourceError(f"{where}: {exc}") from None
        variables: dict[str, Var] = {}
        for token in tokens[1:]:
            key, eq, value = token.partition("=")
            if not eq or not key:
                hint = "; Jinja templating is not evaluated" if "{{" in line else ""
                raise InventorySourceError(
                    f"{where}: malformed host line: expected key=value after the host, "
                    f"got {token!r}{hint}"
                )
            variables[key] = (value, where)
        if port is not None:
            variables.setdefault("ansible_port", (port, where))
        for name in names:
            inv.add_host(group, name, variables)
    return inv


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


# --- Ansible YAML -----------------------------------------------------------------------


def _parse_ansible_yaml(data: dict[Any, Any]) -> _Ansible:
    inv = _Ansible()
    for name, body in data.items():
        _yaml_group(inv, str(name), body, str(name), ())
    return inv


def _yaml_group(inv: _Ansible, name: str, body: Any, where: str, trail: tuple[str, ...]) -> None:
    if name in trail:
        raise InventorySourceError(f"{where}: group {name!r} is nested in itself")
    group = inv.group(name)
    if body is None:
        return
    if not isinstance(body, dict):
        raise InventorySourceError(
            f"{where}: a group is a mapping with hosts, children, vars (got {type(body).__name__})"
        )
    for key in body:
        if key not in GROUP_KEYS:
            raise InventorySourceError(
                f"{where}.{key}: unknown key (a group has hosts, children, vars)"
            )
    variables = _mapping(body.get("vars"), f"{where}.vars")
    for key, value in variables.items():
        group.vars[str(key)] = (value, f"{where}.vars.{key}")
    for pattern, hv in _mapping(body.get("hosts"), f"{where}.hosts").items():
        at = f"{where}.hosts.{pattern}"
        try:
            names, port = _host_names(str(pattern))
        except InventorySourceError as exc:
            raise InventorySourceError(f"{at}: {exc}") from None
        hostvars = {str(k): (v, f"{at}.{k}") for k, v in _mapping(hv, at).items()}
        if port is not None:
            hostvars.setdefault("ansible_port", (port, at))
        for host in names:
            inv.add_host(name, host, hostvars)
    for child, child_body in _mapping(body.get("children"), f"{where}.children").items():
        child = str(child)
        if child not in group.children:
            group.children.append(child)
        _yaml_group(inv, child, child_body, f"{where}.children.{child}", (*trail, name))


def _mapping(value: Any, where: str) -> dict[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InventorySourceError(f"{where}: expected a mapping (got {type(value).__name__})")
    return value


# --- Terraform --------------------------------------------------------------------------

TF_KEYS = ("name", "host", "labels", "interface")


def _terraform_nodes(text: str, output: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InventorySourceError(
            f"line {exc.lineno}, column {exc.colno}: JSON syntax error: {exc.msg}"
        ) from None
    except (ValueError, RecursionError):
        raise InventorySourceError("not valid JSON") from None
    if isinstance(data, list) or (
        isinstance(data, dict) and data and all(isinstance(v, str) for v in data.values())
    ):
        value, where = data, "(value)"  # `terraform output -json NAME`: the value alone
    elif isinstance(data, dict):
        if output not in data:
            names = ", ".join(map(str, data)) or "none"
            raise InventorySourceError(
                f"{output}: no such output (outputs: {names}); "
                f"add an output {output!r}, or name yours in "
                "nodes_from: {terraform: ..., output: ...}"
            )
        entry = data[output]
        if not isinstance(entry, dict) or "value" not in entry:
            raise InventorySourceError(f"{output}: not `terraform output -json` (no 'value' key)")
        value, where = entry["value"], f"{output}.value"
    else:
        raise InventorySourceError(
            f"expected `terraform output -json` (a mapping of outputs); got {type(data).__name__}"
        )
    if isinstance(value, dict):
        nodes = []
        for name, host in value.items():
            if not isinstance(host, str):
                raise InventorySourceError(
                    f"{where}.{name}: expected an address string (got {type(host).__name__})"
                )
            nodes.append({"name": str(name), "host": host})
    elif isinstance(value, list):
        nodes = [_terraform_node(item, f"{where}[{i}]") for i, item in enumerate(value)]
    else:
        raise InventorySourceError(
            f"{where}: expected a list of {{name, host}} objects or a map name -> address "
            f"(got {type(value).__name__})"
        )
    if not nodes:
        raise InventorySourceError(f"{where}: no nodes")
    return nodes


def _terraform_node(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise InventorySourceError(
            f"{where}: expected an object with name and host (got {type(item).__name__})"
        )
    for key in item:
        if key not in TF_KEYS:
            raise InventorySourceError(f"{where}.{key}: unknown key (keys: {', '.join(TF_KEYS)})")
    node: dict[str, Any] = {}
    for key in ("name", "host"):
        if not isinstance(item.get(key), str) or not item[key]:
            problem = "required key is missing" if key not in item else "must be a string"
            raise InventorySourceError(f"{where}.{key}: {problem}")
        node[key] = item[key]
    labels = item.get("labels")
    if labels is not None:
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise InventorySourceError(f"{where}.labels: must be a list of strings")
        node["labels"] = labels
    interface = item.get("interface")
    if interface is not None:
        if not isinstance(interface, str):
            raise InventorySourceError(f"{where}.interface: must be a string")
        node["interface"] = interface
    return node
