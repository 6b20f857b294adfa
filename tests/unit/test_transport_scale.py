"""Per-connection costs that grew with nodes x nodes: known_hosts parsed by every connection,
and paramiko's 0.1 s idle polls of every connection's thread."""

from __future__ import annotations

import os
import resource
import select
import threading
import time

import paramiko
import pytest

from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.transport.fanout import (
    IDLE_POLL_S,
    Transport,
    _read_channel,
    quiet_idle_polls,
)

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


class _PipeChannel:
    """What `_read_channel` uses of a paramiko channel, over a pipe whose read end is moved
    to a descriptor past 1,023 (a 1,024-node controller: a socket and a pipe per node)."""

    def __init__(self, fd: int):
        self.fd, self.data = fd, bytearray()
        self.eof_received = self.closed = False

    def fileno(self) -> int:
        return self.fd

    def recv_ready(self) -> bool:
        if self.eof_received:
            return False
        ready = select.poll()
        ready.register(self.fd, select.POLLIN)
        return bool(ready.poll(0))

    def recv(self, n: int) -> bytes:
        chunk = os.read(self.fd, n)
        self.eof_received = not chunk
        return chunk

    def recv_stderr_ready(self) -> bool:
        return False

    def exit_status_ready(self) -> bool:
        return self.eof_received


@pytest.fixture
def high_fd():
    """A pipe whose read end is descriptor 1,100 (the soft limit raised if it must be)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= 1100:
        if hard != resource.RLIM_INFINITY and hard <= 1100:
            pytest.skip(f"open-files hard limit {hard}: no descriptor 1,100 here")
        resource.setrlimit(resource.RLIMIT_NOFILE, (1200, hard))
    read, write = os.pipe()
    os.dup2(read, 1100)
    os.close(read)
    yield 1100, write  # the test closes `write`
    os.close(1100)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_command_is_read_whole_on_a_descriptor_past_1023(high_fd):
    """`select()` refuses descriptors past FD_SETSIZE (1,024): at 1,024 nodes every node
    past the first few hundred was 'unreachable' with 'filedescriptor out of range'."""
    fd, write = high_fd
    channel = _PipeChannel(fd)

    def later():
        time.sleep(0.2)
        os.write(write, b"hello")
        os.close(write)

    writer = threading.Thread(target=later)
    writer.start()
    out, err, timed_out, truncated = _read_channel(channel, time.monotonic() + 10, 1 << 20)
    writer.join()
    assert (out, err, timed_out, truncated) == (b"hello", b"", False, False)


def test_waiting_on_a_quiet_descriptor_past_1023_times_out(high_fd):
    fd, write = high_fd
    t0 = time.monotonic()
    out, _, timed_out, _ = _read_channel(_PipeChannel(fd), time.monotonic() + 0.3, 1 << 20)
    os.close(write)
    assert timed_out and out == b""
    assert 0.25 <= time.monotonic() - t0 < 5
