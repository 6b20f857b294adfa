"""Per-connection costs that grew with nodes x nodes: known_hosts parsed by every connection,
and paramiko's 0.1 s idle polls of every connection's thread."""

from __future__ import annotations

import paramiko

from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.transport.fanout import IDLE_POLL_S, Transport, quiet_idle_polls

KEY = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def test_known_hosts_parsed_once_and_each_client_gets_its_host(tmp_path, monkeypatch):
    known = tmp_path / "known_hosts"
    known.write_text("".join(f"10.0.0.{i} ssh-ed25519 {KEY}\n" for i in range(1, 201)))
    known.write_text(known.read_text() + f"[10.0.0.7]:2222 ssh-ed25519 {KEY}\n")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        "cluster: {name: c, region: r}\n"
        f"ssh: {{known_hosts: {known}}}\n"
        "nodes:\n  - {name: n1, host: 10.0.0.1}\n"
    )
    parses = []
    real_load = paramiko.HostKeys.load
    monkeypatch.setattr(
        paramiko.HostKeys, "load", lambda self, f: (parses.append(f), real_load(self, f))[1]
    )
    transport = Transport(load_inventory(inventory))
    clients = [paramiko.SSHClient() for _ in range(3)]
    transport._apply_host_key_policy(clients[0], "10.0.0.5", 22)
    transport._apply_host_key_policy(clients[1], "10.0.0.7", 2222)
    transport._apply_host_key_policy(clients[2], "10.0.0.250", 22)
    assert len(parses) == 1
    assert list(clients[0].get_host_keys().keys()) == ["10.0.0.5"]
    assert list(clients[1].get_host_keys().keys()) == ["[10.0.0.7]:2222"]
    assert clients[2].get_host_keys().keys() == []  # unknown stays unknown: refused later
    assert isinstance(clients[2]._policy, paramiko.RejectPolicy)
    known.write_text(known.read_text() + f"10.0.0.250 ssh-ed25519 {KEY}\n")  # accept-new
    transport._apply_host_key_policy(clients[2], "10.0.0.250", 22)
    assert len(parses) == 2 and list(clients[2].get_host_keys().keys()) == ["10.0.0.250"]
    transport.close()


def test_connections_poll_their_socket_once_a_second_when_idle():
    # paramiko's transport thread polls every 0.1 s: 256 idle connections cost the
    # controller more CPU than the run's own work (gate_scale.py at 256 nodes)
    class Sock:
        timeout = 0.1

        def settimeout(self, value):
            self.timeout = value

    class Conn:
        client = type("Client", (), {"get_transport": lambda self: transport})()

    transport = type("T", (), {"sock": Sock()})()
    quiet_idle_polls(Conn())
    assert transport.sock.timeout == IDLE_POLL_S == 1.0
