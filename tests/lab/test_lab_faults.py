"""`hpcnet lab fault|heal`: every fault has a real effect on the node, and heal undoes it.

The lab is shared with other tests: each test heals what it injects, even on failure.
"""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import time
from pathlib import Path

import pytest

from pytest_hpcnet.cli import main
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.lab import fault_actions, faults, links
from pytest_hpcnet.lab.state import LabState
from pytest_hpcnet.probes.links import parse_ip_json
from pytest_hpcnet.probes.ports import (
    connect_command,
    listener_command,
    parse_connect,
    parse_listener,
)
from pytest_hpcnet.probes.rdma import ibv_devinfo_command
from pytest_hpcnet.probes.rdma_parsers import parse_ibv_devinfo, parse_rdma_link
from pytest_hpcnet.requirements.host import judge_nic_counters
from pytest_hpcnet.transport.fanout import Transport

pytestmark = pytest.mark.lab

META = "http://100.100.100.200/latest/meta-data"


def ns_run(namespace: str, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ip", "netns", "exec", namespace, *argv], capture_output=True, text=True, timeout=timeout
    )


def eth0(namespace: str) -> dict:
    out = subprocess.run(
        ["ip", "-n", namespace, "-s", "-j", "link", "show", "eth0"], capture_output=True, text=True
    ).stdout
    return json.loads(out)[0]


def curl(namespace: str, url: str, *args: str) -> tuple[int, str]:
    out = ns_run(namespace, "curl", "-s", "-m", "3", "-w", "\n%{http_code}", *args, url).stdout
    body, _, code = out.rpartition("\n")
    return int(code or 0), body


@pytest.fixture
def lab(lab4):
    """(state dir, fault injector); heals all nodes afterwards."""
    state_dir = Path(lab4.state_dir)

    def inject(kind: str, node: str, arg: str | None = None) -> str:
        return faults.inject(kind, node, arg, state_dir)

    yield state_dir, inject
    faults.heal("all", state_dir)


@pytest.fixture
def ssh(lab_inventory):
    transport = Transport(lab_inventory)
    yield lambda node, command: transport.run(node, command, timeout_s=30)
    transport.close()


def test_no_rdma_and_port_down_change_what_the_tools_print(lab, ssh):
    state_dir, inject = lab
    inject("no-rdma", "node03")
    inject("port-down", "node04")
    gone = ssh("node03", ibv_devinfo_command())
    assert parse_ibv_devinfo(gone.stdout).no_devices and "No IB devices found" in gone.stdout
    assert ssh("node03", "rdma link show").stdout == ""
    down = parse_ibv_devinfo(ssh("node04", ibv_devinfo_command()).stdout).device("erdma_0")
    assert (down.port(1).state, down.port(1).reported_state) == ("DOWN", "PORT_DOWN")
    link = parse_rdma_link(ssh("node04", "rdma link show").stdout).device("erdma_0").port(1)
    assert (link.state, link.physical_state) == ("DOWN", "DISABLED")
    assert faults.heal("node03", state_dir) == ["node03: no-rdma"]
    assert faults.heal("node04", state_dir) == ["node04: port-down"]
    for node in ("node03", "node04"):
        port = parse_ibv_devinfo(ssh(node, ibv_devinfo_command()).stdout).device("erdma_0").port(1)
        assert port.state == "ACTIVE"


def test_mtu_fault_is_real_and_heals(lab, ssh):
    state_dir, inject = lab
    ping = ("ping", "-M", "do", "-s", "8472", "-c", "1", "-W", "2", "198.18.0.11")
    assert ns_run("hx-node02", *ping).returncode == 0
    inject("mtu", "node01")
    assert eth0("hx-node01")["mtu"] == 1500
    assert ns_run("hx-node02", *ping).returncode != 0  # node01 drops the jumbo frame
    port = parse_ibv_devinfo(ssh("node01", ibv_devinfo_command()).stdout).device("erdma_0").port(1)
    assert port.active_mtu == 1024  # erdma follows the netdev MTU
    inject("mtu", "node01", "4000")
    faults.heal("node01", state_dir)
    assert eth0("hx-node01")["mtu"] == 8500  # the value before the first fault
    assert ns_run("hx-node02", *ping).returncode == 0


