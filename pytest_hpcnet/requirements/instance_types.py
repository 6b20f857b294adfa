"""Judge: the instance type each node reports (ECS metadata) is one the profile is for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase

from pytest_hpcnet.probes.metadata import METADATA
from pytest_hpcnet.requirements.network import named
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)


def mismatched(reported: Mapping[str, str | None], patterns: Sequence[str]) -> list[str]:
    """Nodes that reported no instance type, or one no pattern matches."""
    return sorted(
        n for n, t in reported.items() if not t or not any(fnmatchcase(t, p) for p in patterns)
    )


def judge_instance_types(
    reported: Mapping[str, str | None], patterns: Sequence[str], profile: str = ""
) -> Verdict:
    """Pass when every node reported an instance type matching one of `patterns` (globs such
    as `ecs.ebmgn8is.*`), each type measured with the nodes reporting it. No pattern set, no
    node reporting, or a node whose metadata lacks its type: not measured (unless another
    node's type is already wrong). `extra["suspects"]`: the nodes at fault or unread."""
    if not patterns:
        return not_measured(
            "no bound set (expect.instance_types): the instance types the profile is for",
            "set expect.instance_types (or use a profile that sets it)",
        )
    expected = ", ".join(patterns)
    whose = f"profile {profile}" if profile else "expect.instance_types"
    unknown = sorted(n for n, t in reported.items() if not t)
    by_kind: dict[str, list[str]] = {}
    for node, kind in sorted(reported.items()):
        if kind:
            by_kind.setdefault(kind, []).append(node)
    wrong = {k: n for k, n in by_kind.items() if not any(fnmatchcase(k, p) for p in patterns)}
    measurements = [
        Measurement(
            "instance_type", kind, "", list(patterns), "in", "expect.instance_types", named(nodes)
        )
        for kind, nodes in by_kind.items()
    ]
    if unknown:
        measurements.append(
            Measurement(
                "instance_type",
                None,
                "",
                list(patterns),
                "in",
                "expect.instance_types",
                named(unknown),
            )
        )
    matched = sum(len(n) for k, n in by_kind.items() if k not in wrong)
    kw = {
        "measurements": tuple(measurements),
        "sections": (METADATA.name,),
        "extra": {"suspects": mismatched(reported, patterns)},
        "measured": float(matched),
        "bound": float(len(reported)),
    }
    problems = [
        f"{named(nodes)} report {kind}, {whose} is for {expected}" for kind, nodes in wrong.items()
    ]
    unread = [f"{named(unknown)}: no instance type in the metadata"] if unknown else []
    if problems:
        return failing(
            "; ".join([*problems, *unread]),
            "use the instance type the profile is for, or a profile for this one",
            **kw,
        )
    if unread or not reported:
        reason = "; ".join(unread) or "no node reported its metadata"
        return not_measured(reason, "check the metadata service on those nodes", **kw)
    return passing(**kw)
