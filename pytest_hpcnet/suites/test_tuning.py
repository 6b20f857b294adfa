"""Host tuning and NIC health: sysctls as expected, no NIC errors, low ICMP latency.

Each test hands one judge's verdict (`requirements/host.py`) to its check."""

import pytest

from pytest_hpcnet.probes.links import LINKS
from pytest_hpcnet.probes.sysctl import SYSCTL
from pytest_hpcnet.requirements.host import judge_icmp_latency, judge_nic_counters, judge_sysctl
from pytest_hpcnet.requirements.registry import mark, not_applicable_when

pytestmark = [pytest.mark.static, mark("tuning")]


@not_applicable_when(
    lambda expect: not expect.sysctl,
    "not applicable: no sysctl expectations (expect.sysctl is empty)",
)
def test_sysctl_tuned(cluster, node, check):
    values = cluster.facts(node, check).get(SYSCTL)
    check.judge(judge_sysctl(values, cluster.expect), context=node.name)


def test_nic_error_counters(cluster, node, check):
    interfaces = cluster.facts(node, check).get(LINKS)
    check.judge(judge_nic_counters(interfaces, node.interface, cluster.expect), context=node.name)


def test_icmp_latency(cluster, node_pair, check):
    source, target = node_pair
    ping = cluster.pair_facts(source, target, check).latency
    check.judge(judge_icmp_latency(ping, cluster.expect), context=f"{source.name}->{target.name}")
