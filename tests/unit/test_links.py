"""Unit tests of the interface parsers and MTU / counter decisions."""

from __future__ import annotations

import subprocess

import pytest

from pytest_hpcnet.probes import links
from pytest_hpcnet.requirements import mtu as mtu_judges


def test_json_link_with_stats(fixture_text):
    result = links.parse_interfaces(fixture_text("links", "ip-j-s-link.json"))
    assert result.names() == ("lo", "eth0", "veth0", "ib0.8002")
    assert result.problems == ()
    eth0 = result.get("eth0")
    assert (eth0.mtu, eth0.operstate, eth0.is_up) == (8500, "UP", True)
    assert eth0.stats == links.InterfaceStats(
        rx_bytes=98765432,
        rx_packets=123456,
        rx_errors=0,
        rx_dropped=17,
        tx_bytes=87654321,
        tx_packets=120000,
        tx_errors=3,
        tx_dropped=0,
    )
    assert result.get("veth0").parent == "if5"
    ib = result.get("ib0.8002")
    assert (ib.parent, ib.mtu, ib.is_up, ib.stats) == ("ib0", 2044, False, None)


def test_text_stats_new_and_old_layout(fixture_text):
    result = links.parse_interfaces(fixture_text("links", "ip-s-link-text.txt"))
    assert result.names() == ("lo", "eth0")
    lo = result.get("lo")
    # the "RX errors: length crc ..." detail rows must not overwrite errors/dropped
    assert (lo.stats.rx_bytes, lo.stats.rx_errors, lo.stats.tx_packets) == (3193, 0, 29)
    eth0 = result.get("eth0")
    assert (eth0.parent, eth0.mtu) == ("if5", 1500)
    assert (eth0.stats.rx_errors, eth0.stats.rx_dropped) == (2, 9)
    assert (eth0.stats.tx_errors, eth0.stats.tx_dropped) == (0, 1)


def test_json_after_warning_with_crlf(fixture_text):
    result = links.parse_interfaces(fixture_text("links", "ip-j-addr-warning-crlf.txt"))
    eth1 = result.get("eth1")
    assert eth1.mtu == 1400
    assert eth1.ipv4() == ("192.168.10.5",)
    assert result.by_address("192.168.10.5") is eth1
    assert any("text before JSON" in p for p in result.problems)


@pytest.mark.parametrize(
    "text",
    ["", "garbage\n", "[{broken json", "[]", '[{"noname":1}]', "hpcnet: ip not found"],
)
def test_odd_text_never_raises(text):
    result = links.parse_interfaces(text)
    assert result.interfaces == ()
    assert result.problems


def test_tool_missing():
    assert links.parse_interfaces("hpcnet: ip not found\n").tool_missing


def test_tab_separated_text():
    text = "2: eth0:\t<BROADCAST,UP,LOWER_UP>\tmtu\t9000\tqdisc mq state UP\n"
    iface = links.parse_interfaces(text).get("eth0")
    assert iface is not None and iface.mtu == 9000


def test_mtu_matches():
    iface = links.Interface(name="eth0", mtu=8500)
    assert mtu_judges.mtu_matches(8500, iface)
    verdict = mtu_judges.mtu_matches(1400, iface)
    assert not verdict
    assert verdict.reason == "eth0: MTU 8500, expected 1400"
    assert not mtu_judges.mtu_matches(1500, links.Interface(name="x"))


@pytest.mark.parametrize(
    ("mtu", "jumbo", "ok", "words"),
    [
        (8500, True, True, "8500"),
        (9000, True, False, "requires 8500"),
        (1500, True, False, "requires 8500"),
        (1400, False, True, "1400"),
        (1200, False, True, "1200"),
        (1500, False, False, "data-consistency risk"),
        (9000, False, False, "at most 1400"),
        (None, False, False, "unknown"),
    ],
)
def test_erdma_mtu_rule(mtu, jumbo, ok, words):
    verdict = mtu_judges.erdma_mtu_verdict(mtu, jumbo)
    assert verdict.ok is ok
    assert words in verdict.reason


def test_commands():
    assert links.ip_link_command("eth0; reboot").count("'eth0; reboot'") == 1
    assert "ip -j -s link show" in links.ip_link_command()
    assert "ip -j addr show dev eth1" in links.ip_addr_command("eth1")


def test_commands_run_here():
    out = subprocess.run(
        ["sh", "-c", links.ip_link_command()], capture_output=True, text=True, check=False
    ).stdout
    result = links.parse_interfaces(out)
    assert result.tool_missing or result.get("lo") is not None
    if not result.tool_missing:
        assert result.get("lo").stats is not None
