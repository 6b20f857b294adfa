"""Node sources besides a native inventory: Ansible inventories and `terraform output -json`.

Which kind a file is, and reading one (`ansible_inventory`, `terraform_output` parse). The
readers return `SourceNodes` (plain dicts in the shape of an inventory's `nodes:`
entries, plus SSH defaults) and raise nothing but `InventorySourceError`, whose one-line
message names the source file and the line or key. `inventory.py` validates the result
like a native inventory (names, hosts, duplicates). Jinja templating is not evaluated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import model_validator

from pytest_hpcnet.inventory.ansible import (
    GROUP_KEYS,
    expand_ansible_range,
    parse_ansible_ini,
    parse_ansible_yaml,
)
from pytest_hpcnet.inventory.expectations import Strict
from pytest_hpcnet.inventory.source_errors import InventorySourceError, one_line
from pytest_hpcnet.inventory.terraform import terraform_nodes
from pytest_hpcnet.inventory.yaml_mapping import YamlMappingError, load_mapping

__all__ = [
    "InventorySourceError",
    "NodesFrom",
    "SourceNodes",
    "detect_kind",
    "expand_ansible_range",
    "one_line",
    "read_ansible",
    "read_nodes_from",
    "read_terraform",
]

Kind = Literal["native", "ansible", "terraform"]
DEFAULT_OUTPUT = "hpcnet_nodes"
DEFAULT_GROUP = "all"
YAML_SUFFIXES = (".yaml", ".yml")
INI_SUFFIXES = (".ini",)


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
        inv = parse_ansible_yaml(_yaml_or_error(text)) if use_yaml else parse_ansible_ini(text)
        nodes, ssh = inv.select(group)
    except InventorySourceError as exc:
        raise InventorySourceError(f"{path}: {exc}") from None
    return SourceNodes(path=path, kind="ansible", nodes=nodes, ssh=ssh, raw=raw)


def read_terraform(path: Path, output: str = DEFAULT_OUTPUT) -> SourceNodes:
    """Nodes from `terraform output -json` (output `output`), or from that output's bare value."""
    raw, text = _read(path, "Terraform output")
    try:
        nodes = terraform_nodes(text, output)
    except InventorySourceError as exc:
        raise InventorySourceError(f"{path}: {exc}") from None
    return SourceNodes(path=path, kind="terraform", nodes=nodes, raw=raw)


def _yaml_or_error(text: str) -> Any:
    try:
        return load_mapping(text, "a mapping of Ansible groups")
    except YamlMappingError as exc:
        raise InventorySourceError(str(exc)) from None
