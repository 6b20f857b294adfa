"""Pure eRDMA judges (requirements/erdma_judges.py): each names exactly the node and device."""

from __future__ import annotations

from pytest_hpcnet.probes.counters import counter_delta, parse_rdma_counters
from pytest_hpcnet.probes.erdma import parse_gid_tables
from pytest_hpcnet.probes.nccl_debug import parse_nccl_debug
from pytest_hpcnet.requirements.erdma_judges import (
    instance_figure,
    judge_counters,
    judge_gid_index,
    judge_instance_bandwidth,
    judge_nccl_transport,
    judge_rdma_traffic,
)


def test_instance_figure_ebmgn7ex_same_nic_index():
    assert instance_figure(160, [0, 1], 100) == (160, "160 per instance")
    assert instance_figure(160, [0, 0], 100) == (100, "100 (all ERIs on NIC index 0)")
    # unknown indexes: the rated figure (judging against the cap would pass a capped node)
    assert instance_figure(160, None, 100) == (160, "160 per instance (NIC indexes unknown)")
    assert instance_figure(360, [0, 0]) == (360, "360 per instance")  # no rule for the family


def test_instance_aggregate():
    got = judge_instance_bandwidth(
        "node02", {"erdma_0": 76.0, "erdma_1": 60.0}, ["erdma_0", "erdma_1"], 160, 0.9
    )
    assert not got.ok and " " not in got.subject  # the node, no device
    assert got.reason.startswith("node02: erdma_0 76.0 + erdma_1 60.0 = 136.0 Gbit/s, below 144")
    assert judge_instance_bandwidth(
        "n", {"erdma_0": 76.0, "erdma_1": 76.0}, ["erdma_0", "erdma_1"], 160, 0.9
    ).ok
    gone = judge_instance_bandwidth("n", {"erdma_0": 150.0}, ["erdma_0", "erdma_1"], 160, 0.9)
    assert not gone.ok and gone.reason == "n: no concurrent result from erdma_1"


def test_nccl_transport_socket_fallback_names_the_node(fixture_text):
    log = parse_nccl_debug(fixture_text("nccl_debug", "derived-h200-2node-one-socket.txt"))
    found = judge_nccl_transport(log, ["gpu-a", "gpu-b", "gpu-c"], device_glob="erdma*")
    assert [f.ok for f in found] == [True, False, False]
    assert found[1].reason == "gpu-b: NCCL used Socket (NET/IB : No device found), IB expected"
    assert found[2].reason == "gpu-c: transport unknown: no NCCL INFO line from this node"


def test_nccl_devices_and_gdr(fixture_text):
    log = parse_nccl_debug(fixture_text("nccl_debug", "derived-h200-2node-ib-gdrdma-rocep.txt"))
    assert all(f.ok for f in judge_nccl_transport(log, ["gpu-a", "gpu-b"], expect_gdr=True))
    wrong = judge_nccl_transport(log, ["gpu-a"], device_glob="erdma*")[0]
    assert wrong.reason == "gpu-a: NCCL used rocep26s0, erdma* expected"
    off = parse_nccl_debug(fixture_text("nccl_debug", "derived-h200-2node-ib-erdma.txt"))
    assert judge_nccl_transport(off, ["gpu-a"], expect_gdr=True)[0].reason == (
        "gpu-a: GPUDirect RDMA off, expected on"
    )
    assert judge_nccl_transport(off, ["gpu-a"])[0].ok  # GDR not expected: off is said, not failed


def test_gid_index_shifted():
    tables = parse_gid_tables(
        "hca_id:\terdma_1\n\t\tport:\t1\n\t\t\tGID[  0]:\t\tfe80::1, RoCE v2\n"
        "\t\t\tGID[  1]:\t\t2001:db8::5, RoCE v2\n\t\t\tGID[  2]:\t\t::ffff:10.0.0.5, RoCE v2\n"
    )
    bad = judge_gid_index("node03", "erdma_1", tables, used=1)
    assert not bad.ok and bad.reason == (
        "node03 erdma_1: GID index 1 is 2001:db8::5; the IPv4 GID 10.0.0.5 is at index 2"
    )
    assert judge_gid_index("node03", "erdma_1", tables, used=2).ok
    assert judge_gid_index("node03", "erdma_1", tables, used=None).ok


def test_counters_delta_judged():
    before = parse_rdma_counters(
        "link erdma_0/1 hw_tx_bytes_cnt 0 hw_rx_bytes_cnt 0 hw_bps_limit_drop_cnt 0\n"
        "link erdma_1/1 hw_tx_bytes_cnt 0 hw_rx_bytes_cnt 0 hw_bps_limit_drop_cnt 5\n"
    )
    after = parse_rdma_counters(
        "link erdma_0/1 hw_tx_bytes_cnt 900 hw_rx_bytes_cnt 100 hw_bps_limit_drop_cnt 0\n"
        "link erdma_1/1 hw_tx_bytes_cnt 0 hw_rx_bytes_cnt 0 hw_bps_limit_drop_cnt 17\n"
    )
    delta = counter_delta(before, after)
    found = judge_counters("node04", delta)
    assert [(f.subject, f.ok) for f in found] == [
        ("node04 erdma_0", True),
        ("node04 erdma_1", False),
    ]
    assert found[1].reason == "node04 erdma_1: hw_bps_limit_drop_cnt +12 (bound 0)"
    assert all(f.ok for f in judge_counters("node04", delta, {"hw_bps_limit_drop_cnt": 20}))
    traffic = judge_rdma_traffic("node04", delta, ["erdma_0", "erdma_1"], 1000)
    assert [f.ok for f in traffic] == [True, False]
    reset = counter_delta(after, before)
    assert "counter reset" in judge_counters("node04", reset)[1].reason
    assert not judge_counters("node04", counter_delta(parse_rdma_counters(""), before))[0].ok
