"""Host tuning and NIC health: sysctls as expected, no NIC errors, low ICMP latency."""

import pytest

from pytest_hpcnet.probes.links import counters_verdict, parse_interfaces
from pytest_hpcnet.probes.ping import replies_ok
from pytest_hpcnet.probes.sysctl import ExpectedSysctl, compare_sysctl, parse_sysctl
from pytest_hpcnet.requirements.registry import mark, not_applicable_when

pytestmark = [pytest.mark.static, mark("tuning")]


@not_applicable_when(
    lambda expect: not expect.sysctl,
    "not applicable: no sysctl expectations (expect.sysctl is empty)",
)
def test_sysctl_tuned(cluster, node, check):
    expected = [
        ExpectedSysctl(key, str(value.value), value.mode)
        for key, value in cluster.expect.sysctl.items()
    ]
    values = parse_sysctl(cluster.facts(node, check).text("sysctl"))
    deviations = compare_sysctl(values, expected)
    for exp in expected:
        check.measure(
            exp.key,
            values.get(exp.key),
            "",
            exp.value,
            {"equal": "==", "min": ">=", "one_of": "in"}[exp.mode],
            f"expect.sysctl.{exp.key}",
        )
    assert not deviations, f"{node.name}: " + "; ".join(d.reason for d in deviations)


def test_nic_error_counters(cluster, node, check):
    limit, drop_limit = cluster.expect.nic_max_errors, cluster.expect.nic_max_dropped
    iface = parse_interfaces(cluster.facts(node, check).text("links")).get(node.interface)
    assert iface is not None, f"{node.name}: interface {node.interface!r} not found"
    assert iface.stats is not None, f"{node.name}: no counters for {node.interface} (ip -s)"
    stats = iface.stats
    errors = (stats.rx_errors or 0) + (stats.tx_errors or 0)
    dropped = (stats.rx_dropped or 0) + (stats.tx_dropped or 0)
    check.measure("errors", errors, "packets", limit, "<=", "expect.nic_max_errors")
    check.measure("dropped", dropped, "packets", drop_limit, "<=", "expect.nic_max_dropped")
    verdict = counters_verdict(iface, max_errors=limit, max_dropped=drop_limit)
    assert verdict.ok, f"{node.name}: {verdict.reason}"


def test_icmp_latency(cluster, node_pair, check):
    source, target = node_pair
    ping = cluster.pair_facts(source, target, check).latency
    bounds = cluster.expect.ping
    verdict = replies_ok(ping)  # whole output, every probe sent and answered
    assert verdict.ok, f"{source.name}->{target.name}: {verdict.reason}"
    check.measure(
        "rtt_avg", ping.rtt_avg_ms, "ms", bounds.max_avg_ms, "<=", "expect.ping.max_avg_ms"
    )
    check.measure("rtt_max", ping.rtt_max_ms, "ms", bounds.max_ms, "<=", "expect.ping.max_ms")
    pair = f"{source.name}->{target.name}"
    assert ping.rtt_avg_ms <= bounds.max_avg_ms, (
        f"{pair}: average RTT {ping.rtt_avg_ms:.3f} ms > {bounds.max_avg_ms} ms"
    )
    assert ping.rtt_max_ms <= bounds.max_ms, (
        f"{pair}: max RTT {ping.rtt_max_ms:.3f} ms > {bounds.max_ms} ms"
    )
