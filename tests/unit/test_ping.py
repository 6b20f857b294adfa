"""Unit tests of the ping command builders, parser and path-MTU verdict."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from pytest_hpcnet.probes import ping


def test_path_mtu_command():
    cmd = ping.path_mtu_ping_command("10.0.0.2", 8500, count=3, timeout_s=2)
    assert "ping -n -M do -c 3 -s 8472 -W 2 -i 0.2 10.0.0.2" in cmd
    assert "2>&1" in cmd and "LC_ALL=C" in cmd and "hpcnet: ping not found" in cmd
    hostile = ping.path_mtu_ping_command("h; reboot", 1500, interface="eth 1")
    assert shlex.quote("h; reboot") in hostile and "-I 'eth 1'" in hostile
    with pytest.raises(ValueError):
        ping.path_mtu_ping_command("h", 20)


def test_latency_command():
    cmd = ping.latency_ping_command("node-2", count=20, interval_s=0.01, timeout_s=1.5)
    assert "ping -n -c 20 -i 0.01 -W 1.5 node-2" in cmd


def test_success_with_statistics(fixture_text):
    r = ping.parse_ping(fixture_text("ping", "success-stats.txt"))
    assert (r.target, r.payload_size, r.packet_size) == ("10.0.0.2", 8472, 8500)
    assert (r.transmitted, r.received, r.errors, r.loss_percent) == (3, 3, 0, 0.0)
    assert (r.rtt_min_ms, r.rtt_avg_ms, r.rtt_max_ms, r.rtt_mdev_ms) == (0.098, 0.103, 0.112, 0.006)
    assert r.has_statistics and r.path_mtu is None
    verdict = ping.path_mtu_ok(r)
    assert verdict and "MTU 8500" in verdict.reason


def test_total_loss(fixture_text):
    r = ping.parse_ping(fixture_text("ping", "total-loss.txt"))
    assert (r.transmitted, r.received, r.loss_percent) == (3, 0, 100.0)
    assert r.rtt_avg_ms is None
    verdict = ping.path_mtu_ok(r)
    assert not verdict and "100% loss" in verdict.reason and "MTU 1400" in verdict.reason


def test_busybox_round_trip(fixture_text):
    r = ping.parse_ping(fixture_text("ping", "busybox-round-trip.txt"))
    assert (r.payload_size, r.packet_size) == (56, 84)
    assert (r.transmitted, r.received) == (2, 2)
    assert (r.rtt_min_ms, r.rtt_avg_ms, r.rtt_max_ms, r.rtt_mdev_ms) == (0.180, 0.197, 0.215, None)


def test_unknown_host(fixture_text):
    r = ping.parse_ping(fixture_text("ping", "unknown-host.txt"))
    assert r.error == "ping: node-99: Name or service not known"
    verdict = ping.path_mtu_ok(r, 1500)
    assert not verdict and "Name or service not known" in verdict.reason


def test_host_unreachable_errors(fixture_text):
    r = ping.parse_ping(fixture_text("ping", "host-unreachable-errors.txt"))
    assert (r.transmitted, r.received, r.errors, r.loss_percent) == (3, 0, 3, 100.0)
    assert r.path_mtu is None
    assert not ping.path_mtu_ok(r)


@pytest.mark.parametrize("word", ["message", "Message"])
def test_local_message_too_long_both_capitalisations(word):
    text = (
        "PING 10.0.0.2 (10.0.0.2) 8472(8500) bytes of data.\r\n"
        f"ping: local error: {word} too long, mtu=1500\r\n"
        f"ping: local error: {word} too long, mtu=1500\r\n"
    )
    r = ping.parse_ping(text)
    assert (r.local_mtu, r.remote_mtu, r.errors, r.received) == (1500, None, 2, 0)
    verdict = ping.path_mtu_ok(r)
    assert not verdict
    assert "1500" in verdict.reason and "8500" in verdict.reason


def test_remote_frag_needed_takes_smallest():
    text = (
        "PING 10.0.0.2 (10.0.0.2) 8472(8500) bytes of data.\n"
        "From 10.0.0.1 icmp_seq=1 Frag needed and DF set (mtu = 8000)\n"
        "From 10.0.0.9 icmp_seq=2 Frag needed and DF set (mtu = 1500)\n"
    )
    r = ping.parse_ping(text)
    assert r.remote_mtu == 1500 and r.path_mtu == 1500
    verdict = ping.path_mtu_ok(r)
    assert "path MTU 1500" in verdict.reason


def test_explicit_mtu_overrides_header():
    r = ping.parse_ping("64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.1 ms\n")
    assert r.received == 1 and r.packet_size is None
    assert ping.path_mtu_ok(r, 1400).reason == "1 replies at MTU 1400 with DF set"


@pytest.mark.parametrize("text", ["", "garbage", "\x00", "--- x ping statistics ---"])
def test_odd_text(text):
    r = ping.parse_ping(text)
    assert r.problems
    assert not ping.path_mtu_ok(r)


def test_tool_missing():
    r = ping.parse_ping("hpcnet: ping not found\n")
    assert r.tool_missing
    assert ping.path_mtu_ok(r).reason == "ping not installed"


def test_loopback_ping_runs_and_parses():
    cmd = ping.path_mtu_ping_command("127.0.0.1", 1500, count=2, timeout_s=1)
    out = subprocess.run(
        ["sh", "-c", cmd], capture_output=True, text=True, timeout=20, check=False
    ).stdout
    r = ping.parse_ping(out)
    if r.tool_missing or r.error:
        pytest.skip(f"ping not usable here: {r.error or 'missing'}")
    assert r.packet_size == 1500
    assert r.transmitted == 2