def test_block_and_reject_answer_as_a_firewall_does(lab):
    state_dir, inject = lab
    tcp, udp = (18515, 18516), (4791, 4792)
    command = listener_command("198.18.0.11", tcp, udp, lifetime_s=40)
    listener = subprocess.Popen(
        ["ip", "netns", "exec", "hx-node01", "sh", "-c", command],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([listener.stdout], [], [], 10)
        assert ready and parse_listener(listener.stdout.readline()).ready

        def outcomes() -> dict[tuple[str, int], str]:
            flows = [("tcp", p) for p in tcp] + [("udp", p) for p in udp]
            text = ns_run("hx-node02", "sh", "-c", connect_command("198.18.0.11", flows, 1.5))
            return {(r.proto, r.port): r.outcome for r in parse_connect(text.stdout).results}

        assert set(outcomes().values()) == {"open"}
        inject("block", "node01", "tcp/18515")
        inject("reject", "node01", "tcp/18516")
        inject("block", "node01", "udp/4791")
        inject("reject", "node01", "udp/4792")
        rules = ns_run("hx-node01", "iptables", "-S", "HPCNET-LAB").stdout
        assert rules.count("hpcnet-lab fault") == 4
        assert outcomes() == {
            ("tcp", 18515): "timeout",
            ("tcp", 18516): "refused",
            ("udp", 4791): "timeout",
            ("udp", 4792): "refused",
        }
        healed = faults.heal("node01", state_dir)
        assert len(healed) == 4
        assert "HPCNET-LAB" not in ns_run("hx-node01", "iptables", "-S").stdout
        assert set(outcomes().values()) == {"open"}
    finally:
        listener.kill()
        listener.wait(5)


def test_metadata_faults_apply_without_restart(lab):
    state_dir, inject = lab
    inject("vswitch", "node02")
    inject("zone", "node02", "cn-lab-z")
    inject("imds-token", "node03")
    assert curl("hx-node02", f"{META}/vswitch-id") == (200, fault_actions.DEFAULT_VSWITCH)
    assert curl("hx-node02", f"{META}/zone-id") == (200, "cn-lab-z")
    assert curl("hx-node01", f"{META}/vswitch-id") == (200, "vsw-lab0001")
    assert curl("hx-node03", f"{META}/zone-id")[0] == 403
    ttl = ("-X", "PUT", "-H", "X-aliyun-ecs-metadata-token-ttl-seconds: 30")
    token = curl("hx-node03", "http://100.100.100.200/latest/api/token", *ttl)[1]
    header = ("-H", f"X-aliyun-ecs-metadata-token: {token}")
    assert curl("hx-node03", f"{META}/zone-id", *header) == (200, "cn-lab-a")
    faults.heal("all", state_dir)
    assert curl("hx-node02", f"{META}/vswitch-id") == (200, "vsw-lab0001")
    assert curl("hx-node02", f"{META}/zone-id") == (200, "cn-lab-a")
    assert curl("hx-node03", f"{META}/zone-id") == (200, "cn-lab-a")


def test_sysctl_fault_sets_and_heals_inside_the_namespace(lab):
    state_dir, inject = lab
    host_before = Path("/proc/sys/net/ipv4/tcp_rmem").read_text()
    inject("sysctl", "node02")
    inject("sysctl", "node02", "net.ipv4.tcp_window_scaling=0")
    values = ns_run("hx-node02", "sysctl", "-n", "net.ipv4.tcp_rmem", "net.ipv4.tcp_window_scaling")
    assert [" ".join(v.split()) for v in values.stdout.splitlines()] == ["4096 131072 6291456", "0"]
    assert Path("/proc/sys/net/ipv4/tcp_rmem").read_text() == host_before
    faults.heal("node02", state_dir)
    values = ns_run("hx-node02", "sysctl", "-n", "net.ipv4.tcp_rmem", "net.ipv4.tcp_window_scaling")
    assert [" ".join(v.split()) for v in values.stdout.splitlines()] == ["4096 87380 16777216", "1"]


def test_nic_errors_are_real_counters_and_heal_recreates_the_link(lab, ssh):
    state_dir, inject = lab
    mac = eth0("hx-node04")["address"]
    inject("nic-errors", "node04")
    assert eth0("hx-node04")["stats64"]["rx"]["dropped"] >= links.DROP_FRAMES
    found = parse_ip_json(ssh("node04", "ip -j -s link show eth0").stdout)
    assert judge_nic_counters(found, "eth0", Expectations()).outcome == "fail"
    assert "nic-errors" in LabState.load(state_dir).node("node04").faults
    faults.heal("node04", state_dir)
    after = eth0("hx-node04")
    assert after["stats64"]["rx"]["dropped"] == 0
    assert (after["address"], after["mtu"]) == (mac, 8500)
    deadline = time.monotonic() + 10
    result = ssh("node04", "hostname")
    while not result.ok and time.monotonic() < deadline:
        time.sleep(0.2)
        result = ssh("node04", "hostname")
    assert result.stdout.strip() == "node04"  # sshd still answers on the re-created link


def test_cli_fault_status_heal_and_one_line_errors(lab4, capsys):
    state = ["--state-dir", lab4.state_dir]
    try:
        assert main(["lab", "fault", "sysctl", "node01", *state]) == 0
        assert main(["lab", "status", *state]) == 0
        out = capsys.readouterr().out
        assert "faults sysctl:net.ipv4.tcp_rmem=4096 131072 6291456" in out
        for argv, message in [
            (["fault", "cable-cut", "node01"], "unknown fault kind 'cable-cut'"),
            (["fault", "mtu", "node99"], "unknown node 'node99'"),
            (["fault", "block", "node01"], "fault block needs an argument"),
            (["fault", "reject", "node01", "sctp/1"], "expected PROTO/PORT"),
            (["heal", "node99"], "unknown node 'node99'"),
        ]:
            assert main(["lab", *argv, *state]) == 2
            err = capsys.readouterr().err
            assert err.startswith("hpcnet: ") and message in err and err.count("\n") == 1
    finally:
        with contextlib.suppress(Exception):
            faults.heal("all", Path(lab4.state_dir))
    assert main(["lab", "heal", "all", *state]) == 0
    assert "nothing to heal" in capsys.readouterr().out
