"""Every published `ibv_devinfo` / `ibstat` / `rdma link` sample parses to known content."""

from __future__ import annotations

import pytest

from pytest_hpcnet.probes import rdma, rdma_parsers
from tests.corpus import corpus_files

# file -> (source, {device: [(port, state, physical_state, active_mtu, link_layer, netdev)]},
#          no_devices, notices)
A, D = "ACTIVE", "DOWN"
EXPECTED = {
    "azure-cyclecloud-mlx5_an0-eth.txt": (
        "ibv_devinfo",
        {"mlx5_an0": [(1, A, None, 1024, "Ethernet", None)]},
        False,
        (),
    ),
    "azure-hbv-cx6vf-ib-plus-cx4lx-eth-2dev.txt": (
        "ibv_devinfo",
        {
            "mlx5_0": [(1, A, None, 4096, "InfiniBand", None)],
            "mlx5_1": [(1, A, None, 1024, "Ethernet", None)],
        },
        False,
        (),
    ),
    "cx3-vf-ib-failed-to-open-device-hustcat-8.txt": (
        "ibv_devinfo",
        {"mlx4_2": [(1, A, None, 4096, "InfiniBand", None)]},
        False,
        ("Failed to open device",),
    ),
    "erdma-h20-stepmesh-pr32-erdma_0-block.txt": (
        "ibv_devinfo",
        {"erdma_0": [(1, A, None, 4096, "Ethernet", None)]},
        False,
        (),
    ),
    "heioy-books-mlx4-2hca-port2-down.txt": (
        "ibv_devinfo",
        {
            "mlx4_1": [
                (1, A, None, 4096, "InfiniBand", None),
                (2, D, None, 4096, "InfiniBand", None),
            ],
            "mlx4_0": [
                (1, A, None, 4096, "InfiniBand", None),
                (2, D, None, 4096, "InfiniBand", None),
            ],
        },
        False,
        (),
    ),
    "k8s-sriov-cx5-ibstat-mlx5_0.txt": (
        "ibstat",
        {"mlx5_0": [(1, A, "LINK_UP", None, "Ethernet", None)]},
        False,
        (),
    ),
    "k8s-sriov-cx5-mofed44-ibv_devinfo-d-mlx5_0.txt": (
        "ibv_devinfo",
        {"mlx5_0": [(1, A, None, 1024, "Ethernet", None)]},
        False,
        (),
    ),
    "kaust-ibex-cx6-hdr100-ibstat.txt": (
        "ibstat",
        {"mlx5_0": [(1, A, "LINK_UP", None, "InfiniBand", None)]},
        False,
        (),
    ),
    "kaust-ibex-cx6-hdr100-ibv_devinfo.txt": (
        "ibv_devinfo",
        {"mlx5_0": [(1, A, None, 4096, "InfiniBand", None)]},
        False,
        (),
    ),
    "no-ib-devices-found-pib-2.txt": (
        "ibv_devinfo",
        {},
        True,
        (
            "libibverbs: Warning: no userspace device-specific driver found for "
            "/sys/class/infiniband_verbs/uverbs1",
            "libibverbs: Warning: no userspace device-specific driver found for "
            "/sys/class/infiniband_verbs/uverbs0",
            "No IB devices found",
        ),
    ),
    "rdma-link-ib-mlx5_7-active-rccl-1423.txt": (
        "rdma link",
        {"mlx5_7": [(1, A, "LINK_UP", None, None, None)]},
        False,
        (),
    ),
    "rdma-link-ib-mlx5_7-down-polling-rccl-1423.txt": (
        "rdma link",
        {"mlx5_7": [(1, D, "POLLING", None, None, None)]},
        False,
        (),
    ),
    "rdma-link-old-format-i40iw-mlx5.txt": (
        "rdma link",
        {
            "i40iw0": [(1, D, "NOP", None, None, None)],
            "i40iw1": [(1, A, "NOP", None, None, None)],
            "mlx5_0": [(1, D, "DISABLED", None, None, "ens803f0")],
            "mlx5_1": [(1, A, "LINK_UP", None, None, "ens803f1")],
        },
        False,
        (),
    ),
    "rdma-link-show-rxe-3fs-263.txt": (
        "rdma link",
        {"rxe_0": [(1, A, "LINK_UP", None, None, "p1p1")]},
        False,
        (),
    ),
}

