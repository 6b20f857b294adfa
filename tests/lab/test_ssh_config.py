"""ssh_config against the lab: an alias reached through a ProxyJump from ssh_config alone,
and the jump host's key checked like the node's (fabric alone would auto-accept it)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab.state import LabState
from pytest_hpcnet.transport.fanout import Transport

pytestmark = pytest.mark.lab


def alias_inventory(
    lab: LabState, tmp_path: Path, known: Path, policy: str = "strict", port: int = 22
):
    """node02 as `gpu-alias`: its address, port, user, key and jump host (node01) are only
    in the ssh_config file, none in the inventory."""
    jump, target = lab.node("node01").address, lab.node("node02").address
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host gpu-alias\n    HostName {target}\n    Port {port}\n    User root\n"
        f"    IdentityFile {lab.client_key}\n    ProxyJump {jump}\n\n"
        f"Host {jump}\n    User root\n    IdentityFile {lab.client_key}\n"
    )
    inventory = {
        "cluster": {"name": "alias", "region": lab.region_id},
        "ssh": {
            "config_file": str(config),
            "known_hosts": str(known),
            "host_key_policy": policy,
            "connect_timeout_s": 5,
            "connect_retries": 1,
        },
        "nodes": [{"name": "node02", "host": "gpu-alias"}],
    }
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(inventory))
    return load_inventory(path)


def known_hosts_without(lab: LabState, tmp_path: Path, address: str) -> Path:
    lines = Path(lab.known_hosts).read_text().splitlines()
    known = tmp_path / "known_hosts"
    known.write_text("".join(f"{ln}\n" for ln in lines if not ln.startswith(f"{address} ")))
    return known


def run_once(inventory, command: str):
    transport = Transport(inventory)
    try:
        return transport.run("node02", command)
    finally:
        transport.close()


def test_alias_is_reached_through_the_ssh_config_jump_host(lab4, tmp_path):
    inventory = alias_inventory(lab4, tmp_path, Path(lab4.known_hosts))
    result = run_once(inventory, 'hostname; echo "$SSH_CONNECTION"')
    assert result.ok, result.failure
    name, connection = result.stdout.splitlines()
    assert name == "node02"
    client, _, server, port = connection.split()
    assert (client, server, port) == ("198.18.0.11", "198.18.0.12", "22")  # via node01


def test_unknown_jump_host_key_is_refused_and_named(lab4, tmp_path):
    known = known_hosts_without(lab4, tmp_path, "198.18.0.11")  # node02's key stays known
    before = known.read_text()
    result = run_once(alias_inventory(lab4, tmp_path, known), "true")
    assert result.unreachable == (
        f"host key unknown: jump host 198.18.0.11:22 is not in {known}; add it (ssh-keyscan) "
        "after verifying it, or set ssh.host_key_policy: accept-new"
    )
    assert known.read_text() == before


def test_accept_new_records_the_jump_host_key(lab4, tmp_path):
    known = known_hosts_without(lab4, tmp_path, "198.18.0.11")
    result = run_once(alias_inventory(lab4, tmp_path, known, "accept-new"), "hostname")
    assert result.ok, result.failure
    assert result.stdout.strip() == "node02"
    node01_key = (lab4.node_dir("node01") / "ssh_host_ed25519_key.pub").read_text().split()[1]
    assert f"198.18.0.11 ssh-ed25519 {node01_key}\n" in known.read_text()


def test_jump_host_that_cannot_reach_the_node_says_so(lab4, tmp_path):
    inventory = alias_inventory(lab4, tmp_path, Path(lab4.known_hosts), port=9)  # nothing there
    result = run_once(inventory, "true")
    assert result.unreachable == (
        "the jump host could not open a tunnel to 198.18.0.12:9: Connect failed"
    )
