"""iperf3 parser against the published corpus (JSON and text, 3.1 .. 3.16)."""

from __future__ import annotations

import pytest

from tests.corpus import corpus_files
from tests.iperf3 import parse_iperf3

# file -> (protocol, sent Gb/s, received Gb/s, retransmits, lost %, error)
SAMPLES = {
    "cloudpilot-iperf3.6-tcp-bytes-interrupt-error.json": (
        "TCP", 0.16028723232821623, None, 0, None, "interrupt - the client has terminated"),
    "cloudpilot-iperf3.9-tcp-aws-to-ibm.json": (
        "TCP", 0.134218157498104, 0.13417809736498312, 900, None, None),
    "iperf3.1.3-udp-json-lost-packets.json": ("UDP", 0.834711189017002, None, None, 0.690276, None),
    "iperf3.16-macos-json-error-control-socket.json": (
        None, None, None, None, None, "control socket has closed unexpectedly"),
    "macos-iperf3.1.3-bandwidth-header-client.txt": ("TCP", 0.00803, 0.00789, None, None, None),
    "netfpga-sume-corundum-10g-client-reverse.txt": ("TCP", 9.32, 9.32, 1, None, None),
    "netfpga-sume-corundum-10g-client.txt": ("TCP", 9.40, 9.40, 0, None, None),
}  # fmt: skip


def _approx(value):
    return None if value is None else pytest.approx(value)


@pytest.mark.parametrize("path", corpus_files("iperf3"), ids=lambda p: p.name)
def test_iperf3_sample(path):
    assert path.name in SAMPLES, f"no expectation for new sample {path.name}"
    protocol, sent, received, retr, lost, error = SAMPLES[path.name]
    r = parse_iperf3(path.read_text())
    assert r.protocol == protocol
    assert r.sent_gbps == _approx(sent)
    assert r.received_gbps == _approx(received)
    assert r.retransmits == retr
    assert r.lost_percent == _approx(lost)
    assert r.error == error
