"""Where each effective expectation comes from: the inventory's `expect:` block, its profile,
or the built-in default.

The inventory's `expect:` merges over the profile key by key (a nested mapping merges, any
other value replaces the profile's); an `ib_write_bw` block of the inventory replaces the
profile's whole `ib_write_bw`. What neither sets is the model's default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_hpcnet.inventory.expectations import load_profile, load_profile_sources
from pytest_hpcnet.inventory.loader import merged_expectations
from pytest_hpcnet.inventory.sources import detect_kind
from pytest_hpcnet.inventory.yaml_mapping import load_mapping

INVENTORY = "inventory"
DEFAULT = "default"
REPLACED_WHOLE = ("ib_write_bw",)
"""Sections an inventory replaces whole rather than merges (see `loader.merged_expectations`)."""


@dataclass(frozen=True)
class Expectation:
    """One effective `expect.*` key: its value and where it came from."""

    key: str
    value: Any
    origin: str
    """`inventory`, `profile <name>` or `default`."""


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys; lists and scalars are values."""
    if not isinstance(data, dict) or not data:
        return {prefix: data} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _sets(raw: dict[str, Any], key: str) -> bool:
    """Whether the mapping `raw` sets `key` (dotted), or a prefix of it to a non-mapping."""
    node: Any = raw
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
        if not isinstance(node, dict):
            return True
    return True


def expect_block(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The `expect:` mapping as the inventory file writes it ({} for Ansible or Terraform)."""
    text = Path(path).read_text(encoding="utf-8")
    if detect_kind(Path(path), text) != "native":
        return {}
    block = load_mapping(text, "an inventory").get("expect")
    return block if isinstance(block, dict) else {}


def effective_expectations(path: str | os.PathLike[str]) -> tuple[list[Expectation], str | None]:
    """Every effective `expect.*` key of the inventory at `path` with its origin, and the
    profile's name (None without one). Only the `expect:` block is validated (no node need be
    reachable, no key file present); `InventoryError` names its problems."""
    raw = expect_block(path)
    expect, _ = merged_expectations(raw)
    profile = raw.get("profile")
    shipped = load_profile(profile) if profile else {}
    for section in REPLACED_WHOLE:
        if section in raw:
            shipped.pop(section, None)
    found = []
    for key, value in flatten(expect.model_dump(mode="json")).items():
        if _sets(raw, key):
            origin = INVENTORY
        elif _sets(shipped, key):
            origin = f"profile {profile}"
        else:
            origin = DEFAULT
        found.append(Expectation(key, value, origin))
    return found, profile


def profile_notes(profile: str, keys: list[Expectation]) -> dict[str, str]:
    """The profile's `source:` note of each section a profile value came from."""
    notes = load_profile_sources(profile)
    wanted = {e.key.split(".")[0] for e in keys if e.origin == f"profile {profile}"}
    return {k: v for k, v in notes.items() if k.split(".")[0] in wanted}
