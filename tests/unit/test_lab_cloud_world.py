"""The lab's control plane (lab/cloud_world.py, lab/control_plane.py) without a lab: a
LabState in a temporary folder, the daemon's server in a thread, the real SDK reading it
through the lab's credentials file."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("alibabacloud_ecs20140526")
pytest.importorskip("alibabacloud_vpc20160428")
pytest.importorskip("alibabacloud_credentials")

from alibabacloud_credentials.client import Client as CredentialClient
from alibabacloud_credentials.models import Config as CredentialConfig

from pytest_hpcnet.cloud import audit
from pytest_hpcnet.cloud.audit import NodeLocator
from pytest_hpcnet.inventory.bench_settings import CloudSettings
from pytest_hpcnet.inventory.cloud_flows import CloudExpect
from pytest_hpcnet.lab import control_plane, firewall
from pytest_hpcnet.lab.cloud_api import FakeAliyun
from pytest_hpcnet.lab.cloud_world import fault_rule_id, lab_world
from pytest_hpcnet.lab.inventory_file import lab_inventory
from pytest_hpcnet.lab.state import LabNode, LabState, node_address, node_mac, node_names
from pytest_hpcnet.redact import clear_secrets, redact

PORTS = (22, 2323, 18515, 29500)


def make_state(root: Path, count: int = 4, eris: int = 1) -> LabState:
    nodes = [
        LabNode(
            name=name,
            address=node_address(i),
            mtu=8500,
            instance_id=f"i-lab{i + 1:05d}",
            mac=node_mac(i),
            secondary_address=node_address(i, nic=1),
            secondary_mac=node_mac(i, nic=1),
        )
        for i, name in enumerate(node_names(count))
    ]
    root.mkdir(parents=True, exist_ok=True)
    return LabState(str(root), str(root / "lab.yaml"), nodes=nodes, eris=eris)


@pytest.fixture
def served(tmp_path):
    """The daemon's server for a 4-node lab state (saved in tmp_path), in a thread."""
    state = make_state(tmp_path / "state")
    server = control_plane.ControlPlaneServer(state.root)
    state.cloud_api_pid = os.getpid()
    state.cloud_api_port = server.server_address[1]
    control_plane.write_credentials(state)
    state.save()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()
    clear_secrets()


def read_plane(state: LabState) -> audit.ControlPlane:
    """The control plane as the audit reads it from the lab inventory's `cloud:` block."""
    settings = CloudSettings(**control_plane.inventory_cloud(state))
    assert audit.skip_reason(settings) is None
    reader = audit.open_reader(
        state.region_id, settings, attempts=1, wait_multiplier=0, max_wait_seconds=0
    )
    locators = [NodeLocator(n.name, n.instance_id, n.address, state.vpc_id) for n in state.nodes]
    return audit.gather(reader, locators)


def host_drops(state: LabState, source: LabNode, target: LabNode, proto: str, port: int) -> bool:
    """Whether the target's baseline iptables ACL drops that flow from the source's eth0."""
    return (proto, port, source.address) in firewall.acl_sources(state, target)


@pytest.mark.parametrize("eris", [1, 2])
def test_the_world_agrees_with_the_lab_firewall(tmp_path, eris):
    state = make_state(tmp_path, eris=eris)
    world = lab_world(state)
    credential = CredentialClient(
        CredentialConfig(type="access_key", access_key_id="ak", access_key_secret="sk-lab")
    )
    with FakeAliyun(world) as fake:
        settings = CloudSettings(
            ecs_endpoint=fake.endpoint, vpc_endpoint=fake.endpoint, protocol="http"
        )
        reader = audit.open_reader(state.region_id, settings, credential, attempts=1)
        locators = [NodeLocator(n.name, n.instance_id, n.address) for n in state.nodes]
        plane = audit.gather(reader, locators)
    clear_secrets()
    drops = 0
    for source, target in itertools.permutations(state.nodes, 2):
        for port in PORTS:
            decision = audit.port_decision(plane, source.name, target.name, "tcp", port)
            assert decision.unknown is None, decision
            if host_drops(state, source, target, "tcp", port):
                drops += 1
                assert decision.all_denied, decision
                assert "sgr-lab-acl-tcp-2323" in str(decision)
            else:
                assert decision.accepted, decision
    assert drops == 1  # node02 -> node01 tcp/2323, on every interface pair
    first, second = state.nodes[0], state.nodes[1]
    # the host drops it from each of node02's addresses, eth1's too
    assert {s for _, _, s in firewall.acl_sources(state, first)} == {
        second.address,
        second.secondary_address,
    }
    assert firewall.acl_sources(state, second) == []
    # every required flow of the default profile is accepted between the nodes, but from
    # node02 to node01 (the must-deny flow's pair: no ring pair of the suite)
    for source, target in itertools.permutations(state.nodes, 2):
        if (source, target) == (second, first):
            continue
        verdicts = audit.required_verdicts(plane, source, target, CloudExpect().required_flows)
        assert audit.not_accepted(verdicts) == []
    # the ERIs and their NIC indexes
    assert audit.eri_nic_indexes(plane) == {n.name: tuple(range(eris)) for n in state.nodes}
    assert {audit.eri_supported(plane, n.name).quantity for n in state.nodes} == {2}


