"""Published `ibv_devinfo -v` outputs read as plain ones (tests/fixtures/rdma/PROVENANCE.md).

The facts script runs `ibv_devinfo -v` only, so every device check reads its devices from
`-v` output. rdma-core's `devinfo.c` prints the plain output's lines and adds: device
attributes after `phys_port_cnt` (flag lists on lines of their own, lines without a colon),
and per port, after `link_layer`, `max_msg_sz` .. `active_speed`, `phys_state` and the GID
table. None of that may change what the parser reads, nor land among the tool's notices;
`phys_state` is the one field `-v` adds to an `RdmaPort`.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from pytest_hpcnet.probes import rdma, rdma_parsers
from tests.corpus import sample

RDMA = Path(__file__).resolve().parents[1] / "fixtures" / "rdma"

A, D = "ACTIVE", "DOWN"
# file -> ({device: [(port, state, physical_state, active_mtu, link_layer)]},
#          (transport, fw_ver, node_guid, vendor_id, vendor_part_id, phys_port_cnt), problems)
EXPECTED = {
    "published-heioy-mlx4_1-i2-v.txt": (
        {"mlx4_1": [(2, D, "POLLING", 4096, "InfiniBand")]},
        ("InfiniBand (0)", "2.42.5000", "7cfe:9003:00a5:95c0", "0x02c9", "4099", 2),
        # `-i 2`: the tool shows port 2 of 2, as in the plain `-i 2` output of the same host
        ("ibv_devinfo: mlx4_1 reports 2 ports but lists 1",),
    ),
    "published-irdma1-e810-v.txt": (
        {"irdma1": [(1, A, "LINK_UP", 1024, "Ethernet")]},
        ("InfiniBand (0)", "1.54", "6efe:54ff:fe3d:8a39", "0x8086", "5522", 1),
        (),
    ),
    "published-cx6dx-rocep61s0f1-v.txt": (
        {"rocep61s0f1": [(1, A, "LINK_UP", 1024, "Ethernet")]},
        ("InfiniBand (0)", "22.36.1010", "c470:bd03:00aa:1fc9", "0x02c9", "4125", 1),
        (),
    ),
    "published-mofed-cx4lx-mlx5_3-v.txt": (
        {"mlx5_3": [(1, A, "LINK_UP", 1024, "Ethernet")]},
        ("InfiniBand (0)", "14.27.1016", "08c0:eb03:003b:353c", "0x02c9", "4117", 1),
        (),
    ),
    "published-rxe0-v.txt": (
        {"rxe0": [(1, A, "LINK_UP", 1024, "Ethernet")]},
        ("InfiniBand (0)", "0.0.0", "b208:75ff:fe5f:b85e", "0x0000", "0", 1),
        (),
    ),
}


def _read(name: str) -> str:
    return (RDMA / name).read_text()


def _shape(result: rdma.RdmaDevices) -> dict:
    return {
        d.name: [(p.number, p.state, p.physical_state, p.active_mtu, p.link_layer) for p in d.ports]
        for d in result.devices
    }


def _without_physical_state(result: rdma.RdmaDevices) -> rdma.RdmaDevices:
    """`result` as a plain output shows it: `-v` adds the physical state, nothing else."""
    devices = tuple(
        dataclasses.replace(
            d, ports=tuple(dataclasses.replace(p, physical_state=None) for p in d.ports)
        )
        for d in result.devices
    )
    return dataclasses.replace(result, devices=devices)


def plain_part(verbose: str) -> str:
    """The lines of an `ibv_devinfo -v` output that the plain call prints (devinfo.c: device
    lines up to `phys_port_cnt`, then per port its lines up to `link_layer`)."""
    kept: list[str] = []
    keep = True
    for line in verbose.splitlines():
        word = line.strip()
        if re.match(r"hca_id:|port:\s*\d+$", word):
            keep = True
        if keep:
            kept.append(line)
        if re.match(r"(phys_port_cnt|link_layer):", word):
            keep = False
    return "\n".join(kept) + "\n"


def test_every_published_verbose_output_has_an_expectation():
    names = {p.name for p in RDMA.glob("published-*-v.txt")}
    assert names == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=lambda n: n)
def test_verbose_sample(name):
    devices, facts, problems = EXPECTED[name]
    result = rdma_parsers.parse_ibv_devinfo(_read(name))
    assert result.source == "ibv_devinfo"
    assert _shape(result) == devices
    assert result.notices == ()  # flag lists and colon-less attribute lines are not notices
    assert result.problems == problems
    assert not result.tool_missing and not result.no_devices
    assert (result.incomplete is None) is (not problems)
    dev = result.devices[0]
    got = (dev.transport, dev.fw_ver, dev.node_guid, dev.vendor_id, dev.vendor_part_id)
    assert (*got, dev.phys_port_cnt) == facts


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=lambda n: n)
def test_verbose_output_reads_as_its_plain_part(name):
    text = _read(name)
    plain = rdma_parsers.parse_ibv_devinfo(plain_part(text))
    assert plain.devices and "max_mr_size" not in plain_part(text)
    assert _without_physical_state(rdma_parsers.parse_ibv_devinfo(text)) == plain


def test_verbose_and_plain_outputs_of_one_host_agree():
    # the same author's `ibv_devinfo -d mlx4_1 -i 2` and `... -i 2 -v`, one after the other
    plain = rdma_parsers.parse_ibv_devinfo(_read("published-heioy-mlx4_1-i2.txt"))
    verbose = rdma_parsers.parse_ibv_devinfo(_read("published-heioy-mlx4_1-i2-v.txt"))
    assert _without_physical_state(verbose) == plain
    assert rdma.compare_sources(plain, verbose) == ()
    assert verbose.incomplete == plain.incomplete is not None  # the same `-i 2` shape
    # and the corpus's `ibv_devinfo` of the same host (both devices, every port)
    whole = rdma_parsers.parse_ibv_devinfo(
        sample("ibv_devinfo", "heioy-books-mlx4-2hca-port2-down.txt").read_text()
    )
    dev = whole.device("mlx4_1")
    assert dataclasses.replace(dev, ports=()) == dataclasses.replace(
        _without_physical_state(verbose).device("mlx4_1"), ports=(), truncated=None
    )
    assert dev.port(2) == _without_physical_state(verbose).device("mlx4_1").port(2)
