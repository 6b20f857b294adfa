"""eRDMA in depth on the lab (issue 16): two ERIs per node, and each fault flagged by the
pure parsers and judges at exactly the faulted node and device.

The second ERI is opt-in (the lab profile and the static suite expect one): the fixture
switches the running lab to two and back, and heals every fault, even on failure.
"""

from __future__ import annotations

import statistics
import subprocess
import threading
import time
from pathlib import Path

import pytest

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.lab import faults
from pytest_hpcnet.lab.benchmarks import plm_rsh_args
from pytest_hpcnet.lab.emulation import set_eris
from pytest_hpcnet.lab.state import LabState
from pytest_hpcnet.probes.counters import counter_delta, parse_rdma_counters, rdma_counters_command
from pytest_hpcnet.probes.erdma import parse_gid_tables
from pytest_hpcnet.probes.nccl import NcclExpected, parse_nccl
from pytest_hpcnet.probes.nccl_debug import parse_nccl_debug
from pytest_hpcnet.probes.perftest import PerftestOptions, client_command, server_command
from pytest_hpcnet.probes.perftest_parsers import parse_bandwidth
from pytest_hpcnet.probes.rdma import ibv_devinfo_command
from pytest_hpcnet.probes.rdma_parsers import parse_ibv_devinfo
from pytest_hpcnet.requirements.erdma import judge_eri_bw
from pytest_hpcnet.requirements.erdma_judges import (
    judge_counters,
    judge_gid_index,
    judge_nccl_transport,
    judge_rdma_traffic,
)
from pytest_hpcnet.transport.fanout import Transport

pytestmark = pytest.mark.lab

NODES = ("node01", "node02", "node03", "node04")
ERIS = ("erdma_0", "erdma_1")


@pytest.fixture(scope="module")
def lab2(lab4):
    """The session lab with two ERIs per node for this module; one again afterwards."""
    state_dir = Path(lab4.state_dir)
    set_eris(state_dir, 2)
    try:
        yield LabState.load(state_dir)
    finally:
        faults.heal("all", state_dir)
        set_eris(state_dir, 1)


@pytest.fixture
def lab(lab2, lab_inventory):
    """(state, transport, inject); heals every node afterwards."""
    transport = Transport(lab_inventory)
    state_dir = Path(lab2.state_dir)

    def inject(kind: str, node: str, arg: str | None = None) -> str:
        return faults.inject(kind, node, arg, state_dir)

    try:
        yield lab2, transport, inject
    finally:
        transport.close()
        faults.heal("all", state_dir)


def _gid_findings(transport, used: int) -> list:
    out = []
    for node in NODES:
        text = transport.run(node, ibv_devinfo_command(verbose=True), 30).stdout
        tables = parse_gid_tables(text)
        out += [judge_gid_index(node, dev, tables, used) for dev in ERIS]
    return out


def test_two_eris_and_gid_shift_names_the_device(lab):
    _, transport, inject = lab
    for node in NODES:
        devinfo = parse_ibv_devinfo(transport.run(node, ibv_devinfo_command(), 30).stdout)
        assert devinfo.names() == ERIS and not devinfo.problems
    healthy = _gid_findings(transport, used=1)
    assert all(f.ok for f in healthy), [f.reason for f in healthy if not f.ok]
    inject("gid-shift", "node04")  # default: the last ERI, erdma_1 (on eth1: 198.18.1.14)
    bad = [f for f in _gid_findings(transport, used=1) if not f.ok]
    assert [f.subject for f in bad] == ["node04 erdma_1"]
    assert bad[0].reason == (
        "node04 erdma_1: GID index 1 is 2001:db8:18::2; the IPv4 GID 198.18.1.14 is at index 2"
    )


def test_eri_down_names_the_node_and_device(lab):
    state, transport, inject = lab
    inject("eri-down", "node03", "erdma_1")
    down = []
    for node in NODES:
        devinfo = parse_ibv_devinfo(transport.run(node, ibv_devinfo_command(), 30).stdout)
        down += [f"{node} {d.name}" for d in devinfo.devices if d.port(1).state != "ACTIVE"]
    assert down == ["node03 erdma_1"]
    result = _bw_pair(state, transport, "node04", "node03", "erdma_1", 18641)
    per_eri = Expectations(erdma={"per_eri_gbps": 1.0, "bw_fraction": 0.5})
    finding = judge_eri_bw("node03", "erdma_1", result.avg_gbps, None, per_eri)
    assert not finding.ok and finding.reason == "node03 erdma_1: no bandwidth measured"


def _listening(state: LabState, node: str, port: int) -> bool:
    ns = state.node(node).namespace
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "ss", "-Htln", f"sport = :{port}"],
        capture_output=True,
        text=True,
    ).stdout
    return bool(out.strip())


