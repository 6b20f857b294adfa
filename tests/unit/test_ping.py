"""Unit tests of the ping command builders, parser and path-MTU verdict."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.pairs.probes import LATENCY_COUNT, gather_pair_facts
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes import ping
from pytest_hpcnet.probes.sections import MARK
from pytest_hpcnet.requirements import mtu
from pytest_hpcnet.transport.fanout import CommandResult
from tests.corpus import corpus_files

ROOT = Path(__file__).parents[2]


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
    verdict = mtu.path_mtu_ok(r)
    assert verdict and "MTU 8500" in verdict.reason


def test_total_loss(fixture_text):
    r = ping.parse_ping(fixture_text("ping", "total-loss.txt"))
    assert (r.transmitted, r.received, r.loss_percent) == (3, 0, 100.0)
    assert r.rtt_avg_ms is None
    verdict = mtu.path_mtu_ok(r)
    assert not verdict and "100% loss" in verdict.reason and "MTU 1400" in verdict.reason


def test_busybox_round_trip(fixture_text):
    r = ping.parse_ping(fixture_text("ping", "busybox-round-trip.txt"))
    assert (r.payload_size, r.packet_size) == (56, 84)
    assert (r.transmitted, r.received) == (2, 2)
    assert (r.rtt_min_ms, r.rtt_avg_ms, r.rtt_max_ms, r.rtt_mdev_ms) == (0.180, 0.197, 0.215, None)


def test_unknown_host(fixture_text):
    r = ping.parse_ping(fixture_text("ping", "unknown-host.txt"))
    assert r.error == "ping: node-99: Name or service not known"
    verdict = mtu.path_mtu_ok(r, 1500)
    assert not verdict and "Name or service not known" in verdict.reason


def test_host_unreachable_errors(fixture_text):
    r = ping.parse_ping(fixture_text("ping", "host-unreachable-errors.txt"))
    assert (r.transmitted, r.received, r.errors, r.loss_percent) == (3, 0, 3, 100.0)
    assert r.path_mtu is None
    assert not mtu.path_mtu_ok(r)


@pytest.mark.parametrize("word", ["message", "Message"])
def test_local_message_too_long_both_capitalisations(word):
    text = (
        "PING 10.0.0.2 (10.0.0.2) 8472(8500) bytes of data.\r\n"
        f"ping: local error: {word} too long, mtu=1500\r\n"
        f"ping: local error: {word} too long, mtu=1500\r\n"
    )
    r = ping.parse_ping(text)
    assert (r.local_mtu, r.remote_mtu, r.errors, r.received) == (1500, None, 2, 0)
    verdict = mtu.path_mtu_ok(r)
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
    verdict = mtu.path_mtu_ok(r)
    assert "path MTU 1500" in verdict.reason


def test_explicit_mtu_overrides_header():
    r = ping.parse_ping(
        "64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.1 ms\n\n"
        "--- 10.0.0.2 ping statistics ---\n"
        "1 packets transmitted, 1 received, 0% packet loss, time 0ms\n"
        "rtt min/avg/max/mdev = 0.100/0.100/0.100/0.000 ms\n"
    )
    assert r.received == 1 and r.packet_size is None
    assert mtu.path_mtu_ok(r, 1400).reason == "1 of 1 replies at MTU 1400 with DF set"


@pytest.mark.parametrize("text", ["", "garbage", "\x00", "--- x ping statistics ---"])
def test_odd_text(text):
    r = ping.parse_ping(text)
    assert r.problems
    assert not mtu.path_mtu_ok(r)


def test_tool_missing():
    r = ping.parse_ping("hpcnet: ping not found\n")
    assert r.tool_missing
    assert mtu.path_mtu_ok(r).reason == "ping not installed"


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


# ---------------------------------------------------------------------------
# fail closed: real outputs cut short (tests/fixtures/ping/PROVENANCE.md)


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("real-weka-jumbo-cut-after-3-replies.txt", "no statistics"),
        ("real-weka-jumbo-cut-before-rtt.txt", "no rtt line"),
        ("real-weka-jumbo-cut-in-summary.txt", "no summary line"),
    ],
)
def test_cut_short_output_is_incomplete_and_fails(fixture_text, name, needle):
    r = ping.parse_ping(fixture_text("ping", name))
    assert r.incomplete is not None and needle in r.incomplete
    verdict = mtu.path_mtu_ok(r)
    assert not verdict and needle in verdict.reason and "\n" not in verdict.reason


def test_fewer_sent_than_asked_is_incomplete():
    files = {p.name: p for p in corpus_files("ip_link_ping")}
    assert files, "corpus missing: tests/fixtures/samples"
    text = files["ping-jumbo-8972-success-weka-docs.txt"].read_text()
    assert mtu.path_mtu_ok(ping.parse_ping(text, expected_count=3))
    r = ping.parse_ping(text, expected_count=10)  # interrupted after 3 of -c 10
    assert r.incomplete == "3 of 10 probes sent (ping interrupted?)"
    assert not mtu.path_mtu_ok(r)


def test_fewer_replies_than_sent_are_counted_and_fail():
    # hand-written in iputils' format: one DF probe of three lost
    text = (
        "PING 10.0.0.2 (10.0.0.2) 8472(8500) bytes of data.\n"
        "8480 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.101 ms\n"
        "8480 bytes from 10.0.0.2: icmp_seq=3 ttl=64 time=0.099 ms\n"
        "\n"
        "--- 10.0.0.2 ping statistics ---\n"
        "3 packets transmitted, 2 received, 33.3333% packet loss, time 402ms\n"
        "rtt min/avg/max/mdev = 0.099/0.100/0.101/0.001 ms\n"
    )
    r = ping.parse_ping(text, expected_count=3)
    assert r.incomplete is None and r.lost == 1
    verdict = mtu.path_mtu_ok(r)
    assert not verdict and verdict.reason.startswith("2 of 3 replies at MTU 8500")


def test_terminal_colour_codes_are_stripped_before_parsing():
    # the escapes `nvidia-smi topo -m` prints (samples/nvidia_smi), here on ping's summary
    files = {p.name: p for p in corpus_files("ip_link_ping")}
    assert files, "corpus missing: tests/fixtures/samples"
    text = files["ping-jumbo-8972-success-weka-docs.txt"].read_text()
    line = "3 packets transmitted, 3 received, 0% packet loss, time 1999ms"
    r = ping.parse_ping(text.replace(line, "\x1b[1m" + line + "\x1b[0m"))
    assert r.has_statistics and (r.transmitted, r.received) == (3, 3)


def test_pair_facts_hold_each_ping_to_the_count_it_sent(ssh_home):
    # pairs.gather_pair_facts passes the -c it used: a ping stopped after 3 of the
    # latency run's LATENCY_COUNT probes is incomplete, not a latency
    files = {p.name: p for p in corpus_files("ip_link_ping")}
    assert files, "corpus missing: tests/fixtures/samples"
    jumbo = files["ping-jumbo-8972-success-weka-docs.txt"].read_text()
    # the sample's 9000-byte run as the 8500 (expect.mtu) asked
    three = jumbo.replace("8972(9000)", "8472(8500)").replace("8980 bytes", "8480 bytes")
    probed = "".join(
        f"{MARK} begin {name}\n{three}\n{MARK} end {name} 0\n" for name in ("path_mtu", "latency")
    )

    class Fake:
        concurrency = 4

        def run_on_all(self, command, nodes=None, timeout_s=None, together=False):
            return {n: CommandResult(n, "cmd", 0, probed, "", 1.0, 0.0) for n in nodes}

    expect = load_inventory(ROOT / "inventories" / "example.yaml").expect
    nodes = {n: Node(name=n, host=n) for n in ("a", "b")}
    addresses = {"a": "192.168.1.1", "b": "192.168.1.2"}
    facts, _ = gather_pair_facts(Fake(), nodes, addresses, [("a", "b")], expect)
    assert LATENCY_COUNT > 3 and ping.PATH_MTU_COUNT == 3 and expect.mtu == 8500
    assert facts[("a", "b")].path_mtu.incomplete is None
    sent = f"3 of {LATENCY_COUNT} probes sent (ping interrupted?)"
    assert facts[("a", "b")].latency.incomplete == sent


def test_a_pair_section_without_its_end_line_is_not_read(ssh_home):
    """The source's output cut after a whole ping but before its section's end line: the
    ping is not taken, as a facts section cut short is not."""
    files = {p.name: p for p in corpus_files("ip_link_ping")}
    three = files["ping-jumbo-8972-success-weka-docs.txt"].read_text()
    cut = f"{MARK} begin path_mtu\n{three}\n"  # no `end path_mtu` line

    class Fake:
        concurrency = 4

        def run_on_all(self, command, nodes=None, timeout_s=None, together=False):
            return {n: CommandResult(n, "cmd", None, cut, "", 1.0, 0.0) for n in nodes}

    expect = load_inventory(ROOT / "inventories" / "example.yaml").expect
    nodes = {n: Node(name=n, host=n) for n in ("a", "b")}
    facts, _ = gather_pair_facts(Fake(), nodes, {"a": "a", "b": "b"}, [("a", "b")], expect)
    assert not facts[("a", "b")].path_mtu.has_statistics  # nothing read: not measured


@pytest.mark.parametrize("text", ["", "\n", "garbage that is no ping\n"])
def test_no_ping_run_in_the_output_is_not_measured_never_a_failure_of_the_path(text):
    """Nothing ping prints (an empty or unreadable section): not measured, not 'no reply'."""
    result = ping.parse_ping(text)
    assert result.incomplete
    assert mtu.judge_path_mtu(result, 8500).outcome == "not_measured"
