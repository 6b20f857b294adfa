"""Judge: the instance type each node reports (ECS metadata) is one the profile is for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase

from pytest_hpcnet.requirements.judges import Verdict

MAX_NAMED = 8


def _named(nodes: list[str]) -> str:
    more = f" and {len(nodes) - MAX_NAMED} more" if len(nodes) > MAX_NAMED else ""
    return ", ".join(nodes[:MAX_NAMED]) + more


def mismatched(reported: Mapping[str, str | None], patterns: Sequence[str]) -> list[str]:
    """Nodes that reported no instance type, or one no pattern matches."""
    return sorted(
        n for n, t in reported.items() if not t or not any(fnmatchcase(t, p) for p in patterns)
    )


def judge_instance_types(
    reported: Mapping[str, str | None], patterns: Sequence[str], profile: str = ""
) -> Verdict:
    """Pass when every node reported an instance type matching one of `patterns` (globs such
    as `ecs.ebmgn8is.*`); fail closed on a node that reported none, naming nodes and types."""
    expected = ", ".join(patterns)
    whose = f"profile {profile}" if profile else "expect.instance_types"
    unknown = sorted(n for n, t in reported.items() if not t)
    wrong: dict[str, list[str]] = {}
    for node, kind in sorted(reported.items()):
        if kind and not any(fnmatchcase(kind, p) for p in patterns):
            wrong.setdefault(kind, []).append(node)
    problems = [
        f"{_named(nodes)} report {kind}, {whose} is for {expected}" for kind, nodes in wrong.items()
    ]
    if unknown:
        problems.append(f"{_named(unknown)}: no instance type in the metadata")
    if not reported:
        problems.append("no node reported its metadata")
    matched = sum(1 for t in reported.values() if t and any(fnmatchcase(t, p) for p in patterns))
    return Verdict(not problems, float(matched), float(len(reported)), None, "; ".join(problems))
