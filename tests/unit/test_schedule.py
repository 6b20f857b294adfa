"""Unit tests of the pair scheduler and the failure localization."""

from __future__ import annotations

import itertools
import time

import pytest

from pytest_hpcnet.campaigns.schedule import (
    OK,
    SUSPECT,
    UNKNOWN,
    Pair,
    PairMatrix,
    confirm_pairs,
    localize,
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


# ----------------------------------------------------------------- localization


def simulate(schedule, bad_nodes=(), bad_links=()):
    bad_links = {frozenset(link) for link in bad_links}
    return {
        p: not (p.a in bad_nodes or p.b in bad_nodes or p.key in bad_links)
        for rnd in schedule
        for p in rnd
    }


@pytest.mark.parametrize("kind", ["matchings", "ring", "full-mesh"])
def test_one_bad_node(kind):
    names = nodes(8)
    sched = schedule_rounds(names, kind)
    loc = localize(simulate(sched, bad_nodes={"n03"}), nodes=names)
    assert loc.suspects == ("n03",)
    assert loc.verdicts["n03"].status == SUSPECT
    assert all(loc.verdicts[n].status == OK for n in names if n != "n03")
    assert loc.link_problems == () and loc.ambiguous_pairs == ()


def test_one_bad_link():
    names = nodes(8)
    sched = schedule_rounds(names, "ring")
    loc = localize(simulate(sched, bad_links=[("n02", "n03")]), nodes=names)
    assert loc.suspects == ()
    assert [p.key for p in loc.link_problems] == [frozenset(("n02", "n03"))]
    assert all(v.status == OK for v in loc.verdicts.values())
    assert "link problem with n03" in loc.verdicts["n02"].reason


def test_two_bad_nodes_full_mesh():
    names = nodes(8)
    sched = schedule_rounds(names, "full-mesh")
    loc = localize(simulate(sched, bad_nodes={"n01", "n05"}), nodes=names)
    assert set(loc.suspects) == {"n01", "n05"}
    assert all(loc.verdicts[n].status == OK for n in names if n not in {"n01", "n05"})


def test_two_bad_nodes_around_a_good_one_on_a_ring():
    # ring n0..n7: n02 and n04 bad, n03 between them fails twice but is not blamed
    names = nodes(8)
    sched = schedule_rounds(names, "ring")
    loc = localize(simulate(sched, bad_nodes={"n02", "n04"}), nodes=names)
    assert set(loc.suspects) == {"n02", "n04"}
    assert loc.verdicts["n03"].status == UNKNOWN  # no passing pair: confirm it
    assert loc.verdicts["n01"].status == OK and loc.verdicts["n05"].status == OK


def test_two_adjacent_bad_nodes_matchings():
    names = nodes(10)
    sched = schedule_rounds(names, "matchings", seed=1)
    bad = {"n00", "n09"}
    loc = localize(simulate(sched, bad_nodes=bad), nodes=names)
    assert set(loc.suspects) == bad
    for n in names:
        if n not in bad:
            assert loc.verdicts[n].status in (OK, UNKNOWN)
            assert loc.verdicts[n].status == OK or not loc.verdicts[n].passed_with


def test_a_single_failure_without_other_evidence_is_ambiguous():
    results = {Pair("a", "b"): False, Pair("b", "c"): True}
    loc = localize(results)
    assert loc.suspects == () and loc.link_problems == ()
    assert loc.verdicts["a"].status == UNKNOWN and loc.verdicts["b"].status == UNKNOWN
    assert loc.verdicts["c"].status == OK


def test_numeric_results_with_threshold_and_unmeasured():
    results = {
        Pair("a", "b"): 180.0,
        Pair("c", "d"): 12.0,
        Pair("a", "c"): 10.0,
        Pair("b", "d"): float("nan"),
        Pair("b", "c"): 9.0,
    }
    loc = localize(results, threshold=150.0)
    assert loc.suspects == ("c",)
    assert loc.verdicts["d"].status == UNKNOWN  # only pair with the suspect; NaN not counted
    with pytest.raises(ValueError):
        localize(results)


def test_all_fail_triangle_is_all_unknown():
    results = {Pair("a", "b"): False, Pair("b", "c"): False, Pair("a", "c"): False}
    loc = localize(results)
    assert loc.suspects == ()
    assert {v.status for v in loc.verdicts.values()} == {UNKNOWN}


def test_large_failure_component_stays_fast():
    names = nodes(40)
    sched = schedule_rounds(names, "full-mesh")
    results = simulate(sched, bad_nodes=set(names[:20]))
    t0 = time.process_time()  # CPU: a loaded machine does not stretch it
    loc = localize(results)
    assert time.process_time() - t0 < 5
    assert set(loc.suspects) == set(names[:20])


# ----------------------------------------------------------------- confirmation, matrix


def test_confirm_pairs_against_good_nodes():
    rounds = confirm_pairs(["s1", "s2"], ["g1", "g2", "g3"], per_node=2)
    for rnd in rounds:
        used = [n for p in rnd for n in (p.a, p.b)]
        assert len(used) == len(set(used))
    met = partners(rounds)
    assert met["s1"] <= {"g1", "g2", "g3"} and len(met["s1"]) == 2
    assert len(met["s2"]) == 2 and "s1" not in met["s2"]
    assert len(rounds) == 2


def test_confirm_pairs_edge_cases():
    assert confirm_pairs([], ["g"]) == []
    assert confirm_pairs(["s"], []) == []
    assert partners(confirm_pairs(["s"], ["g"], per_node=3))["s"] == {"g"}
    assert confirm_pairs(["s"], ["s"]) == []


def test_pair_matrix():
    results = {Pair("a", "b"): 97.5, Pair("b", "c"): False}
    m = PairMatrix.from_results(results, nodes=["a", "b", "c"])
    assert m.value("b", "a") == 97.5 and m.value("a", "c") is None
    table = m.table()
    assert table[0] == ["", "a", "b", "c"]
    assert table[1] == ["a", "-", "97.5", ""]
    assert table[2][3] == "FAIL"


def test_every_unordered_pair_appears_in_full_mesh_exactly_once_for_names():
    names = ["x", "y", "z", "w"]
    sched = schedule_rounds(names, "full-mesh")
    keys = {p.key for rnd in sched for p in rnd}
    assert keys == {frozenset(c) for c in itertools.combinations(names, 2)}
