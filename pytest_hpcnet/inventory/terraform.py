"""`terraform output -json` as a node source: a list of {name, host} objects or a map
name -> address, under one output (default `hpcnet_nodes`) or as that output's bare value."""

from __future__ import annotations

import json
from typing import Any

from pytest_hpcnet.inventory.source_errors import InventorySourceError

TF_KEYS = ("name", "host", "labels", "interface")


def terraform_nodes(text: str, output: str) -> list[dict[str, Any]]:
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
