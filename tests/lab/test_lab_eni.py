"""Two ERIs are two ENIs (issue 27), through the real suite on a 4-node lab with
`--eris 2`: erdma_1 sits on each node's secondary ENI eth1 (its own MAC, address in
198.18.1.0/24 and metadata entry). Healthy, every eRDMA and MTU check passes with each
ERI's GID, `-x` and perftest target from its own interface; a fault on node02's eth1
alone fails exactly node02's erdma_1 (or eth1) and leaves eth0's checks green.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pytest_hpcnet.lab import faults
from pytest_hpcnet.probes.erdma import parse_gid_tables
from pytest_hpcnet.probes.rdma import ibv_devinfo_command, rdma_link_command
from pytest_hpcnet.probes.rdma_parsers import parse_rdma_link
from pytest_hpcnet.transport.fanout import Transport
from tests.lab.test_static_suite import concerns, failing, run_static

pytestmark = pytest.mark.lab

NODE, DEV, IFACE = "node02", "erdma_1", "eth1"
STATIC = "erdma or mtu"
"""-k of the static eRDMA checks (suites/test_erdma.py) and the MTU ones (test_mtu.py)."""
BLOCKED = "tcp/18515-18600@eth1"
"""Every perftest port of the lab's rounds (port_base 18515), on eth1 only."""


def run(lab, tmp_path, marker, keywords, kind=None, arg=None):
    """The suite with `kind` injected on NODE (healed afterwards): (exit code, records)."""
    state_dir = Path(lab.state_dir)
    if kind:
        faults.inject(kind, NODE, arg, state_dir)
    try:
        return run_static(lab.inventory, tmp_path, "-k", keywords, marker=marker)
    finally:
        if kind:
            faults.heal(NODE, state_dir)


def messages(records):
    return [r["message"] for r in failing(records)]


def test_erdma_1_sits_on_eth1_with_its_own_address_gid_and_metadata(lab2, lab_inventory):
    shown = subprocess.run(
        ["ip", "-n", "hx-node02", "-j", "addr", "show", "eth1"], capture_output=True, text=True
    ).stdout
    (eth1,) = json.loads(shown)
    assert [a["local"] for a in eth1["addr_info"] if a["family"] == "inet"] == ["198.18.1.12"]
    assert eth1["address"] == "00:16:3e:18:01:0c" and eth1["mtu"] == 8500
    transport = Transport(lab_inventory)
    try:
        tables = parse_gid_tables(transport.run(NODE, ibv_devinfo_command(verbose=True), 30).stdout)
        links = parse_rdma_link(transport.run(NODE, rdma_link_command(), 30).stdout)
        macs = transport.run(
            NODE, "curl -s http://100.100.100.200/latest/meta-data/network/interfaces/macs/", 30
        ).stdout
        primary = transport.run(
            NODE,
            "curl -s http://100.100.100.200/latest/meta-data/network/interfaces/macs/"
            "00:16:3e:18:01:0c/primary-ip-address",
            30,
        ).stdout
    finally:
        transport.close()
    assert tables.choose(DEV, "198.18.1.12").index == 1
    assert tables.choose("erdma_0", "198.18.0.12").index == 1
    assert [d.port(1).netdev for d in links.devices] == ["eth0", "eth1"]
    assert macs.split() == ["00:16:3e:18:00:0c/", "00:16:3e:18:01:0c/"]
    assert primary == "198.18.1.12"


def test_healthy_two_eni_lab_passes_with_each_eri_on_its_own_interface(lab2, tmp_path):
    code, records = run(lab2, tmp_path / "s", "static", STATIC)
    assert code == 0, messages(records)
    passed = {r["check_id"] for r in records if r["verdict"] == "pass"}
    assert {"erdma", "erdma_identity", "erdma_driver", "erdma_port", "mtu", "path_mtu"} <= passed
    port = [r for r in records if r["check_id"] == "erdma_port" and r["subject"] == NODE]
    seen = {m["name"]: m["value"] for r in port for m in r["measured"]}
    assert seen["erdma_1 address"] == "198.18.1.12" and seen["erdma_0 address"] == "198.18.0.12"
    assert seen["erdma_1 gid_index"] == 1
    mtu = {m["name"] for r in records if r["check_id"] == "mtu" for m in r["measured"]}
    assert "eth1 (erdma_1) mtu" in mtu
    path = {m["name"] for r in records if r["check_id"] == "path_mtu" for m in r["measured"]}
    assert "erdma_1 (eth1) path_mtu" in path
    code, records = run(lab2, tmp_path / "b", "benchmark", "every_eri")
    assert code == 0, messages(records)
    commands = [c["command"] for r in records for c in r["commands"]]
    clients = [c for c in commands if "ib_write_bw" in c and "198.18." in c]
    on_eri1 = [c for c in clients if f"-d {DEV}" in c]
    assert on_eri1 and all("198.18.1." in c and "198.18.0." not in c for c in on_eri1), on_eri1
    assert all("-x 1" in c for c in on_eri1), on_eri1


def _only_eth1(records, node_check: str, says: str) -> None:
    """Failing: `node_check` of NODE (its message says `says`) and the path MTU of the
    pairs into and out of NODE over erdma_1 (eth1) alone; eth0's checks pass."""
    bad = failing(records)
    assert {r["check_id"] for r in bad} == {node_check, "path_mtu"}, messages(records)
    assert all(concerns(r, NODE) for r in bad), messages(records)
    mine = [r["message"] for r in bad if r["check_id"] == node_check]
    assert mine and all(says in m and "erdma_0" not in m for m in mine), mine
    paths = [r for r in bad if r["check_id"] == "path_mtu"]
    assert {r["subject"] for r in paths} == {"node01->node02", "node02->node03"}, paths
    for r in paths:  # the eth0 path of the same pair passed: only the erdma_1 part is named
        assert r["message"].split(": ", 1)[1].startswith(f"{DEV} ({IFACE}) to 198.18.1."), r


def test_mtu_1500_on_eth1_fails_that_node_and_interface_only(lab2, tmp_path):
    code, records = run(lab2, tmp_path, "static", STATIC, "mtu", f"1500@{IFACE}")
    assert code == 1
    _only_eth1(records, "mtu", f"{IFACE} ({DEV}): MTU 1500")
    mtu = [r["message"] for r in failing(records) if r["check_id"] == "mtu"]
    assert all("eth0" not in m for m in mtu), mtu


def test_blocked_port_on_eth1_fails_that_node_and_eri_only(lab2, tmp_path):
    code, records = run(lab2, tmp_path, "benchmark", "every_eri", "block", BLOCKED)
    assert code == 1
    bad = failing(records)
    assert bad and {r["check_id"] for r in bad} == {"erdma_eri_bw"}, messages(records)
    for message in messages(records):
        assert NODE in message and DEV in message, message
        assert "erdma_0" not in message.split("(suspect")[0], message
    passed = [r for r in records if r["verdict"] == "pass" and r["check_id"] == "erdma_eri_bw"]
    assert passed and all(NODE not in r["subject"] for r in passed)


def test_eth1_down_fails_that_node_and_eri_only(lab2, tmp_path):
    code, records = run(lab2, tmp_path, "static", STATIC, "eri-down", IFACE)
    assert code == 1
    _only_eth1(records, "erdma", f"{DEV} port 1 is")
