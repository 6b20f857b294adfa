"""The certificate's per-node facts table, read from what the per-node records measured.

No new round trip: devices from the eRDMA check, MTU from the MTU check, kernel, instance
type and id and vSwitch from the reachability check (and the tool versions), each taken
from the first per-node record that carries it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from pytest_hpcnet.report.certificate.format import format_value
from pytest_hpcnet.report.evidence import CheckRecord

#: (column, check id or "" for any check, measurement name)
FACT_SOURCES: tuple[tuple[str, str, str], ...] = (
    ("devices", "erdma", "devices"),
    ("mtu", "mtu", "mtu"),
    ("kernel", "", "kernel"),
    ("instance_type", "", "instance_type"),
    ("instance_id", "", "instance_id"),
    ("vswitch_id", "", "vswitch_id"),
)
FACT_TITLES: dict[str, str] = {
    "devices": "RDMA devices",
    "mtu": "MTU",
    "kernel": "Kernel",
    "instance_type": "Instance type",
    "instance_id": "Instance id",
    "vswitch_id": "vSwitch",
}

#: The columns nodes share in the certificate's summary (the instance id is per node).
#: The kernel is in the versions table beside it.
NODE_TITLES: dict[str, str] = {
    k: v for k, v in FACT_TITLES.items() if k not in ("instance_id", "kernel")
}


class NodeFacts(BaseModel):
    """One node's facts as shown; "" where no record carries it."""

    name: str
    devices: str = ""
    mtu: str = ""
    kernel: str = ""
    instance_type: str = ""
    instance_id: str = ""
    vswitch_id: str = ""


def _value(records: Sequence[CheckRecord], check_id: str, name: str) -> str:
    for record in records:
        if check_id and record.check_id != check_id:
            continue
        for measurement in record.measured:
            if measurement.name == name and measurement.value not in (None, ""):
                return format_value(measurement.value)
    if name == "kernel":
        return next((r.tool_versions["kernel"] for r in records if "kernel" in r.tool_versions), "")
    return ""


def node_facts(
    records: Iterable[CheckRecord], nodes: Sequence[str], instance_types: dict[str, str]
) -> list[NodeFacts]:
    """One row per node (in `nodes` order); the instance type falls back to the placement
    read at the end of the run (`instance_types`)."""
    per_node: dict[str, list[CheckRecord]] = {}
    for record in records:
        if record.kind == "node":
            per_node.setdefault(record.subject, []).append(record)
    rows = []
    for name in nodes:
        mine = per_node.get(name, [])
        values = {column: _value(mine, check, m) for column, check, m in FACT_SOURCES}
        values["instance_type"] = values["instance_type"] or instance_types.get(name, "")
        rows.append(NodeFacts(name=name, **values))
    return rows


class NodeGroup(BaseModel):
    """Nodes whose facts (all but the instance id) are the same: one row of the summary."""

    nodes: list[str]
    facts: dict[str, str]


def node_groups(rows: Sequence[NodeFacts | Mapping[str, Any]]) -> list[NodeGroup]:
    """The nodes grouped by their shared facts, the largest group first."""
    grouped: dict[tuple[str, ...], NodeGroup] = {}
    for row in rows:
        data = row.model_dump() if isinstance(row, NodeFacts) else dict(row)
        shared = {key: str(data.get(key) or "") for key in NODE_TITLES}
        group = grouped.setdefault(tuple(shared.values()), NodeGroup(nodes=[], facts=shared))
        group.nodes.append(str(data["name"]))
    return sorted(grouped.values(), key=lambda g: (-len(g.nodes), g.nodes))