def test_the_daemon_serves_the_lab_live_through_its_credentials_file(served):
    state = served
    plane = read_plane(state)
    assert [i.interface_id for i in plane.node("node02").interfaces] == ["eni-lab020", "eri-lab020"]
    assert plane.node("node02").primary.address == "198.18.0.12"
    assert audit.port_decision(plane, "node01", "node02", "tcp", 29500).accepted
    secret = control_plane.credentials_file(state).read_text().split("access_key_secret = ")[1]
    assert redact(secret.strip()) != secret.strip()  # registered before any call
    assert oct(control_plane.credentials_file(state).stat().st_mode & 0o777) == "0o600"

    # a console fault recorded in lab.json is served at once
    state.node("node02").faults["sg-drop:tcp/29500"] = ""
    state.save()
    decision = audit.port_decision(read_plane(state), "node01", "node02", "tcp", 29500)
    assert decision.all_denied
    assert fault_rule_id(state.node("node02"), "tcp", "29500") in str(decision)
    assert "priority 1" in str(decision)


def test_the_lab_inventory_points_the_sdk_at_the_lab(served):
    data = lab_inventory(served)
    cloud = data["cloud"]
    assert "scope" not in data  # the audit is in scope
    assert cloud["ecs_endpoint"] == f"127.0.0.1:{served.cloud_api_port}"
    assert cloud["protocol"] == "http"
    assert cloud["credentials_file"] == str(control_plane.credentials_file(served))
    secret = control_plane.credentials_file(served).read_text().split("access_key_secret = ")[1]
    assert secret.strip() not in repr(data)
    assert data["expect"]["erdma"] == {"eris": 1}


def test_without_the_sdk_the_lab_leaves_the_audit_out_saying_why(served, monkeypatch):
    monkeypatch.setattr(control_plane, "missing_sdk", lambda: "alibabacloud_ecs20140526")
    data = lab_inventory(served)
    assert data["cloud"] == {"enabled": False}
    assert data["scope"]["exclude"] == ["cloud_audit"]
    assert "the cloud SDK is not installed (alibabacloud_ecs20140526" in data["scope"]["reason"]


def test_a_missing_credentials_file_skips_the_audit_naming_it(tmp_path):
    settings = CloudSettings(credentials_file=str(tmp_path / "gone.ini"))
    reason = audit.skip_reason(settings)
    assert reason is not None and "cloud.credentials_file" in reason and "gone.ini" in reason


def test_the_nic_index_fault_puts_every_eri_on_one_index(tmp_path):
    state = make_state(tmp_path, eris=2)
    state.node("node02").faults["nic-index"] = "0"
    cards = {
        (i["InstanceId"], i["NetworkInterfaceId"]): i["Attachment"]["NetworkCardIndex"]
        for i in lab_world(state).network_interfaces
        if i["NetworkInterfaceTrafficMode"] == "HighPerformance"
    }
    assert cards[("i-lab00002", "eri-lab020")] == cards[("i-lab00002", "eni-lab021")] == 0
    assert cards[("i-lab00001", "eni-lab011")] == 1


def test_the_daemon_keeps_serving_when_a_stale_copy_of_the_state_is_saved(tmp_path, monkeypatch):
    """Its pidfile, not lab.json, says whose it is: a saved copy naming an old PID stops
    nothing; the pidfile naming another daemon, or lab.json gone, does."""
    monkeypatch.setattr(control_plane, "LIFECHECK_GRACE_S", 0.0)
    monkeypatch.setattr(control_plane, "LIFECHECK_EVERY_S", 0.0)
    state = make_state(tmp_path / "state")
    state.save()
    server = control_plane.ControlPlaneServer(state.root)
    control_plane.write_pidfile(state.root, server.server_address[1])
    stopped = []
    monkeypatch.setattr(server, "shutdown", lambda: stopped.append(True))
    state.cloud_api_pid = 1  # a stale in-memory copy saved by someone else
    state.save()
    server.service_actions()
    time.sleep(0.1)
    assert not stopped
    control_plane.pidfile(state.root).write_text("1 1\n")  # a newer daemon's
    server.service_actions()
    time.sleep(0.1)
    assert stopped
    server.server_close()


def test_stop_kills_only_the_labs_own_daemon(tmp_path):
    """A pidfile naming a process that is not this lab's control plane (a reused PID) is
    removed, and that process is left alone."""
    root = tmp_path / "state"
    root.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        control_plane.pidfile(root).write_text(f"{other.pid} 1\n")
        control_plane.stop(root)
        assert other.poll() is None and not control_plane.pidfile(root).exists()
    finally:
        other.kill()
        other.wait()
