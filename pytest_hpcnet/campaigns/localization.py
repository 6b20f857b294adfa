"""Which node to blame from pair results, and the confirmation pass.

Rule (see `localize`): a node failing with at least two different partners is suspect
when it is part of every smallest explanation of the failures (so a good node between
two bad ones is not blamed); a failing pair whose two nodes both pass elsewhere is a
link (pair) problem; anything that cannot be told apart is `unknown` and goes to the
confirmation pass (`confirm_pairs`) against known-good nodes. `PairMatrix` shows the
same pair results as a square table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from pytest_hpcnet.campaigns.schedule import Pair, Schedule

OK = "ok"
SUSPECT = "suspect"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class NodeVerdict:
    """What the pair results say about one node."""

    node: str
    status: str  # "ok", "suspect" or "unknown"
    failed_with: tuple[str, ...] = ()
    passed_with: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class Localization:
    """Per-node verdicts, plus pair problems not blamed on a node."""

    verdicts: dict[str, NodeVerdict]
    suspects: tuple[str, ...]
    link_problems: tuple[Pair, ...]  # failing pairs whose nodes both pass elsewhere
    ambiguous_pairs: tuple[Pair, ...]  # failing pairs that cannot be attributed yet

    @property
    def unknown(self) -> tuple[str, ...]:
        return tuple(n for n, v in self.verdicts.items() if v.status == UNKNOWN)

    @property
    def good(self) -> tuple[str, ...]:
        return tuple(n for n, v in self.verdicts.items() if v.status == OK)


def _passed(value: bool | float | None, threshold: float | None) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if math.isnan(value):
        return None
    if threshold is None:
        raise ValueError("numeric pair results need a threshold")
    return value >= threshold


MAX_EXACT_COMPONENT = 16
"""Failure components up to this many nodes are explained exactly (all minimum covers)."""


def _components(failed: Mapping[str, set[str]]) -> list[set[str]]:
    seen: set[str] = set()
    out: list[set[str]] = []
    for start in failed:
        if start in seen or not failed[start]:
            continue
        comp, todo = set(), [start]
        while todo:
            n = todo.pop()
            if n in comp:
                continue
            comp.add(n)
            todo.extend(failed.get(n, set()) - comp)
        seen |= comp
        out.append(comp)
    return out


def _explain(comp: set[str], failed: Mapping[str, set[str]]) -> tuple[set[str], set[str]]:
    """(certain, possible) culprits of one failure component.

    Exact up to `MAX_EXACT_COMPONENT` nodes: the smallest node sets touching every
    failing pair are enumerated; nodes in all of them are certain, in any of them
    possible. Larger components get one greedy cover (neighbours of single-failure
    nodes first, then the node with most unexplained failures), taken as certain.
    """
    members = sorted(comp)
    edges = {frozenset((a, b)) for a in members for b in failed.get(a, ()) if b in comp}
    if len(members) <= MAX_EXACT_COMPONENT:
        for size in range(1, len(members) + 1):
            covers = [set(c) for c in combinations(members, size) if all(e & set(c) for e in edges)]
            if covers:
                return set.intersection(*covers), set.union(*covers)
    cover: set[str] = set()
    left = set(edges)
    while left:
        degree: dict[str, int] = {}
        for e in left:
            for n in e:
                degree[n] = degree.get(n, 0) + 1
        leaf_edges = [e for e in left if any(degree[n] == 1 for n in e)]
        if leaf_edges:
            a, b = sorted(min(leaf_edges, key=sorted))
            if degree[a] == 1 and degree[b] == 1:
                left.discard(frozenset((a, b)))  # an isolated pair: nobody to blame
                continue
            pick = b if degree[a] == 1 else a  # the neighbour of the single-failure node
        else:
            pick = max(sorted(degree), key=lambda n: degree[n])
        cover.add(pick)
        left = {e for e in left if pick not in e}
    return cover, cover


def localize(
    results: Mapping[Pair, bool | float | None],
    threshold: float | None = None,
    nodes: Sequence[str] | None = None,
) -> Localization:
    """Per-node verdicts from pair results (True/False, or a value vs `threshold`).

    The failing pairs are explained by the fewest nodes possible (a minimum vertex
    cover of the failure graph). A node is suspect when it fails with at least two
    different partners and belongs to every such smallest explanation: one bad
    node failing with both ring neighbours is suspect, while a good node sitting
    between two bad ones fails twice too but is not needed to explain anything
    (it ends `unknown` if it has no passing pair). A failing pair not explained
    by a suspect is a link problem when both nodes pass with someone else and
    neither could be the culprit of several failures; otherwise it is ambiguous
    and both nodes are `unknown`. A node without any passing pair is `unknown`
    unless suspect. None / NaN results count as not measured.
    """
    failed: dict[str, set[str]] = {}
    passed: dict[str, set[str]] = {}
    failing_pairs: dict[frozenset[str], Pair] = {}
    everyone: list[str] = list(nodes or [])
    for pair, value in results.items():
        for n in (pair.a, pair.b):
            if n not in everyone:
                everyone.append(n)
        verdict = _passed(value, threshold)
        if verdict is None:
            continue
        bucket = passed if verdict else failed
        bucket.setdefault(pair.a, set()).add(pair.b)
        bucket.setdefault(pair.b, set()).add(pair.a)
        if not verdict:
            failing_pairs.setdefault(pair.key, pair)

    certain: set[str] = set()
    possible: set[str] = set()
    for comp in _components(failed):
        c, p = _explain(comp, failed)
        certain |= c
        possible |= p
    suspects = {n for n in certain if len(failed.get(n, ())) >= 2}
    multi_possible = {n for n in possible - suspects if len(failed.get(n, ())) >= 2}

    def passes_elsewhere(node: str, partner: str) -> bool:
        return bool(passed.get(node, set()) - {partner})

    links: list[Pair] = []
    ambiguous: list[Pair] = []
    for pair in failing_pairs.values():
        if pair.a in suspects or pair.b in suspects:
            continue
        if (
            pair.a not in multi_possible
            and pair.b not in multi_possible
            and passes_elsewhere(pair.a, pair.b)
            and passes_elsewhere(pair.b, pair.a)
        ):
            links.append(pair)
        else:
            ambiguous.append(pair)
    in_ambiguous = {n for p in ambiguous for n in (p.a, p.b)}

    verdicts: dict[str, NodeVerdict] = {}
    for n in everyone:
        fw = tuple(sorted(failed.get(n, ())))
        pw = tuple(sorted(passed.get(n, ())))
        if n in suspects:
            status, reason = SUSPECT, f"fails with {len(fw)} different partners"
        elif n in in_ambiguous:
            status, reason = UNKNOWN, "in a failing pair that cannot be attributed: confirm"
        elif not pw:
            status = UNKNOWN
            reason = "no passing pair (failures explained by suspects)" if fw else "not measured"
        else:
            link = [p for p in links if n in (p.a, p.b)]
            status = OK
            reason = f"passes with {len(pw)} partner(s)" + (
                f"; link problem with {', '.join(p.other(n) for p in link)}" if link else ""
            )
        verdicts[n] = NodeVerdict(n, status, fw, pw, reason)
    return Localization(
        verdicts=verdicts,
        suspects=tuple(n for n in everyone if n in suspects),
        link_problems=tuple(links),
        ambiguous_pairs=tuple(ambiguous),
    )


def confirm_pairs(
    suspects: Sequence[str], good_nodes: Sequence[str], per_node: int = 2
) -> Schedule:
    """Second pass: each suspect (or unknown) node against `per_node` different good
    nodes, packed into rounds of disjoint pairs. Fewer good nodes -> fewer partners."""
    todo = [s for s in dict.fromkeys(suspects)]
    good = [g for g in dict.fromkeys(good_nodes) if g not in set(todo)]
    if not todo or not good:
        return []
    want = min(per_node, len(good))
    met: dict[str, list[str]] = {s: [] for s in todo}
    rounds: Schedule = []
    offset = 0
    while any(len(met[s]) < want for s in todo):
        used: set[str] = set()
        rnd: list[Pair] = []
        for s in todo:
            if len(met[s]) >= want:
                continue
            for i in range(len(good)):
                g = good[(offset + i) % len(good)]
                if g not in used and g not in met[s]:
                    rnd.append(Pair(g, s))
                    used.add(g)
                    met[s].append(g)
                    offset += 1
                    break
        if not rnd:
            break
        rounds.append(rnd)
    return rounds