# device-level facts for some files: (device, transport, fw_ver, node_guid, vendor_id,
# vendor_part_id, phys_port_cnt)
DEVICE_FACTS = {
    "erdma-h20-stepmesh-pr32-erdma_0-block.txt": (
        "erdma_0",
        "eRDMA (0)",
        "0.2.0",
        "0216:3eff:fe2f:3775",
        "0x1ded",
        "4223",
        1,
    ),
    "cx3-vf-ib-failed-to-open-device-hustcat-8.txt": (
        "mlx4_2",
        "InfiniBand (0)",
        "2.40.7000",
        "0014:0500:8cc6:cd0a",
        "0x02c9",
        "4100",
        1,
    ),
    "kaust-ibex-cx6-hdr100-ibstat.txt": (
        "mlx5_0",
        None,
        "20.35.1012",
        "b859:9f03:0022:626e",
        None,
        None,
        1,
    ),
    "heioy-books-mlx4-2hca-port2-down.txt": (
        "mlx4_0",
        "InfiniBand (0)",
        "2.42.5000",
        "e41d:2d03:00e0:c740",
        "0x02c9",
        "4099",
        2,
    ),
}


def _shape(result: rdma.RdmaDevices) -> dict:
    return {
        d.name: [
            (p.number, p.state, p.physical_state, p.active_mtu, p.link_layer, p.netdev)
            for p in d.ports
        ]
        for d in result.devices
    }


def test_every_sample_has_an_expectation():
    names = {p.name for p in corpus_files("ibv_devinfo")}
    assert names, "corpus missing: tests/fixtures/samples"
    assert names == set(EXPECTED)


@pytest.mark.parametrize("path", corpus_files("ibv_devinfo"), ids=lambda p: p.name)
def test_sample(path):
    source, devices, no_devices, notices = EXPECTED[path.name]
    result = rdma_parsers.parse_rdma_output(path.read_text())
    assert result.source == source
    assert _shape(result) == devices
    assert list(result.names()) == list(devices)  # output order kept
    assert result.no_devices is no_devices
    assert result.notices == notices
    assert result.problems == ()
    assert not result.tool_missing


@pytest.mark.parametrize("name", sorted(DEVICE_FACTS), ids=lambda n: n)
def test_device_facts(name):
    files = {p.name: p for p in corpus_files("ibv_devinfo")}
    assert name in files, f"{name}: not in the corpus"
    dev_name, transport, fw, guid, vendor, part, count = DEVICE_FACTS[name]
    dev = rdma_parsers.parse_rdma_output(files[name].read_text()).device(dev_name)
    assert dev is not None
    assert (
        dev.transport,
        dev.fw_ver,
        dev.node_guid,
        dev.vendor_id,
        dev.vendor_part_id,
        dev.phys_port_cnt,
    ) == (transport, fw, guid, vendor, part, count)


def test_erdma_sample_is_selected_by_default_glob_and_vendor():
    files = {p.name: p for p in corpus_files("ibv_devinfo")}
    assert files, "corpus missing: tests/fixtures/samples"
    erdma = rdma_parsers.parse_ibv_devinfo(
        files["erdma-h20-stepmesh-pr32-erdma_0-block.txt"].read_text()
    )
    assert [d.name for d in rdma.match_devices(erdma)] == ["erdma_0"]
    assert rdma.is_erdma(erdma.devices[0])
    mlx = rdma_parsers.parse_ibv_devinfo(files["kaust-ibex-cx6-hdr100-ibv_devinfo.txt"].read_text())
    assert rdma.match_devices(mlx) == () and not rdma.is_erdma(mlx.devices[0])


def test_ibstat_and_ibv_devinfo_of_same_host_agree():
    files = {p.name: p for p in corpus_files("ibv_devinfo")}
    assert files, "corpus missing: tests/fixtures/samples"
    for ibv_name, ibstat_name in (
        ("kaust-ibex-cx6-hdr100-ibv_devinfo.txt", "kaust-ibex-cx6-hdr100-ibstat.txt"),
        ("k8s-sriov-cx5-mofed44-ibv_devinfo-d-mlx5_0.txt", "k8s-sriov-cx5-ibstat-mlx5_0.txt"),
    ):
        ibv = rdma_parsers.parse_ibv_devinfo(files[ibv_name].read_text())
        ibstat = rdma_parsers.parse_ibstat(files[ibstat_name].read_text())
        assert rdma.compare_sources(ibv, ibstat) == ()
        assert ibv.devices[0].node_guid == ibstat.devices[0].node_guid


def test_rdma_link_active_vs_down_samples_disagree():
    files = {p.name: p for p in corpus_files("ibv_devinfo")}
    assert files, "corpus missing: tests/fixtures/samples"
    up = rdma_parsers.parse_rdma_link(files["rdma-link-ib-mlx5_7-active-rccl-1423.txt"].read_text())
    down = rdma_parsers.parse_rdma_link(
        files["rdma-link-ib-mlx5_7-down-polling-rccl-1423.txt"].read_text()
    )
    assert rdma.compare_sources(up, down) == (
        "rdma link shows mlx5_7 port 1 ACTIVE, rdma link shows DOWN",
        "rdma link shows mlx5_7 port 1 physical state LINK_UP, rdma link shows POLLING",
    )
