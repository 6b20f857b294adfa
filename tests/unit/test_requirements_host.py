"""The host judges (requirements/host.py) on recorded outputs: sysctls, NIC counters, ICMP
latency; each a pass, a failure and what was not measured, with the values as measurements."""

from __future__ import annotations

import pytest

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes import ping
from pytest_hpcnet.probes.links import parse_interfaces
from pytest_hpcnet.probes.sysctl import parse_sysctl
from pytest_hpcnet.requirements.host import (
    judge_icmp_latency,
    judge_nic_counters,
    judge_sysctl,
    sysctl_problem,
)
from tests.corpus import corpus_files

SYSCTL = {
    "net.core.rmem_max": {"value": 16777216, "mode": "min"},
    "net.core.wmem_max": {"value": 16777216, "mode": "min"},
    "net.ipv4.tcp_rmem": {"value": "4096 87380 16777216", "mode": "min"},
    "net.ipv4.tcp_wmem": {"value": "16777216", "mode": "min"},
    "net.ipv4.tcp_congestion_control": {"value": "bbr", "mode": "equal"},
}


def expect(**keys) -> Expectations:
    return Expectations.model_validate(keys)


def by_name(verdict) -> dict:
    return {m.name: m for m in verdict.measurements}


# -- sysctl ---------------------------------------------------------------------------------


def test_sysctl_deviations_fail_with_every_key_measured(fixture_text):
    values = parse_sysctl(fixture_text("sysctl", "network.txt"))
    verdict = judge_sysctl(values, expect(sysctl=SYSCTL))
    assert verdict.outcome == "fail" and verdict.reason == (
        "net.core.wmem_max 4194304 is below 16777216; "
        "net.ipv4.tcp_wmem maximum 6291456 is below 16777216; "
        "net.ipv4.tcp_congestion_control is 'cubic', expected 'bbr'"
    )
    assert "sysctl --system" in verdict.fix and verdict.sections == ("sysctl",)
    rmem = by_name(verdict)["net.ipv4.tcp_rmem"]
    assert (rmem.value, rmem.bound, rmem.comparison, rmem.source) == (
        "4096 87380 16777216",
        "4096 87380 16777216",
        ">=",
        "expect.sysctl.net.ipv4.tcp_rmem",
    )
    assert by_name(verdict)["net.ipv4.tcp_congestion_control"].comparison == "=="
    assert len(verdict.measurements) == len(SYSCTL)


def test_sysctl_a_key_the_kernel_lacks_fails_one_it_would_not_show_is_not_measured(fixture_text):
    values = parse_sysctl(fixture_text("sysctl", "network.txt"))
    lacking = judge_sysctl(values, expect(sysctl={"net.ipv4.tcp_nope": {"value": 1}}))
    assert lacking.outcome == "fail"
    assert lacking.reason.startswith("net.ipv4.tcp_nope is not a key of this kernel (sysctl: ")
    denied = parse_sysctl(fixture_text("sysctl", "crlf-denied.txt"))
    hidden = judge_sysctl(denied, expect(sysctl={"net.core.bpf_jit_harden": {"value": 0}}))
    assert hidden.outcome == "not_measured" and "permission denied" in hidden.reason
    cut = judge_sysctl(parse_sysctl(""), expect(sysctl={"net.core.rmem_max": {"value": 1}}))
    assert (
        cut.outcome == "not_measured"
        and cut.reason == "net.core.rmem_max not read (not in the output)"
    )
    assert by_name(cut)["net.core.rmem_max"].value is None


def test_sysctl_passes_and_one_of(fixture_text):
    values = parse_sysctl(fixture_text("sysctl", "network.txt"))
    rules = {
        "net.core.rmem_max": {"value": 16777216, "mode": "min"},
        "net.ipv4.tcp_congestion_control": {"value": "cubic, bbr", "mode": "one_of"},
    }
    verdict = judge_sysctl(values, expect(sysctl=rules))
    assert verdict.ok and by_name(verdict)["net.ipv4.tcp_congestion_control"].comparison == "in"
    reno = judge_sysctl(
        parse_sysctl("net.ipv4.tcp_congestion_control = reno\n"), expect(sysctl=rules)
    )
    assert "expected one of cubic, bbr" in reno.reason and reno.outcome == "fail"


@pytest.mark.parametrize(
    ("found", "expected", "mode", "ok"),
    [
        ("16777216", "16777216", "min", True),
        ("33554432", "16777216", "min", True),
        ("212992", "16777216", "min", False),
        ("4096\t87380\t16777216", "4096 87380 16777216", "min", True),
        ("4096 131072 33554432", "4096 87380 16777216", "min", True),
        ("4096 87380 6291456", "4096 87380 16777216", "min", False),
        ("4096 65536 16777216", "4096 87380 16777216", "min", False),
        ("4096 87380", "4096 87380 16777216", "min", False),
        ("bbr", "16777216", "min", False),
        ("bbr", "bbr", "equal", True),
        ("cubic", "bbr", "equal", False),
        ("4096\t87380\t16777216", "4096 87380 16777216", "equal", True),
        ("1", "1 ", "equal", True),
    ],
)
def test_sysctl_semantics(found, expected, mode, ok):
    assert (sysctl_problem("k", found, expected, mode) is None) is ok


