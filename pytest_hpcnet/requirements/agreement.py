"""One value across the nodes of an instance type: the odd ones out named against the
majority, or no majority to trust (shared by the `versions` and `firmware` judges)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

UNKNOWN_TYPE = "instance type unknown"


@dataclass(frozen=True)
class Disagreement:
    """What is off for one item: one line per odd value, and the nodes at fault (none when
    there is no majority: no group can be told from the other)."""

    problems: list[str] = field(default_factory=list)
    suspects: list[str] = field(default_factory=list)


def shown(value: str) -> str:
    """A value as a reason names it (an empty one as `(empty)`)."""
    return value if value else "(empty)"


def disagreement(item: str, seen: Mapping[str, Sequence[str]], scope: str = "") -> Disagreement:
    """`seen` is value -> the subjects (`node03`, `node03 GPU 3 (…)`) that have it. One
    value: nothing. One value held by the most subjects: each other value named with its
    subjects and the majority value with its count. Tied at the top (two nodes, two
    drivers): `no majority`, every group named. `scope` prefixes each line (`ecs.x: `)."""
    if len(seen) < 2:
        return Disagreement()
    total = sum(len(s) for s in seen.values())
    ranked = sorted(seen, key=lambda v: (-len(seen[v]), v))
    top = len(seen[ranked[0]])
    if len(seen[ranked[1]]) == top:
        groups = "; ".join(f"{shown(v)} on {', '.join(seen[v])}" for v in ranked)
        return Disagreement([f"{scope}{item} has no majority: {groups}"])
    usual = ranked[0]
    problems = [
        f"{scope}{item} {shown(v)} on {', '.join(seen[v])} "
        f"(majority {shown(usual)} on {top} of {total})"
        for v in ranked[1:]
    ]
    return Disagreement(problems, [s for v in ranked[1:] for s in seen[v]])


def by_type(nodes: Sequence[str], types: Mapping[str, str | None] | None) -> dict[str, list[str]]:
    """Nodes grouped by instance type (one group, "", without types); a node whose type
    was not read is in `instance type unknown`."""
    if not types:
        return {"": list(nodes)}
    grouped: dict[str, list[str]] = {}
    for node in nodes:
        grouped.setdefault(types.get(node) or UNKNOWN_TYPE, []).append(node)
    return grouped


def scope_of(kind: str, groups: Mapping[str, Sequence[str]]) -> str:
    """The prefix naming the instance type when the nodes are of more than one."""
    return f"{kind}: " if len(groups) > 1 and kind else ""
