"""Which node pairs to test in which round.

Schedules are lists of rounds; a round is a list of disjoint `Pair`s (a node is in
at most one pair per round, so a round's pair tests can run at the same time).

Kinds:
- `matchings` (default, `rounds=2`): the first `rounds` rounds of a round-robin
  tournament over a seeded shuffle of the nodes, so every node meets `rounds`
  different partners. With an odd N one node sits out each round; the nodes left
  short of partners are then paired in extra "mini-rounds" with partners they have
  not met yet (N=5, 2 rounds -> 2 full rounds + 1 mini-round of one pair).
- `ring`: node i with node i+1 (wrapping), split into disjoint rounds: 2 rounds for
  even N, 3 for odd N (the closing edge gets its own round). N=2 is one pair.
- `full-mesh`: every unordered pair once, by the circle method: N-1 rounds for
  even N, N rounds (one node idle per round) for odd N.
- `random:K`: K rounds of seeded random matchings, avoiding repeated pairs where
  possible; with odd N a random node sits out each round.

Which node to blame once the pairs have run is `campaigns.localization`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

KINDS = ("matchings", "ring", "full-mesh", "random:K")


@dataclass(frozen=True)
class Pair:
    """Two nodes tested together; `a` is the server side, `b` the client side."""

    a: str
    b: str

    def __post_init__(self) -> None:
        if self.a == self.b:
            raise ValueError(f"a pair needs two different nodes, got {self.a!r} twice")

    @property
    def key(self) -> frozenset[str]:
        """The unordered identity of the pair."""
        return frozenset((self.a, self.b))

    def other(self, node: str) -> str:
        """The partner of `node` in this pair."""
        return self.b if node == self.a else self.a

    def __str__(self) -> str:
        return f"{self.a}<->{self.b}"


Schedule = list[list[Pair]]


def _check_nodes(nodes: Sequence[str]) -> list[str]:
    nodes = list(nodes)
    if len(set(nodes)) != len(nodes):
        dupes = sorted({n for n in nodes if nodes.count(n) > 1})
        raise ValueError(f"duplicate node names: {', '.join(dupes)}")
    return nodes


def _round_robin(nodes: list[str], max_rounds: int | None = None) -> Schedule:
    """Circle method: every unordered pair exactly once, disjoint rounds; only the first
    `max_rounds` of them when given (building all n-1 rounds to keep two made `matchings`
    quadratic in the nodes: 0.4 s per schedule at 1,000 nodes)."""
    players: list[str | None] = list(nodes)
    if len(players) % 2:
        players.append(None)  # the bye
    n = len(players)
    rounds: Schedule = []
    for _ in range(n - 1 if max_rounds is None else min(max_rounds, n - 1)):
        pairs = [
            Pair(x, y)  # type: ignore[arg-type]
            for x, y in ((players[i], players[n - 1 - i]) for i in range(n // 2))
            if x is not None and y is not None
        ]
        rounds.append(pairs)
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def _ring_rounds(nodes: list[str]) -> Schedule:
    n = len(nodes)
    if n < 2:
        return []
    if n == 2:
        return [[Pair(nodes[0], nodes[1])]]
    edges = [Pair(nodes[i], nodes[(i + 1) % n]) for i in range(n)]
    if n % 2 == 0:
        return [edges[0::2], edges[1::2]]
    return [edges[0 : n - 1 : 2], edges[1 : n - 1 : 2], [edges[n - 1]]]


def _met(schedule: Schedule) -> dict[str, set[str]]:
    met: dict[str, set[str]] = {}
    for rnd in schedule:
        for p in rnd:
            met.setdefault(p.a, set()).add(p.b)
            met.setdefault(p.b, set()).add(p.a)
    return met


def _top_up(nodes: list[str], schedule: Schedule, want: int) -> Schedule:
    """Mini-rounds pairing nodes that met fewer than `want` partners with new partners."""
    want = min(want, len(nodes) - 1)
    extra: Schedule = []
    for _ in range(len(nodes)):  # bounded; each mini-round serves at least one node
        met = _met(schedule + extra)
        needy = [n for n in nodes if len(met.get(n, set())) < want]
        if not needy:
            break
        used: set[str] = set()
        mini: list[Pair] = []
        for node in needy:
            if node in used:
                continue
            fresh = [m for m in nodes if m != node and m not in used and m not in met.get(node, ())]
            fresh.sort(key=lambda m: (m not in needy, nodes.index(m)))
            if fresh:
                partner = fresh[0]
                mini.append(Pair(node, partner))
                used.update((node, partner))
        if not mini:
            break
        extra.append(mini)
    return schedule + extra


def _random_rounds(nodes: list[str], k: int, rng: random.Random) -> Schedule:
    rounds: Schedule = []
    seen: set[frozenset[str]] = set()
    for _ in range(k):
        best: list[Pair] = []
        best_repeats = math.inf
        for _attempt in range(50):
            order = nodes[:]
            rng.shuffle(order)
            pairs = [Pair(order[i], order[i + 1]) for i in range(0, len(order) - 1, 2)]
            repeats = sum(p.key in seen for p in pairs)
            if repeats < best_repeats:
                best, best_repeats = pairs, repeats
            if repeats == 0:
                break
        seen.update(p.key for p in best)
        rounds.append(best)
    return rounds


def schedule_rounds(
    nodes: Sequence[str], kind: str = "matchings", rounds: int = 2, seed: int = 0
) -> Schedule:
    """Rounds of disjoint pairs over `nodes` for one schedule kind (see the module doc)."""
    names = _check_nodes(nodes)
    if len(names) < 2:
        return []
    if kind == "full-mesh":
        return _round_robin(names)
    if kind == "ring":
        return _ring_rounds(names)
    if kind == "matchings":
        if rounds < 1:
            raise ValueError("matchings needs at least one round")
        order = names[:]
        random.Random(seed).shuffle(order)
        base = _round_robin(order, rounds)
        return _top_up(order, base, rounds) if len(names) % 2 else base
    if kind.startswith("random:"):
        try:
            k = int(kind.split(":", 1)[1])
        except ValueError:
            raise ValueError(
                f"random schedule needs a round count, e.g. random:3: {kind!r}"
            ) from None
        if k < 1:
            raise ValueError(f"random schedule needs at least one round: {kind!r}")
        return _random_rounds(names, k, random.Random(seed))
    raise ValueError(f"unknown schedule kind {kind!r}; known: {', '.join(KINDS)}")


def ring_pairs(nodes: Sequence[str]) -> list[Pair]:
    """Directed pairs around a ring, a->b, b->c, ..., z->a (two for N=2, none below)."""
    names = _check_nodes(nodes)
    if len(names) < 2:
        return []
    return [Pair(names[i], names[(i + 1) % len(names)]) for i in range(len(names))]


@dataclass(frozen=True)
class ScheduleChoice:
    """The schedule picked for a time budget, and why."""

    kind: str
    rounds: Schedule
    partners_per_node: int  # the fewest partners any node meets
    estimated_s: float
    fits: bool
    reason: str


def pick_schedule_for_budget(
    nodes: Sequence[str], seconds_per_round: float, budget_s: float, seed: int = 0
) -> ScheduleChoice:
    """The largest schedule whose rounds fit in `budget_s`: full-mesh, else matchings
    with as many rounds as fit (>= 2 for localization), else one matching (`fits`
    False when even that does not fit)."""
    names = _check_nodes(nodes)
    if seconds_per_round <= 0:
        raise ValueError("seconds_per_round must be positive")

    def choice(kind: str, sched: Schedule, reason: str) -> ScheduleChoice:
        met = _met(sched)
        partners = min((len(met.get(n, ())) for n in names), default=0)
        est = len(sched) * seconds_per_round
        return ScheduleChoice(kind, sched, partners, est, est <= budget_s, reason)

    if len(names) < 2:
        return choice("matchings", [], "fewer than two nodes: nothing to pair")
    max_rounds = int(budget_s // seconds_per_round)
    mesh_rounds = len(names) - 1 + len(names) % 2
    if mesh_rounds <= max_rounds:
        return choice(
            "full-mesh", schedule_rounds(names, "full-mesh"), f"all {mesh_rounds} rounds fit"
        )
    for k in range(min(max_rounds, len(names) - 1), 0, -1):
        sched = schedule_rounds(names, "matchings", rounds=k, seed=seed)
        if len(sched) <= max_rounds:
            note = "" if k >= 2 else " (one partner per node: no localization)"
            return choice("matchings", sched, f"{k} matchings in {len(sched)} rounds fit{note}")
    sched = schedule_rounds(names, "matchings", rounds=1, seed=seed)
    return choice("matchings", sched, "budget too small even for one matching")
