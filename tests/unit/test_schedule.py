"""Unit tests of the pair scheduler."""

from __future__ import annotations

import itertools

import pytest

from pytest_hpcnet.campaigns import schedule
from pytest_hpcnet.campaigns.schedule import (
    Pair,
    _round_robin,
    pick_schedule_for_budget,
    ring_pairs,
    schedule_rounds,
)


def nodes(n: int) -> list[str]:
    return [f"n{i:02d}" for i in range(n)]


def partners(schedule) -> dict[str, set[str]]:
    met: dict[str, set[str]] = {}
    for rnd in schedule:
        for p in rnd:
            met.setdefault(p.a, set()).add(p.b)
            met.setdefault(p.b, set()).add(p.a)
    return met


def assert_disjoint_rounds(schedule, names):
    for rnd in schedule:
        used = [n for p in rnd for n in (p.a, p.b)]
        assert len(used) == len(set(used)), f"node twice in a round: {rnd}"
        assert set(used) <= set(names)
        assert rnd, "empty round"


KINDS = ["matchings", "ring", "full-mesh", "random:3"]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 13, 16])
@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_gives_disjoint_rounds_covering_all_nodes(kind, n):
    names = nodes(n)
    sched = schedule_rounds(names, kind)
    assert_disjoint_rounds(sched, names)
    assert set(partners(sched)) == set(names)


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 8, 9, 12])
def test_matchings_every_node_meets_two_different_partners(n):
    sched = schedule_rounds(nodes(n), "matchings")
    met = partners(sched)
    assert all(len(m) >= 2 for m in met.values())
    if n % 2 == 0:
        assert len(sched) == 2
        assert all(len(rnd) == n // 2 for rnd in sched)  # perfect matchings
        assert not {p.key for p in sched[0]} & {p.key for p in sched[1]}
    else:
        assert len(sched) >= 3  # 2 rounds + mini-round(s) for the odd ones out


@pytest.mark.parametrize("n", [3, 5, 7])
def test_odd_matchings_mini_round_is_small(n):
    sched = schedule_rounds(nodes(n), "matchings")
    assert len(sched) == 3
    assert len(sched[2]) <= 2


def test_matchings_more_rounds_and_seed_is_deterministic():
    names = nodes(10)
    a = schedule_rounds(names, "matchings", rounds=4, seed=7)
    assert a == schedule_rounds(names, "matchings", rounds=4, seed=7)
    assert a != schedule_rounds(names, "matchings", rounds=4, seed=8)
    assert all(len(m) == 4 for m in partners(a).values())


@pytest.mark.parametrize(("n", "rounds"), [(2, 1), (3, 3), (4, 2), (5, 3), (6, 2), (7, 3)])
def test_ring_round_counts_and_edges(n, rounds):
    names = nodes(n)
    sched = schedule_rounds(names, "ring")
    assert len(sched) == rounds
    keys = {p.key for rnd in sched for p in rnd}
    want = {frozenset((names[i], names[(i + 1) % n])) for i in range(n)}
    assert keys == want


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8])
def test_full_mesh_covers_every_pair_once(n):
    names = nodes(n)
    sched = schedule_rounds(names, "full-mesh")
    keys = [p.key for rnd in sched for p in rnd]
    assert len(keys) == len(set(keys)) == n * (n - 1) // 2
    assert len(sched) == (n - 1 if n % 2 == 0 else n)


def test_random_rounds_deterministic_and_avoid_repeats():
    names = nodes(8)
    a = schedule_rounds(names, "random:4", seed=3)
    assert a == schedule_rounds(names, "random:4", seed=3)
    assert len(a) == 4
    keys = [p.key for rnd in a for p in rnd]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("kind", ["star", "random:", "random:x", "random:0"])
def test_bad_kinds(kind):
    with pytest.raises(ValueError):
        schedule_rounds(nodes(4), kind)


def test_small_and_duplicate_inputs():
    assert schedule_rounds([], "ring") == [] and schedule_rounds(["a"]) == []
    with pytest.raises(ValueError):
        schedule_rounds(["a", "b", "a"])
    with pytest.raises(ValueError):
        Pair("a", "a")


def test_ring_pairs():
    assert ring_pairs(["a", "b", "c"]) == [Pair("a", "b"), Pair("b", "c"), Pair("c", "a")]
    assert ring_pairs(["a", "b"]) == [Pair("a", "b"), Pair("b", "a")]
    assert ring_pairs(["a"]) == []


# ----------------------------------------------------------------- budget


def test_budget_full_mesh_when_it_fits():
    c = pick_schedule_for_budget(nodes(6), seconds_per_round=10, budget_s=60)
    assert c.kind == "full-mesh" and c.fits and len(c.rounds) == 5 and c.partners_per_node == 5


def test_budget_falls_back_to_matchings():
    c = pick_schedule_for_budget(nodes(16), seconds_per_round=30, budget_s=100)
    assert c.kind == "matchings" and c.fits
    assert len(c.rounds) == 3 and c.partners_per_node == 3
    assert c.estimated_s == 90


def test_budget_odd_counts_mini_rounds():
    c = pick_schedule_for_budget(nodes(7), seconds_per_round=10, budget_s=30)
    assert c.fits and len(c.rounds) <= 3 and c.partners_per_node >= 2


def test_budget_too_small():
    c = pick_schedule_for_budget(nodes(4), seconds_per_round=100, budget_s=10)
    assert not c.fits and len(c.rounds) == 1 and "too small" in c.reason
    with pytest.raises(ValueError):
        pick_schedule_for_budget(nodes(4), seconds_per_round=0, budget_s=10)


def test_every_unordered_pair_appears_in_full_mesh_exactly_once_for_names():
    names = ["x", "y", "z", "w"]
    sched = schedule_rounds(names, "full-mesh")
    keys = {p.key for rnd in sched for p in rnd}
    assert keys == {frozenset(c) for c in itertools.combinations(names, 2)}


def test_matchings_build_only_their_rounds_not_the_full_mesh(monkeypatch):
    built: list[object] = []

    class CountedPair(schedule.Pair):
        def __init__(self, *args: object) -> None:
            built.append(args)

    monkeypatch.setattr(schedule, "Pair", CountedPair)
    names = [f"node{i:04d}" for i in range(1000)]
    rounds = schedule.schedule_rounds(names, "matchings", rounds=2)
    assert [len(r) for r in rounds] == [500, 500]
    assert len(built) == 1000  # two rounds of pairs; the full mesh would be 499,500


@pytest.mark.parametrize("n", [2, 3, 7, 10])
def test_the_first_rounds_of_the_circle_are_the_same_however_many_are_built(n):
    names = [f"n{i}" for i in range(n)]
    for k in range(1, n + 1):
        assert _round_robin(names, k) == _round_robin(names)[:k]
