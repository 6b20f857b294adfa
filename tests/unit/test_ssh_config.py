"""ssh_config through fabric: what it fills in, what the inventory overrides, and our
host-key policy on every hop of a ProxyJump chain (fabric's own default is AutoAddPolicy)."""

from __future__ import annotations

import socket
import textwrap
from pathlib import Path

import fabric.config
import paramiko
import pytest

from pytest_hpcnet.inventory.loader import InventoryError, load_inventory
from pytest_hpcnet.transport.connect import AcceptNewPolicy, gateway_chain
from pytest_hpcnet.transport.fanout import Transport

BASTION_KEY = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def ssh_config(tmp_path: Path, proxy_jump: str = "bob@bastion:2200", inner: str = "") -> Path:
    path = tmp_path / "ssh_config"
    path.write_text(
        textwrap.dedent(
            f"""\
            Host gpu-alias
                HostName 10.9.9.2
                User alice
                Port 2202
                IdentityFile {tmp_path}/alias_key
                ProxyJump {proxy_jump}
                ConnectTimeout 77

            Host bastion
                HostName 10.9.9.1
                IdentityFile {tmp_path}/bastion_key

            Host inner
                HostName 10.9.9.3
                {inner}
            """
        )
    )
    return path


def inventory(tmp_path: Path, ssh: str = "", node_ssh: str = "{}", config: Path | None = None):
    config = config or ssh_config(tmp_path)
    known = tmp_path / "known_hosts"
    known.write_text(f"10.9.9.1 ssh-ed25519 {BASTION_KEY}\n")
    path = tmp_path / "inv.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            cluster: {{name: c, region: r}}
            ssh: {{config_file: {config}, known_hosts: {known}, connect_timeout_s: 4{ssh}}}
            nodes:
              - {{name: gpu-01, host: gpu-alias, ssh: {node_ssh}}}
            """
        )
    )
    return load_inventory(path)


@pytest.fixture
def build():
    """`build(inv)` -> the Connection Transport would open for the inventory's first node."""
    transports: list[Transport] = []

    def connection(inv):
        transports.append(Transport(inv))
        return transports[-1]._connection_for(inv.nodes[0])

    yield connection
    for transport in transports:
        transport.close()


def test_ssh_config_fills_in_what_the_inventory_leaves_unset(tmp_path, build):
    conn = build(inventory(tmp_path))
    assert (conn.host, conn.user, conn.port) == ("10.9.9.2", "alice", 2202)
    assert conn.connect_kwargs["key_filename"] == [f"{tmp_path}/alias_key"]
    assert "look_for_keys" not in conn.connect_kwargs  # no inventory key: paramiko's defaults
    jump = conn.gateway
    assert (jump.host, jump.user, jump.port) == ("10.9.9.1", "bob", 2200)
    assert jump.connect_kwargs["key_filename"] == [f"{tmp_path}/bastion_key"]


def test_every_hop_of_an_ssh_config_proxyjump_refuses_unknown_keys(tmp_path, build):
    # two hops, each its host's own ProxyJump (fabric reverses a comma list `bastion,inner`)
    config = ssh_config(tmp_path, proxy_jump="inner", inner="ProxyJump bastion")
    chain = gateway_chain(build(inventory(tmp_path, config=config)))
    assert [hop.host for hop in chain] == ["10.9.9.2", "10.9.9.3", "10.9.9.1"]
    for hop in chain:
        assert isinstance(hop.client._policy, paramiko.RejectPolicy), hop.host
    bastion_keys = chain[-1].client.get_host_keys().lookup("10.9.9.1")
    assert bastion_keys["ssh-ed25519"].get_base64() == BASTION_KEY  # our known_hosts, loaded


def test_accept_new_reaches_every_hop_too(tmp_path, build):
    chain = gateway_chain(build(inventory(tmp_path, ssh=", host_key_policy: accept-new")))
    assert len(chain) == 2
    assert all(isinstance(hop.client._policy, AcceptNewPolicy) for hop in chain)


def test_hops_built_from_ssh_config_get_the_inventory_timeouts(tmp_path, build):
    conn = build(inventory(tmp_path))
    assert conn.connect_timeout == 4  # the inventory's, over ssh_config's ConnectTimeout 77
    assert conn.gateway.connect_timeout == 4
    assert conn.gateway.connect_kwargs["banner_timeout"] == 4
    assert conn.gateway.connect_kwargs["auth_timeout"] == 4


def test_inventory_values_override_ssh_config(tmp_path, build):
    key = tmp_path / "inventory_key"
    key.write_text("placeholder")
    conn = build(
        inventory(
            tmp_path,
            ssh=f", user: root, identity_file: {key}",
            node_ssh="{port: 2222, jump_host: 'ops@jumpbox:2022'}",
        )
    )
    assert (conn.host, conn.user, conn.port) == ("10.9.9.2", "root", 2222)
    # the inventory key first and alone among defaults; ssh_config's appended, as with `ssh -i`
    assert conn.connect_kwargs["key_filename"] == [str(key), f"{tmp_path}/alias_key"]
    assert conn.connect_kwargs["look_for_keys"] is False
    assert conn.connect_kwargs["allow_agent"] is False
    chain = gateway_chain(conn)
    assert [(h.host, h.user, h.port) for h in chain[1:]] == [("jumpbox", "ops", 2022)]
    assert all(isinstance(hop.client._policy, paramiko.RejectPolicy) for hop in chain)


def test_ssh_config_is_read_once_not_per_connection(tmp_path, monkeypatch):
    inv = inventory(tmp_path)
    transport = Transport(inv)
    reads: list[str] = []
    monkeypatch.setattr(fabric.config.Config, "_load_ssh_file", lambda self, p: reads.append(p))
    try:
        for _ in range(3):
            assert transport._connection_for(inv.nodes[0]).gateway.host == "10.9.9.1"
    finally:
        transport.close()
    assert reads == []


def test_without_config_file_fabric_reads_the_default_files(tmp_path, monkeypatch):
    reads: list[str] = []
    monkeypatch.setattr(fabric.config.Config, "_load_ssh_file", lambda self, p: reads.append(p))
    path = tmp_path / "inv.yaml"
    path.write_text("cluster: {name: c, region: r}\nnodes: [{name: n1}]\n")
    Transport(load_inventory(path)).close()
    assert set(reads) == {str(Path("~/.ssh/config").expanduser()), "/etc/ssh/ssh_config"}


def test_missing_config_file_is_an_inventory_error(tmp_path):
    with pytest.raises(
        InventoryError, match=r"ssh\.config_file: ssh_config file .*nope.* not found"
    ):
        inventory(tmp_path, config=tmp_path / "nope")


def test_unreachable_jump_host_is_named_in_the_reason(tmp_path):
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = ssh_config(tmp_path, proxy_jump=f"127.0.0.1:{port}")
    inv = inventory(tmp_path, ssh=", connect_retries: 1", config=config)
    transport = Transport(inv)
    try:
        result = transport.run("gpu-01", "true")
    finally:
        transport.close()
    assert result.unreachable == (
        f"connection refused on jump host 127.0.0.1:{port} (is sshd running, is the port open?)"
    )
