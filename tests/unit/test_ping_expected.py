"""A ping output is a measurement only of the run asked: its packet size and host, as many
reply lines as its summary counts, one run, every line readable (review findings 2, 4)."""

from __future__ import annotations

import pytest

from pytest_hpcnet.probes import ping
from pytest_hpcnet.requirements import mtu

ASKED = {"expected_count": 3, "expected_packet": 8500, "expected_target": "10.0.0.2"}


@pytest.fixture
def whole(fixture_text):
    return fixture_text("ping", "success-stats.txt")


def test_the_run_asked_passes(whole):
    r = ping.parse_ping(whole, **ASKED)
    assert r.incomplete is None and mtu.path_mtu_ok(r, 8500).outcome == "pass"


def test_fewer_reply_lines_than_the_summary_claims_is_not_measured(whole):
    lines = whole.splitlines(keepends=True)
    replies = [i for i, ln in enumerate(lines) if "bytes from" in ln]
    text = "".join(ln for i, ln in enumerate(lines) if i != replies[-1])
    r = ping.parse_ping(text, **ASKED)
    assert "the summary says 3 received, 2 reply lines" in r.incomplete
    assert mtu.path_mtu_ok(r, 8500).outcome == "not_measured"


def test_replies_of_another_size_are_not_measured(whole):
    text = whole.replace("8480 bytes from", "1480 bytes from")
    r = ping.parse_ping(text, **ASKED)
    assert "replies of 1480 bytes, 8480 expected" in r.incomplete
    assert mtu.path_mtu_ok(r, 8500).outcome == "not_measured"


def test_a_1500_byte_run_never_passes_the_8500_check(whole):
    small = whole.replace("8472(8500)", "1472(1500)").replace("8480 bytes", "1480 bytes")
    r = ping.parse_ping(small, **ASKED)
    assert "ping of 1500-byte packets, 8500 asked" in r.incomplete
    assert mtu.path_mtu_ok(r, 8500).outcome == "not_measured"
    assert mtu.path_mtu_ok(r).outcome == "not_measured"


def test_a_ping_of_another_host_is_not_measured(whole):
    r = ping.parse_ping(whole.replace("10.0.0.2", "10.0.0.9"), **ASKED)
    assert "a ping of 10.0.0.9, 10.0.0.2 asked" in r.incomplete


def test_replies_from_another_host_are_not_measured(whole):
    text = whole.replace("bytes from 10.0.0.2", "bytes from 10.0.0.9", 1)
    r = ping.parse_ping(text, **ASKED)
    assert "replies from 10.0.0.9" in r.incomplete


def test_two_runs_in_one_output_are_not_measured(whole):
    r = ping.parse_ping(whole + whole, **ASKED)
    assert "2 ping runs in one output" in r.incomplete


@pytest.mark.parametrize("cell", ["nan", "inf", "-0.103", "０.１０３", "٠.١٠٣", "0.1.3"])
def test_an_unreadable_rtt_is_not_measured(whole, cell):
    r = ping.parse_ping(whole.replace("/0.103/", f"/{cell}/"), **ASKED)
    assert r.incomplete is not None and mtu.path_mtu_ok(r, 8500).outcome != "pass"


@pytest.mark.parametrize("cell", ["nan", "-0.1", "１.０", "0.1.2"])
def test_an_unreadable_reply_time_is_not_measured(whole, cell):
    first = next(ln for ln in whole.splitlines() if "bytes from" in ln)
    time = first.split("time=")[1].split()[0]
    r = ping.parse_ping(whole.replace(f"time={time}", f"time={cell}", 1), **ASKED)
    assert r.incomplete is not None


def test_full_width_counts_are_no_summary(whole):
    r = ping.parse_ping(whole.replace("3 received", "３ received"), **ASKED)
    assert r.incomplete is not None and mtu.path_mtu_ok(r, 8500).outcome != "pass"


def test_an_rtt_line_cut_mid_number_is_not_measured(whole):
    cut = whole[: whole.index("rtt") + len("rtt min/avg/max/mdev = 0.098/0.10")]
    r = ping.parse_ping(cut, **ASKED)
    assert r.incomplete is not None and mtu.path_mtu_ok(r, 8500).outcome == "not_measured"


def test_callers_without_the_new_parameters_still_read_it(whole):
    r = ping.parse_ping(whole)
    assert r.incomplete is None and r.received == 3


def test_a_ping_bound_to_an_interface_is_read_with_its_header():
    """iputils prints `from <source> <device>:` in the header when -I is given (ping4's
    header: `PING %s (%s) ` then `from %s %s: `); the ERI path-MTU probe pings that way."""
    text = (
        "PING 198.18.1.12 (198.18.1.12) from 198.18.1.11 eth1: 8472(8500) bytes of data.\n"
        "8480 bytes from 198.18.1.12: icmp_seq=1 ttl=64 time=0.061 ms\n"
        "\n--- 198.18.1.12 ping statistics ---\n"
        "1 packets transmitted, 1 received, 0% packet loss, time 0ms\n"
        "rtt min/avg/max/mdev = 0.061/0.061/0.061/0.000 ms\n"
    )
    result = ping.parse_ping(text, expected_packet=8500, expected_target="198.18.1.12")
    assert result.received == 1 and not result.incomplete, result
