"""How the lab fits its host: the backlog that keeps bridge floods from counting as drops, and
the SSH concurrency for nodes that share the controller's cores."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from pytest_hpcnet.lab.inventory_file import lab_concurrency
from pytest_hpcnet.lab.links import bridge_address_commands, node_address_commands
from pytest_hpcnet.lab.state import (
    BRIDGE,
    BRIDGE_ADDRESS,
    SUBNET,
    LabNode,
    LabState,
    node_address,
    node_mac,
    node_names,
)
from pytest_hpcnet.lab.tuning import (
    BACKLOG_PER_NODE,
    NEIGHBOURS_PER_NODE,
    raise_host_backlog,
    raise_host_neighbours,
    restore_host_backlog,
    restore_host_neighbours,
)


def test_backlog_raised_for_a_large_lab_and_restored(tmp_path):
    knob = tmp_path / "netdev_max_backlog"
    knob.write_text("1000\n")
    previous = raise_host_backlog(128, knob)
    assert previous == 1000
    assert int(knob.read_text()) == 128 * BACKLOG_PER_NODE
    restore_host_backlog(previous, knob)
    assert knob.read_text() == "1000\n"


def test_backlog_never_lowered(tmp_path):
    knob = tmp_path / "netdev_max_backlog"
    knob.write_text("50000\n")
    assert raise_host_backlog(128, knob) is None
    restore_host_backlog(None, knob)
    assert knob.read_text() == "50000\n"


def test_previous_backlog_survives_the_state_file(tmp_path):
    state = LabState(state_dir=str(tmp_path), inventory="lab.yaml", host_backlog=1000)
    state.save()
    assert LabState.load(tmp_path).host_backlog == 1000


def test_lab_concurrency_follows_the_cores_within_bounds():
    assert lab_concurrency(1) == 16
    assert lab_concurrency(2) == 16
    assert lab_concurrency(4) == 32
    assert lab_concurrency(32) == 64


def _neigh_knobs(folder, values=("128", "512", "1024")):
    for name, value in zip(("gc_thresh1", "gc_thresh2", "gc_thresh3"), values, strict=True):
        (folder / name).write_text(f"{value}\n")


def test_neighbour_table_raised_for_256_nodes_and_restored(tmp_path):
    # 256 nodes hold about 1,300 ARP entries in the one table all namespaces share: past the
    # default gc_thresh3 (1024) the kernel refuses new neighbours ("neighbour table overflow").
    _neigh_knobs(tmp_path)
    previous = raise_host_neighbours(256, tmp_path)
    assert previous == {"gc_thresh1": 128, "gc_thresh2": 512, "gc_thresh3": 1024}
    raised = [int((tmp_path / f"gc_thresh{i}").read_text()) for i in (1, 2, 3)]
    assert raised == [256 * n for n in NEIGHBOURS_PER_NODE]
    assert raised[2] > 256 * 5  # more than every node's host, partners and flows
    restore_host_neighbours(previous, tmp_path)
    assert [(tmp_path / f"gc_thresh{i}").read_text() for i in (1, 2, 3)] == [
        "128\n",
        "512\n",
        "1024\n",
    ]


def test_neighbour_table_never_lowered(tmp_path):
    _neigh_knobs(tmp_path, ("128", "512", "1024"))
    assert raise_host_neighbours(4, tmp_path) == {}
    assert (tmp_path / "gc_thresh3").read_text() == "1024\n"


def test_previous_neighbour_limits_survive_the_state_file(tmp_path):
    state = LabState(state_dir=str(tmp_path), inventory="lab.yaml", host_neigh={"gc_thresh3": 1})
    state.save()
    assert LabState.load(tmp_path).host_neigh == {"gc_thresh3": 1}


def test_256_nodes_fit_the_lab_24_with_distinct_addresses_and_macs():
    count = 256
    addresses = [node_address(i) for i in range(count)]
    macs = [node_mac(i) for i in range(count)]
    assert str(SUBNET) == "198.18.0.0/24"
    assert len(set(addresses)) == len(set(macs)) == count
    assert addresses[0] == "198.18.0.11"  # small labs keep their addresses
    assert macs[0] == "00:16:3e:18:00:0b"
    assert addresses[244] == "198.18.0.255"  # plain unicast: eth0 holds a /32
    assert addresses[245] == "198.18.0.0"  # the 246th node wraps to the start of the /24
    assert addresses[-1] == "198.18.0.10"
    assert macs[-1] == "00:16:3e:18:00:0a"
    assert all(ipaddress.ip_address(a) in SUBNET for a in addresses)
    assert node_names(count)[-1] == "node256"


def test_the_bridge_address_is_link_local_outside_the_node_range():
    bridge = ipaddress.ip_address(BRIDGE_ADDRESS)
    assert bridge.is_link_local
    assert bridge not in SUBNET


def test_a_node_holds_a_32_with_on_link_routes_to_the_24_and_the_bridge():
    node = LabNode("node246", node_address(245), 8500, mac=node_mac(245))
    commands = node_address_commands(node)
    assert ["ip", "-n", "hx-node246", "addr", "add", "198.18.0.0/32", "dev", "eth0"] in commands
    routes = [c[3:] for c in commands if c[3:5] == ["route", "add"]]
    lab_24s = ["198.18.0.0/24", "198.18.2.0/24", "198.18.3.0/24", "198.18.4.0/24"]
    assert routes == [
        *(
            ["route", "add", net, "dev", "eth0", "scope", "link", "src", "198.18.0.0"]
            for net in lab_24s
        ),
        [
            "route",
            "add",
            f"{BRIDGE_ADDRESS}/32",
            "dev",
            "eth0",
            "scope",
            "link",
            "src",
            "198.18.0.0",
        ],
    ]
    up = commands.index(["ip", "-n", "hx-node246", "link", "set", "eth0", "up"])
    assert all(commands.index(["ip", "-n", "hx-node246", *r]) > up for r in routes)


def test_the_host_reaches_the_24_through_the_bridge_from_its_link_local_address():
    commands = bridge_address_commands()
    assert ["ip", "addr", "add", f"{BRIDGE_ADDRESS}/32", "dev", BRIDGE] in commands
    own = ["dev", BRIDGE, "scope", "link", "src", BRIDGE_ADDRESS]
    assert ["ip", "route", "add", "198.18.0.0/24", *own] in commands
    assert commands.index(["ip", "link", "set", BRIDGE, "up"]) < len(commands) - 1


def test_the_node_side_scripts_carry_the_lab_layout():
    tools = Path(__file__).parents[2] / "pytest_hpcnet" / "lab"
    node_tool = (tools / "tools" / "hpcnet_lab_node.py").read_text()
    metadata = (tools / "metadata_server.py").read_text()
    assert f'BRIDGE_ADDRESS = "{BRIDGE_ADDRESS}"' in node_tool
    assert f'LAB_SUBNET = "{SUBNET}"' in metadata
