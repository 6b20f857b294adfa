"""RDMA/NIC counter snapshots and deltas (probes/counters.py)."""

from __future__ import annotations

import json
import subprocess

from pytest_hpcnet.probes.counters import (
    counter_delta,
    nic_snapshot,
    parse_rdma_counters,
    rdma_counters_command,
)
from pytest_hpcnet.probes.links import parse_ip_json

SYSFS = (
    "/sys/class/infiniband/erdma_0/ports/1/hw_counters/hw_tx_bytes_cnt 1000\n"
    "/sys/class/infiniband/erdma_0/ports/1/hw_counters/hw_bps_limit_drop_cnt 3\n"
    "/sys/class/infiniband/erdma_1/ports/1/hw_counters/hw_tx_bytes_cnt 50\n"
)


def test_sysfs_lines():
    s = parse_rdma_counters(SYSFS)
    assert s.source == "sysfs" and not s.problems
    assert s.values == {
        "erdma_0/1": {"hw_tx_bytes_cnt": 1000, "hw_bps_limit_drop_cnt": 3},
        "erdma_1/1": {"hw_tx_bytes_cnt": 50},
    }


def test_rdma_statistic_text_and_json():
    text = "link erdma_0/1 hw_tx_bytes_cnt 7 hw_rx_bytes_cnt 9 \nlink erdma_1/1 hw_tx_bytes_cnt\n"
    s = parse_rdma_counters(text)
    assert s.source == "rdma statistic" and s.values["erdma_0/1"] == {
        "hw_tx_bytes_cnt": 7,
        "hw_rx_bytes_cnt": 9,
    }
    assert s.problems == ("erdma_1/1: line cut short ('hw_tx_bytes_cnt')",)
    j = parse_rdma_counters(json.dumps([{"ifindex": 0, "ifname": "erdma_0", "port": 1, "x": 4}]))
    assert j.values == {"erdma_0/1": {"x": 4}}
    assert parse_rdma_counters('[{"ifname": "erdma_0", "po').problems[0].startswith("unparse")


def test_command_reads_sysfs_root(tmp_path):
    folder = tmp_path / "class/infiniband/erdma_0/ports/1/hw_counters"
    folder.mkdir(parents=True)
    (folder / "hw_rx_bytes_cnt").write_text("42\n")
    out = subprocess.run(
        ["sh", "-c", rdma_counters_command(str(tmp_path))], capture_output=True, text=True
    ).stdout
    assert parse_rdma_counters(out).values == {"erdma_0/1": {"hw_rx_bytes_cnt": 42}}


def test_delta_and_reset():
    before = parse_rdma_counters(SYSFS)
    after = parse_rdma_counters(
        SYSFS.replace(" 1000", " 5000").replace(" 3\n", " 1\n")
        + "/sys/class/infiniband/erdma_2/ports/1/hw_counters/hw_tx_bytes_cnt 9\n"
    )
    d = counter_delta(before, after)
    assert d.get("erdma_0/1", "hw_tx_bytes_cnt") == 4000
    assert d.get("erdma_1/1", "hw_tx_bytes_cnt") == 0
    assert d.get("erdma_0/1", "hw_bps_limit_drop_cnt") == 1
    assert d.resets == ("erdma_0/1 hw_bps_limit_drop_cnt went back from 3 to 1 (counter reset)",)
    assert d.missing == ("erdma_2/1 read after only",)


def test_nic_counters_from_ip_json():
    def link(rx_dropped: int) -> str:
        stats = {"rx": {"bytes": 10, "packets": 1, "errors": 0, "dropped": rx_dropped},
                 "tx": {"bytes": 20, "packets": 2, "errors": 0, "dropped": 0}}  # fmt: skip
        return json.dumps([{"ifindex": 2, "ifname": "eth0", "mtu": 8500, "stats64": stats}])

    d = counter_delta(nic_snapshot(parse_ip_json(link(1))), nic_snapshot(parse_ip_json(link(4))))
    assert d.get("eth0", "rx_dropped") == 3 and d.get("eth0", "tx_bytes") == 0
