"""Placement: all nodes share one vSwitch, VPC and zone (or the ones the inventory names),
and run an instance type the profile is for (judges: requirements/network.py,
requirements/instance_types.py)."""

import pytest

from pytest_hpcnet.probes.metadata import METADATA
from pytest_hpcnet.requirements.instance_types import judge_instance_types
from pytest_hpcnet.requirements.network import PLACEMENT_FIELDS, judge_placement
from pytest_hpcnet.requirements.registry import mark

pytestmark = [pytest.mark.static]


def metadata(cluster, check):
    """Each reached node's parsed metadata."""
    return {
        node.name: cluster.facts(node, check).get(METADATA)
        for node in cluster.nodes
        if node.name not in cluster.transport.unreachable()
    }


@mark("placement")
@pytest.mark.parametrize("key", list(PLACEMENT_FIELDS))
def test_nodes_share_placement(cluster, key, check):
    verdict = judge_placement(metadata(cluster, check), key, cluster.expect)
    check.suspect(*verdict.extra["suspects"])
    check.judge(verdict)


@mark("instance_type")
def test_instance_type_matches_profile(cluster, check):
    reported = {name: f.instance_type for name, f in metadata(cluster, check).items()}
    expect = cluster.expect
    verdict = judge_instance_types(reported, expect.instance_types, expect.profile or "")
    check.suspect(*verdict.extra.get("suspects", ()))
    check.judge(verdict)
