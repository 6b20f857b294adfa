"""The lab's second ENI without a lab (issue 27): with two ERIs, erdma_1 sits on eth1 with
eth1's own MAC, address and metadata entry; faults name an ERI by its interface."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_hpcnet.lab import faults
from pytest_hpcnet.lab import metadata_server as imds
from pytest_hpcnet.lab.emulation import install_tools, rdma_devices, set_eris, write_rdma_state
from pytest_hpcnet.lab.firewall import _rule, parse_fault_target
from pytest_hpcnet.lab.state import (
    SECONDARY_SUBNET,
    SECONDARY_VSWITCH,
    SUBNET,
    LabNode,
    LabState,
    node_address,
    node_mac,
)
from pytest_hpcnet.lab.system import LabError


def _node(**faults_: str) -> LabNode:
    return LabNode(
        "node01",
        "198.18.0.11",
        8500,
        mac="00:16:3e:18:00:0b",
        secondary_address="198.18.1.11",
        secondary_mac="00:16:3e:18:01:0b",
        faults=dict(faults_),
    )


def test_secondary_eni_addresses_stay_in_the_lab_range():
    assert (node_address(0, nic=1), node_mac(0, nic=1)) == ("198.18.1.11", "00:16:3e:18:01:0b")
    assert node_address(0) == "198.18.0.11" and node_mac(0) == "00:16:3e:18:00:0b"
    assert SECONDARY_SUBNET.subnet_of(SUBNET.supernet(new_prefix=15))
    assert str(SECONDARY_SUBNET) == imds.SECONDARY_SUBNET
    assert imds.SECONDARY_VSWITCH == SECONDARY_VSWITCH


def test_erdma_1_sits_on_eth1_with_eth1s_gid():
    one, two = rdma_devices(_node(), 2)
    assert one["ports"][0]["netdev"] == "eth0"
    assert one["ports"][0]["gids"][1] == "::ffff:198.18.0.11"
    assert two["ports"][0]["netdev"] == "eth1"
    assert two["ports"][0]["gids"] == ["fe80::216:3eff:fe18:10b", "::ffff:198.18.1.11"]
    assert two["node_guid"] == "0216:3eff:fe18:010b"
    assert [d["ports"][0]["netdev"] for d in rdma_devices(_node(), 1)] == ["eth0"]


def test_metadata_lists_each_enis_mac():
    node = json.loads(json.dumps(_node().__dict__))
    data = {"eris": 2, "vpc_id": "vpc-lab0001"}
    values = imds.interface_values(data, node)
    eth1 = "network/interfaces/macs/00:16:3e:18:01:0b/"
    assert values[eth1 + "primary-ip-address"] == "198.18.1.11"
    assert values[eth1 + "vswitch-id"] == SECONDARY_VSWITCH
    assert values["network/interfaces/macs/00:16:3e:18:00:0b/primary-ip-address"] == "198.18.0.11"
    assert imds.listing(values, "network/interfaces/macs/") == (
        "00:16:3e:18:00:0b/\n00:16:3e:18:01:0b/"
    )
    assert eth1 + "vswitch-id" not in imds.interface_values({**data, "eris": 1}, node)


def test_firewall_fault_targets_a_port_range_on_one_interface():
    assert parse_fault_target("tcp/18515") == ("tcp", "18515", None)
    assert parse_fault_target("tcp/18515-18600@eth1") == ("tcp", "18515:18600", "eth1")
    assert _rule("block", "tcp", "18515:18600", "eth1")[:2] == ["-i", "eth1"]
    with pytest.raises(LabError):
        parse_fault_target("tcp/18600-18515")
    with pytest.raises(LabError):
        parse_fault_target("tcp/18515@eth1;reboot")


@pytest.fixture
def lab_dir(tmp_path) -> Path:
    state = LabState(state_dir=str(tmp_path), inventory="lab.yaml", nodes=[_node()])
    install_tools(state)
    write_rdma_state(state, state.nodes[0])
    state.save()
    return tmp_path


def test_eri_faults_name_the_eri_by_its_interface(lab_dir):
    set_eris(lab_dir, 2)  # a state without a running lab: files only, no network
    assert faults.inject("eri-slow", "node01", "eth1@100mbit", lab_dir) == (
        "node01: eri-slow=erdma_1@100mbit"
    )
    assert faults.inject("gid-shift", "node01", "eth1", lab_dir) == "node01: gid-shift=erdma_1"
    devices = json.loads((lab_dir / "nodes/node01/rdma.json").read_text())["devices"]
    assert devices[1]["ports"][0]["gids"][2] == "::ffff:198.18.1.11"
    faults.heal("all", lab_dir)
    with pytest.raises(LabError, match="expected one of erdma_0, erdma_1, eth0, eth1"):
        faults.inject("eri-slow", "node01", "eth7", lab_dir)
