"""The perftest localization's judge: a node no pair measured is not cleared (not measured,
never a pass); suspects fail; every node measured and clear passes."""

from __future__ import annotations

from pytest_hpcnet.campaigns.localization import localize
from pytest_hpcnet.campaigns.schedule import Pair
from pytest_hpcnet.requirements.judges import judge_localization


def test_nothing_measured_is_not_a_pass():
    found = localize({Pair("n1", "n2"): None}, nodes=["n1", "n2"])
    verdict = judge_localization("ib_write_bw", "ring", found, [])
    assert verdict.outcome == "not_measured"
    assert "n1, n2" in verdict.reason


def test_one_node_left_unmeasured_is_named():
    results = {Pair("n1", "n2"): True, Pair("n2", "n3"): True, Pair("n3", "n4"): None}
    found = localize(results, nodes=["n1", "n2", "n3", "n4"])
    verdict = judge_localization("ib_write_bw", "ring", found, [])
    assert verdict.outcome == "not_measured" and "n4" in verdict.reason
    assert "n3" not in verdict.reason.split(":")[-1]


def test_a_suspect_fails_and_a_clear_cluster_passes():
    ring = {Pair("n1", "n2"): False, Pair("n2", "n3"): True, Pair("n3", "n1"): False}
    assert judge_localization("ib_write_bw", "ring", localize(ring), []).outcome == "fail"
    clear = {Pair("n1", "n2"): True, Pair("n2", "n3"): True, Pair("n3", "n1"): True}
    assert judge_localization("ib_write_bw", "ring", localize(clear), []).outcome == "pass"
