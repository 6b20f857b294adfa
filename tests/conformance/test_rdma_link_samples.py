"""Every published `rdma link` sample (the `rdma_link/` folder) parses to known content."""

from __future__ import annotations

import pytest

from pytest_hpcnet.probes import rdma, rdma_parsers
from tests.corpus import corpus_files

# file -> [(device, port, state, physical_state, netdev)] in output order
EXPECTED = {
    "gb10-cx7-2active-2down.txt": [
        ("rocep1s0f0", 1, "ACTIVE", "LINK_UP", "enp1s0f0np0"),
        ("rocep1s0f1", 1, "DOWN", "DISABLED", "enp1s0f1np1"),
        ("roceP2p1s0f0", 1, "ACTIVE", "LINK_UP", "enP2p1s0f0np0"),
        ("roceP2p1s0f1", 1, "DOWN", "DISABLED", "enP2p1s0f1np1"),
    ],
    "gx10-cx7-4active.txt": [
        ("rocep1s0f0", 1, "ACTIVE", "LINK_UP", "enp1s0f0np0"),
        ("rocep1s0f1", 1, "ACTIVE", "LINK_UP", "enp1s0f1np1"),
        ("roceP2p1s0f0", 1, "ACTIVE", "LINK_UP", "enP2p1s0f0np0"),
        ("roceP2p1s0f1", 1, "ACTIVE", "LINK_UP", "enP2p1s0f1np1"),
    ],
}


def test_every_sample_has_an_expectation():
    names = {p.name for p in corpus_files("rdma_link")}
    assert names, "corpus missing: tests/fixtures/samples"
    assert names == set(EXPECTED)


@pytest.mark.parametrize("path", corpus_files("rdma_link"), ids=lambda p: p.name)
def test_sample(path):
    result = rdma_parsers.parse_rdma_output(path.read_text())
    assert result.source == "rdma link"
    got = [
        (d.name, p.number, p.state, p.physical_state, p.netdev)
        for d in result.devices
        for p in d.ports
    ]
    assert got == EXPECTED[path.name]
    assert result.problems == () and result.notices == ()
    assert rdma.match_devices(result, "roce*") == result.devices
    assert rdma.match_devices(result) == ()
