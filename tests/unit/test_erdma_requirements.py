"""eRDMA-in-depth requirement judges (requirements/erdma.py): one Verdict per node that
names the failing node and device, read from `expect.*` only, failing closed."""

from __future__ import annotations

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.erdma import parse_erdma_driver, parse_erdma_identity, parse_gid_tables
from pytest_hpcnet.probes.eri_address import EriAddress
from pytest_hpcnet.probes.rdma_parsers import parse_ibv_devinfo
from pytest_hpcnet.requirements.erdma import (
    judge_erdma_active_mtu,
    judge_erdma_driver,
    judge_erdma_gid,
    judge_erdma_identity,
    judge_erdma_numa,
    judge_eri_bw,
    judge_eri_nic_indexes,
    judge_instance_bw,
)

TWO = (
    "dev=erdma_0 driver=erdma vendor=0x1ded device=0x107f numa=0 netdev=eth0\n"
    "dev=erdma_1 driver=erdma vendor=0x1ded device=0x107f numa=1 netdev=eth1\n"
)
DRIVER = "module=loaded\nversion=0.2.37\ncompat_mode=Y\ncc:erdma_0=mpcc\ncc:erdma_1=cubic\n"


def expect(**erdma) -> Expectations:
    return Expectations(erdma=erdma)


def test_identity_counts_erdma_devices_not_names():
    renamed = TWO.replace("dev=erdma_1", "dev=rocep26s0")
    assert judge_erdma_identity("node07", parse_erdma_identity(renamed), expect(eris=2))
    one = parse_erdma_identity(TWO.splitlines()[0] + "\ndev=mlx5_0 driver=mlx5_core\n")
    got = judge_erdma_identity("node07", one, expect(eris=2))
    assert not got and got.reason.startswith("node07: 1 eRDMA devices (erdma_0), 2 expected")
    # no count in the profile: at least the RDMA minimum
    assert not judge_erdma_identity("node07", one, Expectations(rdma={"min_devices": 2}))
    cut = judge_erdma_identity("node07", parse_erdma_identity(""), expect(eris=2))
    assert not cut and "cut short" in cut.reason


def test_driver_compat_mode_and_cc_only_when_expected():
    driver = parse_erdma_driver(DRIVER)
    assert judge_erdma_driver("n1", driver, expect(compat_mode=True))  # cc not judged
    got = judge_erdma_driver("n1", driver, expect(compat_mode=True, cc="mpcc"))
    assert not got and got.reason == "n1: erdma_1 congestion control is cubic, mpcc expected"
    got = judge_erdma_driver("n1", driver, expect(compat_mode=False))
    assert not got and "compat_mode is Y, N expected" in got.reason
    no_eadm = parse_erdma_driver("module=loaded\nversion=1\ncompat_mode=Y\ncc:erdma_0!eadm gone")
    got = judge_erdma_driver("n1", no_eadm, expect(cc="mpcc"))
    assert not got and "not readable: eadm gone" in got.reason
    assert not judge_erdma_driver("n1", parse_erdma_driver("module=absent\n"), expect())


def _devinfo(mtus: dict[str, int]) -> str:
    out = []
    for dev, mtu in mtus.items():
        out += [f"hca_id:\t{dev}", "\ttransport:\t\t\teRDMA (0)", "\t\tport:\t1"]
        out += ["\t\t\tstate:\t\t\tPORT_ACTIVE (4)", f"\t\t\tactive_mtu:\t\t{mtu} (5)"]
        out += ["\t\t\tlink_layer:\t\tEthernet", ""]
    return "\n".join(out)


def test_active_mtu_follows_the_netdev_mtu():
    text = _devinfo({"erdma_0": 4096, "erdma_1": 1024})
    devinfo = parse_ibv_devinfo(text)
    port = devinfo.device("erdma_0").port(1)
    netdev = {"erdma_0": "eth0", "erdma_1": "eth1"}
    assert port.active_mtu == 4096
    eris = ["erdma_0", "erdma_1"]
    assert judge_erdma_active_mtu("n3", devinfo, eris, netdev, {"eth0": 8500, "eth1": 1400})
    got = judge_erdma_active_mtu("n3", devinfo, eris, netdev, {"eth0": 8500, "eth1": 8500})
    assert not got
    assert got.reason == "n3 erdma_1: active_mtu 1024, 4096 expected for eth1 MTU 8500"
    assert not judge_erdma_active_mtu(
        "n3", devinfo, ["erdma_0"], {}, {"eth0": 8500}
    )  # MTU unknown: fail


def _gids(device: str, gids: list[str]) -> str:
    lines = [f"hca_id:\t{device}", "\t\tport:\t1"]
    lines += [f"\t\t\tGID[{i:3d}]:\t\t{g}" for i, g in enumerate(gids)]
    return "\n".join(lines) + "\n\n"