def _bw_pair(state, transport, client: str, server: str, device: str, port: int):
    """One ib_write_bw pair on `device` of both nodes (server, wait, client)."""
    opts = PerftestOptions(device=device, gid_index=1, port=port, qps=2, duration_s=1)
    box: dict = {}
    thread = threading.Thread(
        target=lambda: box.update(s=transport.run(server, server_command(opts), 60))
    )
    thread.start()
    deadline = time.monotonic() + 20
    while thread.is_alive() and not _listening(state, server, port):
        assert time.monotonic() < deadline, "server never listened"
        time.sleep(0.1)
    target = state.node(server).address
    client_run = transport.run(client, client_command(opts, target), 60)
    thread.join(70)
    return parse_bandwidth(client_run.stdout + client_run.stderr)


def _counters(transport) -> dict:
    return {
        n: parse_rdma_counters(transport.run(n, rdma_counters_command(), 30).stdout) for n in NODES
    }


def test_eri_slow_and_rate_limit_drops_name_the_device(lab):
    state, transport, inject = lab
    inject("eri-slow", "node02", "erdma_1@100mbit")
    inject("rate-limit-drops", "node03", "erdma_0")
    before = _counters(transport)
    pairs = [("node01", "node02"), ("node04", "node03")]
    measured = {}
    for i, (client, server) in enumerate(pairs):
        for j, device in enumerate(ERIS):
            result = _bw_pair(state, transport, client, server, device, 18651 + 2 * i + j)
            assert result.ok, result.error
            measured[(server, device)] = result.avg_gbps
    after = _counters(transport)
    # lab per-ERI figure: the median of this round (calibrated, as on a real cluster)
    figure = statistics.median(measured.values())
    per_eri = Expectations(erdma={"per_eri_gbps": figure, "bw_fraction": 0.5})
    slow = [judge_eri_bw(node, dev, gbps, None, per_eri) for (node, dev), gbps in measured.items()]
    assert [f.reason.split(":")[0] for f in slow if not f.ok] == ["node02 erdma_1"], measured
    assert measured[("node02", "erdma_1")] < 0.15
    found = [f for n in NODES for f in judge_counters(n, counter_delta(before[n], after[n]))]
    assert [f.subject for f in found if not f.ok] == ["node03 erdma_0"]
    bad = next(f for f in found if not f.ok)
    assert "hw_bps_limit_drop_cnt +" in bad.reason or "hw_rx_bps_limit_drop_cnt +" in bad.reason
    traffic = [
        f
        for n in NODES
        for f in judge_rdma_traffic(n, counter_delta(before[n], after[n]), ERIS, 100_000)
    ]
    assert all(f.ok for f in traffic), [f.reason for f in traffic if not f.ok]


def _allreduce_info(state: LabState, transport) -> tuple[str, str]:
    """(INFO lines, table output) of a 4-rank all-reduce, INFO kept out of the table's stream
    in NCCL_DEBUG_FILE (one file per process, read back), as the NCCL campaign runs it."""
    hostfile = state.root / "hostfile-erdma-depth"
    hostfile.write_text("".join(f"{state.node(n).address} slots=1\n" for n in NODES))
    logs = "/tmp/hpcnet-erdma-depth-test.debug"
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_HCA": "erdma",
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_DEBUG_FILE": f"{logs}.%h.%p",
    }
    argv = ["mpirun", "--allow-run-as-root", "-np", "4", "--hostfile", str(hostfile)]
    argv += ["--map-by", "ppr:1:node"]
    for key, value in env.items():
        argv += ["-x", f"{key}={value}"]
    argv += ["--mca", "plm_rsh_args", f"'{plm_rsh_args(state)}'"]
    argv += ["all_reduce_perf", "-b", "1M", "-e", "1M", "-f", "2", "-g", "1", "-n", "2", "-w", "1"]
    result = transport.run("node01", " ".join(argv), 300)
    info = transport.run("node01", f"cat {logs}.*; rm -f {logs}.*", 60)
    return info.stdout, result.stdout + "\n" + result.stderr


def test_nccl_socket_fallback_names_the_node_and_its_counters_stay(lab):
    state, transport, inject = lab
    inject("nccl-socket", "node02")
    before = _counters(transport)
    info, table = _allreduce_info(state, transport)
    after = _counters(transport)
    parsed = parse_nccl(table, NcclExpected(max_bytes=2**20, ranks=4, nodes=4))
    assert parsed.ok, table[-2000:]  # the all-reduce itself completes: the silent fallback
    log = parse_nccl_debug(info)
    found = judge_nccl_transport(log, NODES, "IB", device_glob="erdma_*")
    assert [f.subject for f in found if not f.ok] == ["node02"], [f.reason for f in found]
    assert "NCCL used Socket (NET/IB : No device found), IB expected" in found[1].reason
    assert log.host("node01").ib_devices[1].name == "erdma_1"
    moved = {
        n: judge_rdma_traffic(n, counter_delta(before[n], after[n]), ERIS, 100_000) for n in NODES
    }
    assert [f.subject for n in NODES for f in moved[n] if not f.ok] == [
        "node02 erdma_0",
        "node02 erdma_1",
    ]