def test_sysctl_elementwise_reason_names_the_field():
    why = sysctl_problem("k", "4096 65536 16777216", "4096 87380 16777216", "min")
    assert "field 2: 65536 < 87380" in why


# -- NIC counters ---------------------------------------------------------------------------


def test_nic_counters_over_the_bounds_fail_each_counter_measured(fixture_text):
    found = parse_interfaces(fixture_text("links", "ip-j-s-link.json"))
    verdict = judge_nic_counters(found, "eth0", expect(nic_max_errors=0, nic_max_dropped=10))
    assert verdict.outcome == "fail"
    assert verdict.reason == "eth0: counters above threshold: tx_errors 3 > 0, rx_dropped 17 > 10"
    dropped = by_name(verdict)["rx_dropped"]
    assert (dropped.value, dropped.bound, dropped.comparison, dropped.subject) == (
        17,
        10,
        "<=",
        "eth0",
    )
    assert dropped.source == "expect.nic_max_dropped" and verdict.sections == ("links",)
    assert judge_nic_counters(found, "eth0", expect(nic_max_errors=3, nic_max_dropped=20)).ok
    assert judge_nic_counters(found, "lo", expect()).ok


def test_nic_counters_not_found_or_not_shown_is_not_measured(fixture_text):
    found = parse_interfaces(fixture_text("links", "ip-j-s-link.json"))
    absent = judge_nic_counters(found, "eth9", expect())
    assert absent.outcome == "not_measured"
    assert absent.reason.startswith("interface 'eth9' not found (interfaces: lo, eth0,")
    bare = judge_nic_counters(found, "ib0.8002", expect())  # listed without `-s` counters
    assert bare.outcome == "not_measured" and "no counters for ib0.8002" in bare.reason
    missing = judge_nic_counters(parse_interfaces("bash: ip: command not found"), "eth0", expect())
    assert missing.outcome == "not_measured"


# -- ICMP latency ---------------------------------------------------------------------------


def test_latency_passes_with_every_reply_and_rtts_within_bounds(fixture_text):
    whole = ping.parse_ping(fixture_text("ping", "success-stats.txt"), expected_count=3)
    verdict = judge_icmp_latency(whole, expect())
    assert verdict.ok and verdict.reason == "3 of 3 replies"
    avg = by_name(verdict)["rtt_avg"]
    assert (avg.value, avg.unit, avg.bound, avg.comparison, avg.source) == (
        0.103,
        "ms",
        1.0,
        "<=",
        "expect.ping.max_avg_ms",
    )
    assert by_name(verdict)["rtt_max"].value == 0.112 and by_name(verdict)["lost"].value == 0


def test_latency_rtt_bounds_are_judged_in_the_judge(fixture_text):
    whole = ping.parse_ping(fixture_text("ping", "success-stats.txt"), expected_count=3)
    slow = judge_icmp_latency(whole, expect(ping={"max_avg_ms": 0.1, "max_ms": 0.11}))
    assert slow.outcome == "fail"
    assert slow.reason == "average RTT 0.103 ms > 0.1 ms; max RTT 0.112 ms > 0.11 ms"


def test_latency_loss_and_failure_fail(fixture_text):
    lossy = ping.parse_ping(
        "PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.\n"
        "64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.101 ms\n\n"
        "--- 10.0.0.2 ping statistics ---\n"
        "2 packets transmitted, 1 received, 50% packet loss, time 201ms\n"
        "rtt min/avg/max/mdev = 0.101/0.101/0.101/0.000 ms\n"
    )
    assert judge_icmp_latency(lossy, expect()).reason == "1 of 2 replies (1 lost)"
    total = judge_icmp_latency(ping.parse_ping(fixture_text("ping", "total-loss.txt")), expect())
    assert total.outcome == "fail" and total.reason == "no ICMP reply (100% loss)"
    unknown = ping.parse_ping("ping: node-9: Name or service not known")
    assert judge_icmp_latency(unknown, expect()).reason == (
        "ping failed: ping: node-9: Name or service not known"
    )


def test_latency_cut_or_missing_ping_is_not_measured(fixture_text):
    files = {p.name: p for p in corpus_files("ip_link_ping")}
    whole = files["ping-jumbo-8972-success-weka-docs.txt"].read_text()
    stopped = judge_icmp_latency(ping.parse_ping(whole, expected_count=5), expect())
    assert stopped.outcome == "not_measured" and stopped.reason.startswith("3 of 5 probes sent")
    cut_text = fixture_text("ping", "real-weka-jumbo-cut-before-rtt.txt")
    cut = judge_icmp_latency(ping.parse_ping(cut_text), expect())
    assert cut.outcome == "not_measured" and "no rtt line" in cut.reason
    for text in ("hpcnet: ping not found", "", "garbage\n"):
        assert judge_icmp_latency(ping.parse_ping(text), expect()).outcome == "not_measured", text
