"""Every node of the inventory answers over SSH and says what it runs."""

import pytest

from pytest_hpcnet.probes.identity import HOSTNAME, KERNEL
from pytest_hpcnet.probes.metadata import METADATA
from pytest_hpcnet.requirements.network import judge_reachability
from pytest_hpcnet.requirements.registry import mark

pytestmark = [pytest.mark.static, mark("reachability")]


def test_node_answers_over_ssh(cluster, node, check):
    facts = cluster.facts(node, check)
    placement = facts.peek(METADATA)  # for the certificate's facts table only
    verdict = judge_reachability(facts.get(HOSTNAME), facts.get(KERNEL), placement)
    check.judge(verdict, context=node.name)
