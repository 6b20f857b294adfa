"""Unit tests of the iperf3 builders and parser."""

from __future__ import annotations

import shlex

import pytest

from tests.iperf3 import client_command, parse_iperf3, server_command

AREA = "iperf3"


def test_commands():
    assert shlex.split(server_command(5202))[-4:] == ["-s", "-1", "-p", "5202"]
    argv = shlex.split(client_command("10.0.0.2; x", streams=4, reverse=True))
    assert argv[:3] == ["iperf3", "-c", "10.0.0.2; x"] and "-J" in argv and "-R" in argv


def test_text_sum_lines_win_over_stream_lines(fixture_text):
    r = parse_iperf3(fixture_text(AREA, "client-4-streams-sum.txt"))
    assert r.ok and r.sent_gbps == pytest.approx(38.5) and r.received_gbps == pytest.approx(38.3)
    assert r.retransmits == 40


def test_text_error(fixture_text):
    r = parse_iperf3(fixture_text(AREA, "client-refused.txt"))
    assert r.error == "iperf3: error - unable to connect to server: Connection refused"


@pytest.mark.parametrize(
    "text",
    ["", "{", "[]", '{"end": {"sum_sent": {"bits_per_second": -1}}}', "garbage"],
)
def test_odd_text_is_an_error(text):
    r = parse_iperf3(text)
    assert r.error is not None and not r.ok
