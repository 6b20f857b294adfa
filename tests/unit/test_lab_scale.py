"""A lab past 256 nodes: four /24s, one MAC per NIC, a second bridge past 1,000 ports, and a
metadata service that parses lab.json only when it changed."""

from __future__ import annotations

import ipaddress
import json
import os

from pytest_hpcnet.lab import metadata_server as imds
from pytest_hpcnet.lab.links import bridge_address_commands
from pytest_hpcnet.lab.state import (
    BRIDGE,
    MAX_NODES,
    PORTS_PER_BRIDGE,
    SECOND_BRIDGE,
    SUBNET,
    node_address,
    node_bridge,
    node_mac,
    node_names,
)

BR_MAX_PORTS = 1023
"""The kernel's limit per bridge (`BR_MAX_PORTS` 1,024, port 0 reserved)."""


def test_the_first_256_nodes_keep_their_addresses():
    assert [node_address(i) for i in (0, 244, 245, 255)] == [
        "198.18.0.11",
        "198.18.0.255",
        "198.18.0.0",
        "198.18.0.10",
    ]
    assert node_mac(255) == "00:16:3e:18:00:0a"


def test_1024_nodes_have_distinct_addresses_and_macs_in_the_lab_vpc():
    vpc = ipaddress.ip_network(imds.VPC_CIDR)
    for nic in (0, 1):
        addresses = [node_address(i, nic) for i in range(MAX_NODES)]
        macs = [node_mac(i, nic) for i in range(MAX_NODES)]
        assert len(set(addresses)) == len(set(macs)) == MAX_NODES
        assert all(ipaddress.ip_address(a) in vpc for a in addresses)
    primary = {node_address(i) for i in range(MAX_NODES)}
    secondary = {node_address(i, 1) for i in range(MAX_NODES)}
    assert not primary & secondary
    assert node_address(256) == "198.18.2.11" and node_mac(256) == "00:16:3e:18:02:0b"


def test_every_lab_subnet_is_routed_to_the_bridge():
    routed = [c[3] for c in bridge_address_commands() if c[:3] == ["ip", "route", "add"]]
    nets = [ipaddress.ip_network(n) for n in routed]
    for i in range(0, MAX_NODES, 37):
        for nic in (0, 1):
            assert any(ipaddress.ip_address(node_address(i, nic)) in n for n in nets)
    assert str(SUBNET) in routed


def test_no_bridge_takes_more_ports_than_the_kernel_allows():
    bridges = [node_bridge(i) for i in range(MAX_NODES)]
    assert bridges.count(BRIDGE) == PORTS_PER_BRIDGE
    assert bridges.count(BRIDGE) + 1 <= BR_MAX_PORTS  # + the link to the second bridge
    assert bridges.count(SECOND_BRIDGE) == MAX_NODES - PORTS_PER_BRIDGE


def test_names_keep_one_width():
    names = node_names(1024)
    assert names[0] == "node0001" and names[-1] == "node1024"
    assert node_names(256)[0] == "node001"


def test_metadata_cidr_follows_the_address():
    assert imds.vswitch_cidr("198.18.0.12") == imds.LAB_SUBNET
    assert imds.vswitch_cidr("198.18.3.12") == "198.18.3.0/24"
    assert imds.vswitch_cidr("", imds.SECONDARY_SUBNET) == imds.SECONDARY_SUBNET


def test_metadata_reads_lab_json_again_only_when_replaced(tmp_path):
    path = tmp_path / "lab.json"
    path.write_text(json.dumps({"nodes": [{"name": "node01", "vswitch_id": "vsw-a"}]}))
    first = imds.node_values(tmp_path, "node01")
    assert imds.node_values(tmp_path, "node01") is first
    replacement = tmp_path / "lab.tmp"
    replacement.write_text(json.dumps({"nodes": [{"name": "node01", "vswitch_id": "vsw-b"}]}))
    os.replace(replacement, path)  # as LabState.save does
    assert imds.node_values(tmp_path, "node01")["vswitch-id"] == "vsw-b"
