"""Every published `ip link` / `ip addr` / `ping` sample parses to known content."""

from __future__ import annotations

import pytest

from pytest_hpcnet.probes import links, ping
from pytest_hpcnet.requirements import mtu
from tests.corpus import corpus_files

# interfaces: file -> [(name, parent, mtu, operstate, ipv4 addresses)]
INTERFACES = {
    "ip-addr-centos7-two-eni-mtu9001-aws.txt": [
        ("lo", None, 65536, "UNKNOWN", ("127.0.0.1",)),
        ("eth0", None, 9001, "UP", ("172.31.3.229",)),
        ("eth1", None, 9001, "UP", ("172.31.2.113",)),
    ],
    "ip-addr-ipoib-pkey-mtu4092-weka-docs.txt": [
        ("ib1.8002", "ib0", 4092, "UP", ("192.168.1.1",)),
    ],
    "ip-j-addr-show-vyos-virtualbox-4eth.json": [
        ("lo", None, 65536, "UNKNOWN", ("127.0.0.1",)),
        ("eth0", None, 1500, "UP", ("10.0.2.15",)),
        ("eth1", None, 1500, "UP", ()),
        ("eth2", None, 1500, "UP", ()),
        ("eth3", None, 1500, "UP", ()),
    ],
    "ip-link-show-eth0-mtu1500-aws-ec2-after-change.txt": [
        ("eth0", None, 1500, "UP", ()),
    ],
    "ip-link-show-eth0-mtu9001-aws-ec2.txt": [
        ("eth0", None, 9001, "UP", ()),
    ],
}

# MACs of selected interfaces, to check the link/ line is read
MACS = {
    "ip-link-show-eth0-mtu9001-aws-ec2.txt": ("eth0", "02:a7:8b:7c:d5:8a"),
    "ip-addr-centos7-two-eni-mtu9001-aws.txt": ("eth1", "02:47:82:a5:13:52"),
    "ip-j-addr-show-vyos-virtualbox-4eth.json": ("eth3", "08:00:27:f0:17:c5"),
}

# ping: file -> (packet size, transmitted, received, errors, remote mtu, local mtu,
#                rtt (min, avg, max) or None, has_statistics, path_mtu_ok, reason fragment)
PINGS = {
    "ping-1500-frag-needed-then-local-error-capital-M.txt": (
        1528,
        None,
        0,
        4,
        1500,
        1500,
        None,
        False,
        False,
        "path MTU 1500",
    ),
    "ping-8992-local-error-mtu1500-with-stats.txt": (
        9020,
        4,
        0,
        4,
        None,
        1500,
        None,
        True,
        False,
        "local interface MTU is 1500",
    ),
    "ping-df-1472-success-no-summary.txt": (
        1500,
        None,
        2,
        0,
        None,
        None,
        (0.603, 0.639, 0.675),
        False,
        False,  # published without its statistics: a cut-short run, not a pass
        "no statistics block",
    ),
    "ping-df-frag-needed-mtu1000-router.txt": (
        1428,
        None,
        0,
        5,
        1000,
        1000,
        None,
        False,
        False,
        "path MTU 1000",
    ),
    "ping-jumbo-8972-success-weka-docs.txt": (
        9000,
        3,
        3,
        0,
        None,
        None,
        (0.063, 0.075, 0.087),
        True,
        True,
        "3 replies at MTU 9000",
    ),
}


def test_every_sample_has_an_expectation():
    names = {p.name for p in corpus_files("ip_link_ping")}
    assert names, "corpus missing: tests/fixtures/samples"
    assert names == set(INTERFACES) | set(PINGS)


@pytest.mark.parametrize(
    "path",
    [p for p in corpus_files("ip_link_ping") if not p.name.startswith("ping")],
    ids=lambda p: p.name,
)
def test_interface_sample(path):
    result = links.parse_interfaces(path.read_text())
    got = [(i.name, i.parent, i.mtu, i.operstate, i.ipv4()) for i in result.interfaces]
    assert got == INTERFACES[path.name]
    assert result.problems == () and not result.tool_missing
    assert all(i.is_up for i in result.interfaces)
    if path.name in MACS:
        name, mac = MACS[path.name]
        assert result.get(name).mac == mac


@pytest.mark.parametrize(
    "path",
    [p for p in corpus_files("ip_link_ping") if p.name.startswith("ping")],
    ids=lambda p: p.name,
)
def test_ping_sample(path):
    (packet, tx, rx, errors, remote, local, rtt, stats, ok, fragment) = PINGS[path.name]
    r = ping.parse_ping(path.read_text())
    assert r.packet_size == packet
    assert (r.transmitted, r.received, r.errors) == (tx, rx, errors)
    assert (r.remote_mtu, r.local_mtu) == (remote, local)
    if rtt is None:
        assert r.rtt_avg_ms is None
    else:
        assert (r.rtt_min_ms, r.rtt_avg_ms, r.rtt_max_ms) == pytest.approx(rtt, abs=5e-4)
    assert r.has_statistics is stats
    assert r.problems == () and r.error is None
    verdict = mtu.path_mtu_ok(r)
    assert verdict.ok is ok
    assert fragment in verdict.reason


def test_mtu_rules_on_samples():
    files = {p.name: p for p in corpus_files("ip_link_ping")}
    assert files, "corpus missing: tests/fixtures/samples"
    eth0_1500 = links.parse_interfaces(
        files["ip-link-show-eth0-mtu1500-aws-ec2-after-change.txt"].read_text()
    ).get("eth0")
    eth0_9001 = links.parse_interfaces(
        files["ip-link-show-eth0-mtu9001-aws-ec2.txt"].read_text()
    ).get("eth0")
    assert mtu.mtu_matches(9001, eth0_9001) and not mtu.mtu_matches(9001, eth0_1500)
    assert "data-consistency risk" in mtu.erdma_mtu_verdict(eth0_1500.mtu, False).reason
    assert not mtu.erdma_mtu_verdict(eth0_9001.mtu, True)
