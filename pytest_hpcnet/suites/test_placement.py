"""Placement: all nodes share one vSwitch, VPC and zone (or the ones the inventory names)."""

import pytest

from pytest_hpcnet.probes.metadata import group_by_value, parse_metadata
from pytest_hpcnet.requirements.instance_types import judge_instance_types, mismatched
from pytest_hpcnet.requirements.registry import mark

pytestmark = [pytest.mark.static]

KEYS = [("vswitch-id", "vswitch_id"), ("vpc-id", "vpc_id"), ("zone-id", "zone_id")]


@mark("placement")
@pytest.mark.parametrize(("key", "field"), KEYS, ids=[k for k, _ in KEYS])
def test_nodes_share_placement(cluster, key, field, check):
    facts = {
        node.name: parse_metadata(cluster.facts(node, check).text("metadata"))
        for node in cluster.nodes
        if node.name not in cluster.transport.unreachable()
    }
    expected = getattr(cluster.expect.placement, field)
    grouping = group_by_value(facts, key, expected)
    for group in grouping.groups:
        check.measure(
            key,
            group.value,
            "",
            expected,
            "==",
            f"expect.placement.{field}" if expected else "all nodes agree",
        )
    check.suspect(*grouping.odd, *(name for name, _ in grouping.undetermined))
    sizes = sorted((len(g.nodes) for g in grouping.groups), reverse=True)
    if not expected and len(sizes) > 1 and sizes[0] > sizes[1]:  # a clear majority, no named id
        check.suspect(*(n for g in grouping.groups[1:] for n in g.nodes))
    assert grouping.consistent, "; ".join(grouping.findings)


@mark("instance_type")
def test_instance_type_matches_profile(cluster, check):
    patterns = cluster.expect.instance_types
    if not patterns:
        pytest.skip("no bound set (expect.instance_types): the instance types the profile is for")
    facts = {
        node.name: parse_metadata(cluster.facts(node, check).text("metadata"))
        for node in cluster.nodes
        if node.name not in cluster.transport.unreachable()
    }
    reported = {name: f.instance_type for name, f in facts.items()}
    for kind in sorted({t or "" for t in reported.values()}):
        check.measure("instance_type", kind or None, "", patterns, "in", "expect.instance_types")
    verdict = judge_instance_types(reported, patterns, cluster.expect.profile or "")
    check.suspect(*mismatched(reported, patterns))
    assert verdict, verdict.reason
