"""One value across the nodes of an instance type: the odd ones out named against the
majority, or no majority to trust; a pin where one is set (shared by the `versions` and
`firmware` judges).

Each item is measured per instance type: its agreed value (basis `AGREED`, subject the
type, "" when the types are not known) and each odd value per node (basis `ODD`, subject
the node and its GPUs or NICs, the agreed value or the pin as its bound): the certificate's
one-line manifest per type and its odd nodes are these measurements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_hpcnet.requirements.verdict import FAIL, PASS, Measurement

UNKNOWN_TYPE = "instance type unknown"
AGREED = "agreed by the nodes of the instance type"
ODD = "off the instance type's agreed value"
SHOWN_SUBJECTS = 6
"""The subjects a reason names for one value; the rest are counted."""


@dataclass(frozen=True)
class Entry:
    """One compared value on a node: `where` narrows it (`GPU 3 (…)`, `eth0`; "" the node)."""

    node: str
    where: str
    value: str

    @property
    def subject(self) -> str:
        return f"{self.node} {self.where}" if self.where else self.node


@dataclass
class Comparison:
    """What one item's comparison found: one line per problem, the nodes at fault (none
    where there is no majority), the measurements."""

    problems: list[str] = field(default_factory=list)
    suspects: list[str] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)


def shown(value: str) -> str:
    """A value as a reason names it (an empty one as `(empty)`)."""
    return value if value else "(empty)"


def listed(subjects: Sequence[str]) -> str:
    """The subjects, at most `SHOWN_SUBJECTS` named, the rest counted."""
    more = len(subjects) - SHOWN_SUBJECTS
    named = ", ".join(subjects[:SHOWN_SUBJECTS])
    return f"{named} and {more} more" if more > 0 else named


def by_type(nodes: Sequence[str], types: Mapping[str, str | None] | None) -> dict[str, list[str]]:
    """Nodes grouped by instance type (one group, "", without types); a node whose type
    was not read is in `instance type unknown`."""
    if not types:
        return {"": list(nodes)}
    grouped: dict[str, list[str]] = {}
    for node in nodes:
        grouped.setdefault(types.get(node) or UNKNOWN_TYPE, []).append(node)
    return grouped


def _odd_measurements(
    item: str, odd: Mapping[str, Sequence[Entry]], bound: str, source: str
) -> list[Measurement]:
    """One failed measurement per odd value and node (subject the node and its GPUs/NICs)."""
    out = []
    for value, entries in odd.items():
        per_node: dict[str, list[str]] = {}
        for entry in entries:
            per_node.setdefault(entry.node, []).append(entry.where)
        for node, wheres in per_node.items():
            subject = " ".join([node, ", ".join(w for w in wheres if w)]).strip()
            m = Measurement(item, value, "", bound, "==", source, subject, FAIL, basis=ODD)
            out.append(m)
    return out


def compare(
    item: str,
    entries: Sequence[Entry],
    groups: Mapping[str, Sequence[str]],
    pin: str | None = None,
    unit: str = "nodes",
    matches: Callable[[str, str], bool] = str.__eq__,
) -> Comparison:
    """`item` within each instance type (`groups`: type -> its nodes). Pinned: every value
    that does not `matches` the pin is named. Else one value: agreed; one value held by the
    most entries: each other named with its subjects and the majority value with its count
    (`majority X on 31 of 32 GPUs`); tied at the top: `no majority`, every group named."""
    found = Comparison()
    for kind, members in groups.items():
        seen: dict[str, list[Entry]] = {}
        for entry in entries:
            if entry.node in members:
                seen.setdefault(entry.value, []).append(entry)
        if not seen:
            continue
        scope = f"{kind}: " if len(groups) > 1 and kind else ""
        ranked = sorted(seen, key=lambda v: (-len(seen[v]), v))
        total, top = sum(len(e) for e in seen.values()), len(seen[ranked[0]])
        tied = len(ranked) > 1 and len(seen[ranked[1]]) == top
        agreed = ranked[0] if not tied else ", ".join(shown(v) for v in ranked)
        source = "expect.versions.pin" if pin is not None else AGREED
        found.measurements.append(
            Measurement(
                item,
                agreed,
                "",
                pin,
                "==",
                source,
                kind,
                None if pin is not None else (FAIL if tied else PASS),
                basis=AGREED,
            )
        )
        if pin is not None:
            odd = {v: e for v, e in seen.items() if not matches(v, pin)}
            found.problems += [
                f"{scope}{item} {shown(v)} on {listed([x.subject for x in e])} (pinned {pin})"
                for v, e in odd.items()
            ]
        elif tied:
            groups_named = "; ".join(
                f"{shown(v)} on {listed([x.subject for x in seen[v]])}" for v in ranked
            )
            found.problems.append(f"{scope}{item} has no majority: {groups_named}")
            continue
        else:
            odd = {v: seen[v] for v in ranked[1:]}
            found.problems += [
                f"{scope}{item} {shown(v)} on {listed([x.subject for x in e])} "
                f"(majority {shown(agreed)} on {top} of {total} {unit})"
                for v, e in odd.items()
            ]
        found.suspects += [x.node for e in odd.values() for x in e]
        found.measurements += _odd_measurements(item, odd, pin or agreed, source)
    return found
