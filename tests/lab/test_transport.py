"""Transport against a 4-node lab: fan-out, timeouts, unreachable nodes, host keys, quoting."""

from __future__ import annotations

import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pytest_hpcnet.lab import cluster as lab
from pytest_hpcnet.transport.fanout import Transport

pytestmark = pytest.mark.lab


def test_fan_out_returns_every_node_with_one_connection_each(lab_inventory):
    transport = Transport(lab_inventory)
    try:
        first = transport.run_on_all("hostname; uname -r")
        again = transport.run_on_all("echo second")
    finally:
        transport.close()
    assert sorted(first) == ["node01", "node02", "node03", "node04"]
    for name, result in first.items():
        assert result.exit_status == 0, result.failure
        assert result.stdout.split()[0] == name  # each node answers with its own hostname
        assert result.duration_s > 0 and result.started_at > 0
    assert all(r.stdout.strip() == "second" for r in again.values())
    assert transport.connections_opened() == {n: 1 for n in first}


def test_command_past_its_timeout_is_killed_on_the_node(lab4, lab_inventory):
    transport = Transport(lab_inventory)
    marker = "hpcnet-sleeper-7373"
    try:
        t0 = time.monotonic()
        result = transport.run("node02", f"sleep 30; echo {marker}", timeout_s=2)
        elapsed = time.monotonic() - t0
    finally:
        transport.close()
    assert result.timed_out and not result.ok
    assert "timed out" in result.failure
    assert elapsed < 20  # not the 30 s of the sleep
    time.sleep(0.5)
    pids = subprocess.run(
        ["ip", "netns", "pids", lab4.node("node02").namespace], capture_output=True, text=True
    ).stdout.split()
    cmdlines = [
        Path(f"/proc/{p}/cmdline").read_bytes() for p in pids if Path(f"/proc/{p}").exists()
    ]
    assert not [c for c in cmdlines if b"sleep" in c], "the sleeping command is still running"


def test_stopped_sshd_is_unreachable_with_reason_others_pass(lab4, lab_inventory):
    node = lab4.node("node03")
    import os

    os.kill(node.sshd_pid, signal.SIGTERM)
    time.sleep(0.3)
    transport = Transport(lab_inventory)
    try:
        results = transport.run_on_all("true")
        second = transport.run("node03", "true")
    finally:
        transport.close()
        lab.start_node_sshd(lab4, "node03")
    assert results["node03"].unreachable.startswith("connection refused on 198.18.0.13:22")
    assert all(results[n].ok for n in ("node01", "node02", "node04"))
    assert second.unreachable == results["node03"].unreachable  # recorded once, reused
    assert transport.sessions["node03"].connects <= lab_inventory.ssh.connect_retries


def test_changed_host_key_is_refused(lab4, lab_inventory, tmp_path):
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    fake = other.with_suffix(".pub").read_text().split()
    lines = Path(lab4.known_hosts).read_text().splitlines()
    lines = [
        f"198.18.0.12 {fake[0]} {fake[1]}" if ln.startswith("198.18.0.12 ") else ln for ln in lines
    ]
    known = tmp_path / "known_hosts"
    known.write_text("\n".join(lines) + "\n")
    lab_inventory.ssh.known_hosts = str(known)
    transport = Transport(lab_inventory)
    try:
        results = transport.run_on_all("true")
    finally:
        transport.close()
    reason = results["node02"].unreachable
    assert reason.startswith("host key mismatch for 198.18.0.12:22")
    assert "ssh-keygen -R 198.18.0.12" in reason
    assert results["node01"].ok and results["node04"].ok


def test_unknown_host_key_is_refused_by_default_and_recorded_with_accept_new(
    lab_inventory, tmp_path
):
    known = tmp_path / "empty_known_hosts"
    known.write_text("")
    lab_inventory.ssh.known_hosts = str(known)
    transport = Transport(lab_inventory)
    try:
        refused = transport.run("node01", "true")
    finally:
        transport.close()
    assert refused.unreachable.startswith("host key unknown: 198.18.0.11:22 is not in")
    lab_inventory.ssh.host_key_policy = "accept-new"
    transport = Transport(lab_inventory)
    try:
        accepted = transport.run("node01", "true")
    finally:
        transport.close()
    assert accepted.ok
    assert known.read_text().startswith("198.18.0.11 ssh-ed25519 ")


def test_shell_metacharacters_reach_the_node_as_one_literal_argument(lab_inventory, tmp_path):
    marker = Path("/tmp/hpcnet-pwned-marker")
    marker.unlink(missing_ok=True)
    hostile = f"eth0; touch {marker} $(touch {marker}) `touch {marker}` 'q' \"dq\" \\ * \n&& x"
    lab_inventory.nodes[0].interface = hostile
    transport = Transport(lab_inventory)
    try:
        result = transport.run(
            "node01", f"printf '%s' {shlex.quote(lab_inventory.nodes[0].interface)}"
        )
    finally:
        transport.close()
    assert result.ok, result.failure
    assert result.stdout == hostile
    assert not marker.exists()


def test_oversized_binary_output_is_bounded(lab_inventory):
    transport = Transport(lab_inventory)
    try:
        big = transport.run("node01", "head -c 20000000 /dev/urandom; echo tail >&2")
        after = transport.run("node01", "echo still-fine")
    finally:
        transport.close()
    assert big.ok and big.truncated
    assert len(big.stdout.encode("utf-8", errors="replace")) < 40_000_000
    assert "\ufffd" in big.stdout  # invalid UTF-8 replaced, not a crash
    assert big.stderr.strip() == "tail"
    assert after.stdout.strip() == "still-fine"


def test_flaky_connection_is_retried_and_recorded(lab4, lab_inventory):
    """Resets for the first attempts (iptables REJECT with tcp-reset), then the port opens."""
    import threading

    from pytest_hpcnet.lab.system import in_ns

    ns = lab4.node("node04").namespace
    rule = ["INPUT", "-p", "tcp", "--dport", "22", "-j", "REJECT", "--reject-with", "tcp-reset"]
    in_ns(ns, "iptables", "-w", "5", "-I", *rule)
    timer = threading.Timer(0.5, lambda: in_ns(ns, "iptables", "-w", "5", "-D", *rule))
    lab_inventory.ssh.connect_retries = 6
    transport = Transport(lab_inventory)
    try:
        timer.start()
        result = transport.run("node04", "hostname")
    finally:
        timer.join()
        in_ns(ns, "iptables", "-w", "5", "-D", *rule, check=False)
        transport.close()
    assert result.ok, result.failure
    assert transport.sessions["node04"].retries >= 1
    assert transport.retries() == {"node04": transport.sessions["node04"].retries}


def test_together_runs_every_node_at_once_past_the_concurrency_bound(lab_inventory):
    transport = Transport(lab_inventory, concurrency=1)
    try:
        transport.run_on_all("true")  # connections open first, as the facts do in a run
        t0 = time.monotonic()
        bounded = transport.run_on_all("sleep 1")
        t1 = time.monotonic()
        together = transport.run_on_all("sleep 1", together=True)
        t2 = time.monotonic()
    finally:
        transport.close()
    assert all(r.ok for r in (*bounded.values(), *together.values()))
    assert t1 - t0 >= 4.0  # one node at a time
    assert t2 - t1 < 2.5, f"{t2 - t1:.1f}s"  # all four sleeps overlap
