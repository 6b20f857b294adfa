"""Unit tests of the failure localization, the confirmation pass and the pair matrix."""

from __future__ import annotations

import time

import pytest

from pytest_hpcnet.campaigns.localization import (
    OK,
    SUSPECT,
    UNKNOWN,
    confirm_pairs,
    localize,
)
from pytest_hpcnet.campaigns.schedule import Pair, schedule_rounds
from tests.unit.test_schedule import nodes, partners


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
