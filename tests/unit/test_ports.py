"""Unit tests of the reachability listener, connector, parsers and matrix."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import pytest

from pytest_hpcnet.probes import ports
from pytest_hpcnet.probes.ports import Flow, Reachability
from tests.reachability_matrix import reachability_matrix


def test_parse_connect_mixed(fixture_text):
    result = ports.parse_connect(fixture_text("ports", "connect-mixed.txt"))
    assert [(r.proto, r.port, r.outcome) for r in result.results] == [
        ("tcp", 22, "open"),
        ("tcp", 5000, "refused"),
        ("tcp", 5001, "timeout"),
        ("udp", 6000, "open"),
        ("udp", 6001, "refused"),
        ("udp", 6002, "timeout"),
        ("tcp", 7000, "error"),
    ]
    assert result.get("tcp", 7000).detail == "No route to host"
    assert result.problems == ()


def test_parse_connect_truncated(fixture_text):
    result = ports.parse_connect(fixture_text("ports", "connect-truncated.txt"))
    assert [r.port for r in result.results] == [22]
    assert any("unknown outcome 'refu'" in p for p in result.problems)
    assert any("before DONE" in p for p in result.problems)


@pytest.mark.parametrize("text", ["", "garbage", "\x00\r\n", "tcp x open"])
def test_parse_connect_odd(text):
    result = ports.parse_connect(text)
    assert result.results == () and result.problems


def test_parse_listener_busy(fixture_text):
    status = ports.parse_listener(fixture_text("ports", "listener-busy.txt"))
    assert status.ready
    assert status.tcp_bound == (5000, 5001) and status.udp_bound == (6000, 6001)
    assert status.tcp_busy == (22,)
    assert status.failed == (("tcp", 80, "Permission denied"),)
    assert (status.exit_reason, status.served) == ("idle", 4)
    assert status.listening("tcp", 22) and not status.listening("tcp", 80)
    assert status.problems == ()


def test_parse_listener_missing_python():
    status = ports.parse_listener("hpcnet: python3 not found\n")
    assert status.tool_missing and not status.ready
    assert not ports.parse_listener("Traceback (most recent call last):\n").ready


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (22, (22,)),
        ("22", (22,)),
        ("22,80", (22, 80)),
        ("50000-50003", (50000, 50001, 50002, 50003)),
        ([22, "80, 443", "8000-8001", 22], (22, 80, 443, 8000, 8001)),
        ([], ()),
    ],
)
def test_expand_ports(spec, expected):
    assert ports.expand_ports(spec) == expected


@pytest.mark.parametrize("spec", ["0", "70000", "10-5", "abc", "22;80", "1-65535"])
def test_expand_ports_rejects(spec):
    with pytest.raises(ValueError):
        ports.expand_ports(spec)


def test_expand_ports_cap():
    assert len(ports.expand_ports("1000-1009", cap=10)) == 10
    with pytest.raises(ValueError):
        ports.expand_ports(["1000-1009", "2000"], cap=10)


def test_flows_for():
    assert ports.flows_for(tcp="22,5000-5001", udp=6000) == (
        Flow("tcp", 22),
        Flow("tcp", 5000),
        Flow("tcp", 5001),
        Flow("udp", 6000),
    )


def test_command_builders_quote():
    cmd = ports.connect_command("10.0.0.2; reboot", [("tcp", 22), Flow("udp", 53)], 1.5)
    assert "'10.0.0.2; reboot'" in cmd
    assert "tcp:22 udp:53" in cmd
    assert "hpcnet: python3 not found" in cmd
    with pytest.raises(ValueError):
        ports.connect_command("h", [("sctp", 1)])
    lcmd = ports.listener_command("0.0.0.0", [22, 5000], [6000], lifetime_s=30, idle_s=5)
    assert "--tcp 22,5000 --udp 6000 --lifetime 30.0 --idle 5.0" in lcmd


def test_matrix_findings_and_render():
    ok = [Reachability("tcp", 22, "open"), Reachability("udp", 6000, "open")]
    bad = ports.ConnectResults(
        results=(
            Reachability("tcp", 22, "timeout"),
            Reachability("udp", 6000, "timeout"),
        )
    )
    listeners = {"b": ports.ListenerStatus(ready=True, udp_busy=(6000,))}
    matrix = reachability_matrix({("a", "b"): ok, ("b", "a"): bad}, listeners)
    assert matrix.outcome("a", "b", "tcp", 22) == "open"
    assert matrix.outcome("b", "a", "udp", 6000) == "timeout"
    assert matrix.outcome("a", "b", "tcp", 80) is None
    assert matrix.findings == (
        "b -> a tcp 22: timeout (no answer: dropped by a security group, network ACL or firewall)",
        "b -> a udp 6000: timeout (no answer: dropped by a security group, network ACL or "
        "firewall)",
    )
    lines = matrix.render().splitlines()
    assert lines[0].split() == ["source", "->", "target", "tcp", "22", "udp", "6000"]
    assert lines[2].split()[-2:] == ["timeout", "timeout"]


def test_matrix_listener_context():
    listeners = {
        "b": ports.ListenerStatus(
            ready=True, udp_busy=(53,), failed=(("tcp", 80, "Permission denied"),)
        )
    }
    results = {
        ("a", "b"): [
            Reachability("udp", 53, "timeout"),
            Reachability("tcp", 80, "refused"),
            Reachability("tcp", 81, "error", "No route to host"),
        ]
    }
    findings = reachability_matrix(results, listeners).findings
    assert findings == (
        "a -> b udp 53: timeout (inconclusive: port held by another service that does not echo)",
        "a -> b tcp 80: refused (not tested: listener could not bind: Permission denied)",
        "a -> b tcp 81: error: No route to host",
    )


# --- the real scripts on loopback ------------------------------------------------------


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_listener(tcp: list[int], udp: list[int], lifetime: float = 20, idle: float = 0):
    cmd = ports.listener_command("127.0.0.1", tcp, udp, lifetime_s=lifetime, idle_s=idle)
    proc = subprocess.Popen(
        ["sh", "-c", cmd], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    lines = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("READY"):
            break
    return proc, lines


def _stop(proc: subprocess.Popen) -> None:
    """End the listener's own process group (sh and its python3 child)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=10)
    if proc.stdout:
        proc.stdout.close()


