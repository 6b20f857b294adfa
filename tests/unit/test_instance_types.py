"""The profile matches the nodes: instance types against the profile's globs."""

from pytest_hpcnet.inventory.expectations import load_profile, load_profile_sources
from pytest_hpcnet.requirements.instance_types import judge_instance_types, mismatched

EBMGN8IS = ["ecs.ebmgn8is.*"]


def test_all_nodes_of_the_profiles_type_pass():
    both = {"a": "ecs.ebmgn8is.32xlarge", "b": "ecs.ebmgn8is.32xlarge"}
    verdict = judge_instance_types(both, EBMGN8IS)
    assert verdict and verdict.measured == 2


def test_a_mismatch_names_the_nodes_and_both_types():
    reported = {"a": "ecs.ebmgn8is.32xlarge", "b": "ecs.ebmgn7ex.32xlarge"}
    verdict = judge_instance_types(reported, EBMGN8IS, "ebmgn8is")
    assert not verdict
    expected = "b report ecs.ebmgn7ex.32xlarge, profile ebmgn8is is for ecs.ebmgn8is.*"
    assert verdict.reason == expected
    assert mismatched(reported, EBMGN8IS) == ["b"]


def test_a_node_without_an_instance_type_is_not_measured():
    verdict = judge_instance_types({"a": None}, EBMGN8IS)
    assert verdict.outcome == "not_measured"
    assert "a: no instance type in the metadata" in verdict.reason
    assert judge_instance_types({}, EBMGN8IS).outcome == "not_measured"
    wrong = judge_instance_types({"a": None, "b": "ecs.g7.large"}, EBMGN8IS)
    assert wrong.outcome == "fail" and wrong.extra["suspects"] == ["a", "b"]


def test_no_pattern_is_no_bound_not_a_pass():
    verdict = judge_instance_types({"a": "ecs.ebmgn8is.32xlarge"}, [])
    assert verdict.outcome == "not_measured"
    assert verdict.reason.startswith("no bound set (expect.instance_types)")


def test_each_type_is_measured_with_its_nodes():
    reported = {"a": "ecs.ebmgn8is.32xlarge", "b": "ecs.ebmgn8is.32xlarge", "c": "ecs.g7.large"}
    verdict = judge_instance_types(reported, EBMGN8IS)
    assert [(m.value, m.subject, m.comparison) for m in verdict.measurements] == [
        ("ecs.ebmgn8is.32xlarge", "a, b", "in"),
        ("ecs.g7.large", "c", "in"),
    ]


def test_the_lab_profile_matches_only_the_lab():
    lab = load_profile("lab")["instance_types"]
    assert judge_instance_types({"node01": "ecs.hpcnet-lab.emulated"}, lab)
    for real in ("ecs.ebmgn8is.32xlarge", "ecs.gn9gc-8x.64xlarge", "ecs.ebmgn7ex.32xlarge"):
        assert not judge_instance_types({"n": real}, lab)


def test_each_cloud_profile_names_its_types_and_nccl_bounds_with_sources():
    for name, real in (
        ("ebmgn8is", "ecs.ebmgn8is.32xlarge"),
        ("ebmgn7ex", "ecs.ebmgn7ex.32xlarge"),
        ("gn9gc", "ecs.gn9gc-8x.64xlarge"),
    ):
        profile = load_profile(name)
        assert judge_instance_types({"n": real}, profile["instance_types"])
        assert not judge_instance_types({"n": "ecs.hpcnet-lab.emulated"}, profile["instance_types"])
        sources = load_profile_sources(name)
        assert sources["instance_types"] and sources["nccl"]
        assert "nccl" in profile  # set, or explicitly null with the reason in its source
