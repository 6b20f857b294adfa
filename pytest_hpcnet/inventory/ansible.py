"""Ansible inventories (INI and YAML) as hpcnet reads them: groups, children, host ranges,
group and host variables; only the connection variables are kept. Jinja is not evaluated."""

from __future__ import annotations

import difflib
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from pytest_hpcnet.inventory.source_errors import InventorySourceError

MAX_HOSTS = 10000
GROUP_KEYS = ("hosts", "children", "vars")
# Ansible host range: gpu[01:16], gpu[1:16:2], rack-[a:d]
ANSIBLE_RANGE = re.compile(r"\[([0-9]+|[a-zA-Z]):([0-9]+|[a-zA-Z])(?::([0-9]+))?\]")
SECTION = re.compile(r"^\[([^\]\s]+)\]\s*$")
HOST_PORT = re.compile(r"^(.+):([0-9]+)$")

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
        elif target == "host" and ("[" in text or "]" in text):
            raise InventorySourceError(
                f"{where}: {key} {text!r} is a range, which Ansible expands in host patterns "
                "only, never in variables: give each host its own address"
            )
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


def parse_ansible_ini(text: str) -> _Ansible:
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


def parse_ansible_yaml(data: dict[Any, Any]) -> _Ansible:
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