def test_listener_and_connector_on_loopback():
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)  # an existing service, like sshd on 22
    busy_port = busy.getsockname()[1]
    tcp_open, udp_open = _free_port(socket.SOCK_STREAM), _free_port(socket.SOCK_DGRAM)
    tcp_closed, udp_closed = _free_port(socket.SOCK_STREAM), _free_port(socket.SOCK_DGRAM)
    proc, head = _start_listener([busy_port, tcp_open], [udp_open])
    try:
        status = ports.parse_listener("".join(head))
        assert status.ready, head
        assert status.tcp_busy == (busy_port,)
        assert status.tcp_bound == (tcp_open,) and status.udp_bound == (udp_open,)
        flows = [
            ("tcp", busy_port),
            ("tcp", tcp_open),
            ("udp", udp_open),
            ("tcp", tcp_closed),
            ("udp", udp_closed),
        ]
        started = time.monotonic()
        out = subprocess.run(
            ["sh", "-c", ports.connect_command("127.0.0.1", flows, timeout_s=1)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout
        assert time.monotonic() - started < 5
        result = ports.parse_connect(out)
        assert result.problems == ()
        assert [(r.proto, r.port, r.outcome) for r in result.results] == [
            ("tcp", busy_port, "open"),
            ("tcp", tcp_open, "open"),
            ("udp", udp_open, "open"),
            ("tcp", tcp_closed, "refused"),
            ("udp", udp_closed, "refused"),
        ]
    finally:
        _stop(proc)
        busy.close()


def test_listener_exits_when_idle():
    proc, head = _start_listener([_free_port(socket.SOCK_STREAM)], [], lifetime=30, idle=0.5)
    try:
        rest = proc.communicate(timeout=10)[0]
    finally:
        _stop(proc)
    status = ports.parse_listener("".join(head) + rest)
    assert status.ready
    assert (status.exit_reason, status.served) == ("idle", 0)


def test_connector_many_silent_ports_run_concurrently():
    # 20 UDP ports that are bound but never answer: each flow waits its full timeout,
    # so only concurrency keeps the total near one timeout rather than twenty
    silent = []
    for _ in range(20):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        silent.append(s)
    try:
        flows = [("udp", s.getsockname()[1]) for s in silent]
        started = time.monotonic()
        out = subprocess.run(
            ["sh", "-c", ports.connect_command("127.0.0.1", flows, timeout_s=1)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout
        elapsed = time.monotonic() - started
    finally:
        for s in silent:
            s.close()
    result = ports.parse_connect(out)
    assert [r.outcome for r in result.results] == ["timeout"] * 20
    assert result.problems == ()
    assert elapsed < 12  # in parallel: one after the other would take 20 s