def test_gid_index_used_must_be_the_ipv4_one_per_device():
    text = _gids("erdma_0", ["fe80::216:3eff:fe00:1", "::ffff:198.18.0.11"]) + _gids(
        "erdma_1", ["fe80::216:3eff:fe00:1", "2001:db8::1", "::ffff:198.18.0.11"]
    )
    tables = parse_gid_tables(text)
    eris = ["erdma_0", "erdma_1"]
    own = {d: EriAddress(d, "eth0", "198.18.0.11", "rdma link") for d in eris}
    assert judge_erdma_gid("n2", tables, eris, {"erdma_0": 1, "erdma_1": 2}, own)
    got = judge_erdma_gid("n2", tables, eris, {"erdma_0": 1, "erdma_1": 1}, own)
    assert not got and got.reason.startswith("n2 erdma_1: GID index 1 is 2001:db8::1")


def test_numa_only_where_the_profile_says():
    ids = parse_erdma_identity(TWO)
    assert judge_erdma_numa("n5", ids, expect(numa={"erdma_0": 0, "erdma_1": 1}))
    got = judge_erdma_numa("n5", ids, expect(numa={"erdma_0": 0, "erdma_1": 0}))
    assert not got and got.reason == "n5 erdma_1: NUMA node 1, 0 expected"


def test_eri_and_instance_bandwidth_against_the_profile_figures():
    e = expect(per_eri_gbps=80, per_instance_gbps=160, bw_fraction=0.8)
    assert judge_eri_bw("n1<->n2", "erdma_1", 70.0, None, e)
    low = judge_eri_bw("n1<->n2", "erdma_1", 60.0, None, e)
    assert not low and low.reason == "n1<->n2 erdma_1: 60.00 Gbit/s < 64.00 (80% of 80 per ERI)"
    assert not judge_eri_bw("n1<->n2", "erdma_1", None, "IB device erdma_1 not found", e)
    both = ["erdma_0", "erdma_1"]
    assert judge_instance_bw("n1", {"erdma_0": 70.0, "erdma_1": 70.0}, both, e)
    assert not judge_instance_bw("n1", {"erdma_0": 70.0, "erdma_1": None}, both, e)
    # ebmgn7ex: both ERIs on one NIC index -> 100, not 160
    e7 = expect(per_eri_gbps=80, per_instance_gbps=160, same_nic_index_gbps=100, bw_fraction=0.8)
    got = judge_instance_bw("n1", {"erdma_0": 45.0, "erdma_1": 45.0}, both, e7, [0, 0])
    assert got and got.bound == 80.0
    assert not judge_instance_bw("n1", {"erdma_0": 45.0, "erdma_1": 45.0}, both, e, [0, 0])
    assert not judge_instance_bw("n1", {"erdma_0": 1.0, "erdma_1": 1.0}, both, expect())


def test_instance_bw_with_unknown_nic_indexes_is_judged_against_the_rated_figure():
    """Fail-closed: 100 Gbit/s on an ebmgn7ex (rated 160) does not pass because the NIC
    indexes were not read; the failure says the one-index cap may explain it."""
    e7 = expect(per_eri_gbps=80, per_instance_gbps=160, same_nic_index_gbps=100, bw_fraction=0.8)
    both = ["erdma_0", "erdma_1"]
    got = judge_instance_bw("n1", {"erdma_0": 50.0, "erdma_1": 50.0}, both, e7)
    assert not got and got.bound == 128.0
    assert "one-NIC-index cap (100 Gbit/s, source S1) may explain it" in got.reason
    assert "the cloud audit was not in scope to tell" in got.reason
    assert judge_instance_bw("n1", {"erdma_0": 70.0, "erdma_1": 70.0}, both, e7)
    # known distinct indexes: the rated figure, no hint
    got = judge_instance_bw("n1", {"erdma_0": 50.0, "erdma_1": 50.0}, both, e7, [0, 1])
    assert not got and "may explain" not in got.reason
    # no published cap for the family: no hint either
    e8 = expect(per_eri_gbps=80, per_instance_gbps=160, bw_fraction=0.8)
    assert (
        "may explain"
        not in judge_instance_bw("n1", {"erdma_0": 1.0, "erdma_1": 1.0}, both, e8).reason
    )


def test_eri_nic_indexes_judge():
    e7 = expect(eris=2, per_instance_gbps=160, same_nic_index_gbps=100)
    assert judge_eri_nic_indexes("node01", [("eni-a", 0), ("eni-b", 1)], e7)
    shared = judge_eri_nic_indexes("node02", [("eni-c", 0), ("eni-d", 0)], e7)
    assert not shared and shared.measured == 1 and shared.bound == 2
    assert shared.reason == (
        "node02: ERIs eni-c, eni-d share NIC index 0: the instance is capped at 100 Gbit/s "
        "instead of 160 (source S1); attach one with another NetworkCardIndex "
        "(AttachNetworkInterface)"
    )
    few = judge_eri_nic_indexes("node03", [("eni-e", 0)], e7)
    assert not few and few.reason.startswith("node03: 1 ERI (eni-e), expect.erdma.eris 2")
    assert "NetworkInterfaceTrafficMode=HighPerformance" in few.reason
    unknown = judge_eri_nic_indexes("node04", [("eni-f", 0), ("eni-g", None)], e7)
    assert not unknown and "eni-g: NetworkCardIndex not reported" in unknown.reason
    # no one-index rule published for the family: the count alone
    e8 = expect(eris=2, per_instance_gbps=160)
    assert judge_eri_nic_indexes("node02", [("eni-c", 0), ("eni-d", 0)], e8)
    assert not judge_eri_nic_indexes("node02", [], e8)
