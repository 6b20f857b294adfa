"""Every node of the inventory answers over SSH and says what it runs."""

import pytest

from pytest_hpcnet.probes.metadata import parse_metadata
from pytest_hpcnet.requirements.network import judge_reachability
from pytest_hpcnet.requirements.registry import mark

pytestmark = [pytest.mark.static, mark("reachability")]


def test_node_answers_over_ssh(cluster, node, check):
    facts = cluster.facts(node, check)
    metadata = facts.sections.get("metadata")  # for the certificate's facts table only
    placement = parse_metadata(metadata.text) if metadata is not None else None
    verdict = judge_reachability(
        facts.text("hostname").strip(), facts.text("kernel").strip(), placement
    )
    check.judge(verdict, context=node.name)
