"""The certificate's versions table: per tool, the version each node runs, collapsed when the
nodes agree, mismatches and unread versions named by node; and the manifest the consistency
judges measured: per instance type one line of agreed versions and firmware, and the odd
nodes (the measurements of basis `AGREED` and `ODD`, whichever requirement recorded them)."""

from __future__ import annotations

import contextlib
import functools
import json
import subprocess
from collections.abc import Iterable, Sequence
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from pydantic import BaseModel, Field

from pytest_hpcnet.report.evidence import CheckRecord
from pytest_hpcnet.requirements.agreement import AGREED, ODD

#: Tools listed first, in this order; any other key the records carry follows, sorted.
TOOL_ORDER: tuple[str, ...] = (
    "os",
    "kernel",
    "erdma",
    "rdma-core",
    "ibverbs-utils",
    "libibverbs-utils",
    "perftest",
    "nccl-tests",
    "nccl",
    "openmpi-bin",
    "openmpi",
    "fio",
    "nvidia_driver",
    "cuda",
)
NOT_READ = "not read"


class VersionGroup(BaseModel):
    """One version of a tool and the nodes that run it (`not read` for nodes without one)."""

    version: str
    nodes: list[str]


class ToolVersions(BaseModel):
    """One tool: its versions across the nodes, most common first."""

    tool: str
    groups: list[VersionGroup] = Field(default_factory=list)
    consistent: bool = True  # one version on every node, none unread
    odd_nodes: list[str] = Field(default_factory=list)  # nodes off the most common version


def node_versions(records: Iterable[CheckRecord]) -> dict[str, dict[str, str]]:
    """node -> tool -> version, from the per-node records' `tool_versions` (the first wins)."""
    found: dict[str, dict[str, str]] = {}
    for record in records:
        if record.kind != "node" or not record.tool_versions:
            continue
        tools = found.setdefault(record.subject, {})
        for tool, version in record.tool_versions.items():
            tools.setdefault(tool, version)
    return found


def _tool_key(tool: str) -> tuple[int, str]:
    return (TOOL_ORDER.index(tool), tool) if tool in TOOL_ORDER else (len(TOOL_ORDER), tool)


def versions_table(records: Iterable[CheckRecord], nodes: Sequence[str]) -> list[ToolVersions]:
    """One entry per tool any node reported; nodes that reported none at all are left out
    (they were not reached or not read: the node table says so)."""
    by_node = node_versions(records)
    order = [n for n in nodes if n in by_node] + sorted(set(by_node) - set(nodes))
    tools = sorted({tool for versions in by_node.values() for tool in versions}, key=_tool_key)
    table = []
    for tool in tools:
        grouped: dict[str, list[str]] = {}
        for node in order:
            grouped.setdefault(by_node[node].get(tool, NOT_READ), []).append(node)
        read = sorted((v for v in grouped if v != NOT_READ), key=lambda v: (-len(grouped[v]), v))
        ranked = read + ([NOT_READ] if NOT_READ in grouped else [])
        groups = [VersionGroup(version=v, nodes=grouped[v]) for v in ranked]
        odd = [n for g in groups[1:] for n in g.nodes]
        table.append(
            ToolVersions(tool=tool, groups=groups, consistent=len(groups) == 1, odd_nodes=odd)
        )
    return table


def describe_nodes(names: Sequence[str], total: int) -> str:
    """`all 16 nodes` when `names` covers every node, else the names."""
    if len(names) == total and total > 1:
        return f"all {total} nodes"
    return ", ".join(names)


class VersionRow(BaseModel):
    """Nodes that run the same version of every tool: one row of the table."""

    nodes: list[str]
    cells: list[tuple[str, bool]]  # (version, differs from the most common one) per tool


def version_rows(table: Sequence[ToolVersions]) -> list[VersionRow]:
    """The table's rows: nodes with identical versions of every tool share one row, the
    largest group first; a cell off the tool's most common version is flagged."""
    per_node: dict[str, list[tuple[str, bool]]] = {}
    for index, tool in enumerate(table):
        for rank, group in enumerate(tool.groups):
            for node in group.nodes:
                cells = per_node.setdefault(node, [("", False)] * len(table))
                cells[index] = (group.version, rank > 0)
    grouped: dict[tuple[tuple[str, bool], ...], list[str]] = {}
    for node, cells in per_node.items():
        grouped.setdefault(tuple(cells), []).append(node)
    rows = [VersionRow(nodes=nodes, cells=list(cells)) for cells, nodes in grouped.items()]
    return sorted(rows, key=lambda r: (-len(r.nodes), r.nodes))


class ManifestLine(BaseModel):
    """One instance type ("" where types were not read) and its agreed values, in the order
    the judges measured them (`(empty)` for an empty value; a split's values joined)."""

    instance_type: str
    items: list[tuple[str, str]] = Field(default_factory=list)


class OddValue(BaseModel):
    """A node (and its GPUs or NICs) off its type's agreed value or pin."""

    subject: str
    item: str
    value: str
    agreed: str


class Manifest(BaseModel):
    lines: list[ManifestLine] = Field(default_factory=list)
    odd: list[OddValue] = Field(default_factory=list)


def _shown(value: object) -> str:
    return str(value) if value not in (None, "") else "(empty)"


def manifest(records: Iterable[CheckRecord]) -> Manifest:
    """The agreed values per instance type and the odd values, from every record's
    measurements of basis `AGREED` / `ODD` (the first record to measure an item wins)."""
    lines: dict[str, dict[str, str]] = {}
    odd: list[OddValue] = []
    for record in records:
        for m in record.measured:
            if m.basis == AGREED:
                lines.setdefault(m.subject, {}).setdefault(m.name, _shown(m.value))
            elif m.basis == ODD:
                odd.append(
                    OddValue(
                        subject=m.subject,
                        item=m.name,
                        value=_shown(m.value),
                        agreed=_shown(m.threshold),
                    )
                )
    return Manifest(
        lines=[ManifestLine(instance_type=t, items=list(v.items())) for t, v in lines.items()],
        odd=odd,
    )


@functools.cache
def tool_commit() -> str:
    """The git commit pytest_hpcnet was installed from, where known: pip's record of a
    `git+` install, else the checkout the package runs from ("" when neither says)."""
    with contextlib.suppress(PackageNotFoundError, ValueError, TypeError):
        text = distribution("pytest_hpcnet").read_text("direct_url.json")
        commit = json.loads(text or "{}").get("vcs_info", {}).get("commit_id", "")
        if commit:
            return str(commit)
    checkout = Path(__file__).resolve().parents[3]
    if not (checkout / ".git").exists():
        return ""  # a wheel in site-packages: no checkout of ours to ask
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        found = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        head = found.stdout.strip()
        if found.returncode == 0 and len(head) == 40:
            return head
    return ""
