"""Every node of the inventory answers over SSH and says what it runs."""

import pytest

from pytest_hpcnet.probes.metadata import parse_metadata
from pytest_hpcnet.requirements.registry import mark

pytestmark = [pytest.mark.static, mark("reachability")]


def test_node_answers_over_ssh(cluster, node, check):
    facts = cluster.facts(node, check)
    hostname = facts.text("hostname").strip()
    kernel = facts.text("kernel").strip()
    check.measure("hostname", hostname)
    check.measure("kernel", kernel)
    metadata = facts.sections.get("metadata")  # for the certificate's facts table only
    placement = parse_metadata(metadata.text) if metadata is not None else None
    for name in ("instance_type", "instance_id", "vswitch_id"):
        if placement is not None and getattr(placement, name):
            check.measure(name, getattr(placement, name))
    assert hostname, f"{node.name}: answered over SSH but reported no hostname"
    assert kernel, f"{node.name}: answered over SSH but reported no kernel release"
