"""What `lab up` puts on every node: emulated eRDMA tools, metadata service, tuned sysctls."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab.state import METADATA_ADDRESS, LabState
from pytest_hpcnet.probes.metadata import metadata_command, parse_metadata
from pytest_hpcnet.probes.rdma import ibv_devinfo_command, rdma_link_command
from pytest_hpcnet.probes.rdma_parsers import parse_ibv_devinfo, parse_rdma_link
from pytest_hpcnet.transport.fanout import Transport
from tests.corpus import sample

pytestmark = pytest.mark.lab

SAMPLE = sample("ibv_devinfo", "erdma-h20-stepmesh-pr32-erdma_0-block.txt")
BASE = f"http://{METADATA_ADDRESS}/latest"
TTL = "X-aliyun-ecs-metadata-token-ttl-seconds: 60"


def ns_run(namespace: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ip", "netns", "exec", namespace, *argv], capture_output=True, text=True, timeout=20
    )


def curl(namespace: str, *args: str) -> tuple[int, str]:
    """(http code, body) of one curl run inside a node namespace."""
    out = ns_run(namespace, "curl", "-s", "-m", "3", "-w", "\n%{http_code}", *args).stdout
    body, _, code = out.rpartition("\n")
    return int(code or 0), body


@pytest.fixture
def ssh(lab_inventory):
    transport = Transport(lab_inventory)
    yield lambda node, command: transport.run(node, command, timeout_s=30)
    transport.close()


def test_metadata_answers_each_node_with_its_own_values(lab4):
    state = LabState.load(Path(lab4.state_dir))
    for node in state.nodes[:2]:
        ns = node.namespace
        assert curl(ns, f"{BASE}/meta-data/private-ipv4") == (200, node.address)
        assert curl(ns, f"{BASE}/meta-data/hostname") == (200, node.name)
        assert curl(ns, f"{BASE}/meta-data/instance-id") == (200, node.instance_id)
        assert curl(ns, f"{BASE}/meta-data/vswitch-id") == (200, node.vswitch_id)
        assert curl(ns, f"{BASE}/meta-data/instance/instance-type") == (
            200,
            "ecs.hpcnet-lab.emulated",
        )
        code, listing = curl(ns, f"{BASE}/meta-data/")
        assert code == 200 and {"vswitch-id", "zone-id", "instance/"} <= set(listing.split())
        assert curl(ns, f"{BASE}/meta-data/no-such-key")[0] == 404


def test_metadata_token_mode(lab4):
    ns = LabState.load(Path(lab4.state_dir)).node("node03").namespace
    code, token = curl(ns, "-X", "PUT", "-H", TTL, f"{BASE}/api/token")
    assert code == 200 and len(token) > 20
    header = f"X-aliyun-ecs-metadata-token: {token}"
    assert curl(ns, "-H", header, f"{BASE}/meta-data/zone-id") == (200, "cn-lab-a")
    assert (
        curl(ns, "-H", "X-aliyun-ecs-metadata-token: forged", f"{BASE}/meta-data/zone-id")[0] == 401
    )
    assert curl(ns, "-X", "PUT", f"{BASE}/api/token")[0] == 400  # TTL header missing


def test_metadata_probe_over_ssh_uses_token(lab4, ssh):
    result = ssh("node02", metadata_command())
    facts = parse_metadata(result.stdout)
    assert facts.token_used is True, result.stdout
    assert facts.private_ipv4 == "198.18.0.12"
    assert facts.vpc_id == "vpc-lab0001" and facts.region_id == "cn-lab"
    assert facts.instance_type == "ecs.hpcnet-lab.emulated" and not facts.missing


def test_metadata_is_served_in_node_namespaces_only(lab4):
    state = LabState.load(Path(lab4.state_dir))
    host_addrs = subprocess.run(["ip", "-j", "addr"], capture_output=True, text=True).stdout
    assert METADATA_ADDRESS not in host_addrs
    route = subprocess.run(
        ["ip", "route", "get", METADATA_ADDRESS], capture_output=True, text=True
    ).stdout
    assert not route.startswith("local"), route  # the host would not answer it itself
    host_ns = os.stat("/proc/self/ns/net").st_ino
    for node in state.nodes:
        pid = node.pids["metadata"]
        server_ns = os.stat(f"/proc/{pid}/ns/net").st_ino
        assert server_ns == os.stat(f"/run/netns/{node.namespace}").st_ino != host_ns
        assert (
            f"{METADATA_ADDRESS}/32"
            in subprocess.run(
                ["ip", "-n", node.namespace, "-o", "addr", "show", "lo"],
                capture_output=True,
                text=True,
            ).stdout
        )


def test_emulated_tools_parse_as_erdma(lab4, ssh):
    devinfo = parse_ibv_devinfo(ssh("node01", ibv_devinfo_command()).stdout)
    assert devinfo.names() == ("erdma_0",) and not devinfo.problems
    device = devinfo.device("erdma_0")
    assert (device.vendor_id, device.vendor_part_id, device.phys_port_cnt) == ("0x1ded", "4223", 1)
    assert device.node_guid == "0216:3eff:fe18:000b"  # EUI-64 of eth0's MAC 00:16:3e:18:00:0b
    port = device.port(1)
    assert (port.state, port.reported_state, port.active_mtu, port.link_layer) == (
        "ACTIVE",
        "PORT_ACTIVE",
        4096,
        "Ethernet",
    )
    link = parse_rdma_link(ssh("node01", rdma_link_command()).stdout)
    assert link.names() == ("erdma_0",)
    lport = link.device("erdma_0").port(1)
    assert (lport.state, lport.physical_state, lport.netdev) == ("ACTIVE", "LINK_UP", "eth0")


def test_emulated_output_is_the_real_layout(lab4, ssh):
    out = ssh("node01", "ibv_devinfo").stdout
    assert out.startswith("hca_id:\terdma_0\n\ttransport:\t\t\teRDMA (0)\n")
    assert out.endswith("\t\t\tlink_layer:\t\tEthernet\n\n")
    # the published block is the same text with tabs expanded
    ours = out.expandtabs().replace("0216:3eff:fe18:000b", "GUID").rstrip("\n")
    theirs = SAMPLE.read_text().replace("0216:3eff:fe2f:3775", "GUID").rstrip("\n")
    assert ours == theirs
    link = ssh("node01", "rdma link show erdma_0/1; rdma -j link").stdout.splitlines()
    assert link[0] == "link erdma_0/1 state ACTIVE physical_state LINK_UP netdev eth0 "
    assert link[1].startswith('[{"ifindex":0,"ifname":"erdma_0","port":1,"state":"ACTIVE"')
    wrong = ssh("node01", "rdma link show mlx5_0; echo rc=$?; ibv_devinfo -d mlx5_0; echo rc=$?")
    assert "Wrong device name" in wrong.stdout + wrong.stderr
    assert "rc=1" in wrong.stdout and "rc=255" in wrong.stdout
    helptext = ssh("node01", "ibv_devinfo --help; rdma -h").stdout.splitlines()
    assert helptext[0].startswith("hpcnet lab emulation of `ibv_devinfo`")
    assert any(line.startswith("hpcnet lab emulation of iproute2 `rdma`") for line in helptext)


def test_tools_are_on_node_path_only(lab4, ssh):
    assert ssh("node02", "command -v ibv_devinfo; command -v rdma").stdout.split() == [
        "/usr/local/sbin/ibv_devinfo",
        "/usr/local/sbin/rdma",
    ]
    assert shutil.which("ibv_devinfo") is None
    assert not Path("/usr/local/sbin/ibv_devinfo").exists()
    assert " /usr/local/sbin " not in Path("/proc/self/mountinfo").read_text()


def test_sysctls_tuned_per_namespace_and_expected_by_inventory(lab4):
    state = LabState.load(Path(lab4.state_dir))
    keys = list(state.sysctl)
    assert keys[:3] == ["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_window_scaling"]
    for node in state.nodes:
        out = ns_run(node.namespace, "sysctl", "-n", *keys).stdout.splitlines()
        assert [" ".join(v.split()) for v in out] == list(state.sysctl.values())
    assert state.sysctl["net.ipv4.tcp_rmem"] == "4096 87380 16777216"
    expect = load_inventory(lab4.inventory).expect.sysctl
    assert set(expect) == set(state.sysctl)  # no global-only key such as net.core.rmem_max
    assert expect["net.ipv4.tcp_rmem"].mode == "min"
    assert (
        str(expect["net.ipv4.tcp_congestion_control"].value)
        == state.sysctl["net.ipv4.tcp_congestion_control"]
    )
