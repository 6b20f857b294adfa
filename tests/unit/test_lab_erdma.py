"""The lab's eRDMA-depth emulation without a lab: devices per node, faults, tool output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_hpcnet.lab import faults
from pytest_hpcnet.lab.emulation import install_tools, rdma_devices, set_eris, write_rdma_state
from pytest_hpcnet.lab.state import LabNode, LabState
from pytest_hpcnet.lab.system import LabError
from pytest_hpcnet.probes.counters import parse_rdma_counters
from pytest_hpcnet.probes.erdma import parse_gid_tables
from pytest_hpcnet.probes.nccl_debug import parse_nccl_debug
from pytest_hpcnet.probes.rdma_parsers import parse_ibv_devinfo


def _node(**faults_: str) -> LabNode:
    return LabNode("node01", "198.18.0.11", 8500, mac="00:16:3e:18:00:0b", faults=dict(faults_))


def test_one_eri_unless_asked():
    assert [d["name"] for d in rdma_devices(_node())] == ["erdma_0"]
    two = rdma_devices(_node(), 2)
    assert [(d["name"], d["numa_node"]) for d in two] == [("erdma_0", 0), ("erdma_1", 1)]
    assert two[1]["ports"][0]["gids"] == ["fe80::216:3eff:fe18:b", "::ffff:198.18.0.11"]


def test_faults_change_one_device():
    two = rdma_devices(_node(**{"eri-down": "erdma_1", "gid-shift": "erdma_0"}), 2)
    assert [d["ports"][0]["state"] for d in two] == ["ACTIVE", "DOWN"]
    assert two[0]["ports"][0]["gids"][2] == "::ffff:198.18.0.11"
    assert len(two[1]["ports"][0]["gids"]) == 2


@pytest.fixture
def lab_dir(tmp_path) -> Path:
    state = LabState(state_dir=str(tmp_path), inventory="lab.yaml", nodes=[_node()])
    install_tools(state)
    write_rdma_state(state, state.nodes[0])
    state.save()
    return tmp_path


def _tool(lab_dir: Path, *argv: str, merge: bool = False, **env: str) -> str:
    """The tool's stdout (with its stderr after `merge`, as `2>&1`)."""
    full = {**os.environ, "HPCNET_LAB_NODE": "node01", "HPCNET_LAB_STATE": str(lab_dir), **env}
    bin_dir = lab_dir / "bin"
    return subprocess.run(
        [sys.executable, str(bin_dir / argv[0]), *argv[1:]],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge else subprocess.PIPE,
        text=True,
        env=full,
        cwd=bin_dir,
        timeout=60,
    ).stdout


def test_fault_arguments_are_checked_and_healed(lab_dir):
    with pytest.raises(LabError, match="expected one of erdma_0"):
        faults.inject("eri-down", "node01", "erdma_1", lab_dir)  # one ERI only
    assert set_eris(lab_dir, 2) == 1
    assert faults.inject("gid-shift", "node01", None, lab_dir) == "node01: gid-shift=erdma_1"
    tables = parse_gid_tables(_tool(lab_dir, "ibv_devinfo", "-v"))
    assert (tables.choose("erdma_0").index, tables.choose("erdma_1").index) == (1, 2)
    faults.heal("all", lab_dir)
    assert parse_gid_tables(_tool(lab_dir, "ibv_devinfo", "-v")).choose("erdma_1").index == 1


@pytest.mark.parametrize(
    ("kind", "arg"), [(None, None), ("eri-down", "erdma_1"), ("no-rdma", None)]
)
def test_ibv_devinfo_v_reads_as_the_plain_call(lab_dir, kind, arg):
    """The facts script runs the lab's `ibv_devinfo -v` only: the devices, ports and "No IB
    devices found" it prints read as the plain call's (stderr merged, as the facts do)."""
    set_eris(lab_dir, 2)
    if kind:
        faults.inject(kind, "node01", arg, lab_dir)
    plain = parse_ibv_devinfo(_tool(lab_dir, "ibv_devinfo", merge=True))
    verbose = parse_ibv_devinfo(_tool(lab_dir, "ibv_devinfo", "-v", merge=True))
    assert verbose == plain and not plain.problems
    assert len(plain.devices) == (0 if kind == "no-rdma" else 2)
    assert plain.no_devices is (kind == "no-rdma")


def test_nccl_info_lines_and_socket_fault(lab_dir):
    set_eris(lab_dir, 2)
    out = _tool(lab_dir, "all_reduce_perf", "-b", "1K", "-e", "1K", NCCL_DEBUG="INFO")
    host = parse_nccl_debug(out).host("node01")
    assert host.networks == ("IB",) and [d.name for d in host.ib_devices] == ["erdma_0", "erdma_1"]
    only = _tool(lab_dir, "all_reduce_perf", NCCL_DEBUG="INFO", NCCL_IB_HCA="=erdma_1")
    assert [d.name for d in parse_nccl_debug(only).host("node01").ib_devices] == ["erdma_1"]
    assert "NCCL INFO" not in _tool(lab_dir, "all_reduce_perf", NCCL_DEBUG="WARN")
    faults.inject("nccl-socket", "node01", None, lab_dir)
    log = parse_nccl_debug(_tool(lab_dir, "all_reduce_perf", NCCL_DEBUG="INFO"))
    assert log.socket_hosts == ("node01",) and log.host("node01").ib_missing


def test_counters_and_rate_limit_drops(lab_dir):
    set_eris(lab_dir, 2)
    faults.inject("rate-limit-drops", "node01", "erdma_0", lab_dir)
    code = (
        "import hpcnet_lab_rdma as lab; "
        "lab.count_traffic('erdma_0', tx=8192); lab.count_traffic('erdma_1', rx=4096)"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        cwd=lab_dir / "bin",
        env={**os.environ, "HPCNET_LAB_NODE": "node01", "HPCNET_LAB_STATE": str(lab_dir)},
        check=True,
    )
    snap = parse_rdma_counters(_tool(lab_dir, "rdma", "statistic", "show"))
    assert snap.source == "rdma statistic" and not snap.problems
    assert snap.values["erdma_0/1"]["hw_tx_bytes_cnt"] == 8192
    assert snap.values["erdma_0/1"]["hw_bps_limit_drop_cnt"] == 1
    assert snap.values["erdma_1/1"]["hw_rx_bytes_cnt"] == 4096
    assert snap.values["erdma_1/1"]["hw_rx_bps_limit_drop_cnt"] == 0
    as_json = parse_rdma_counters(_tool(lab_dir, "rdma", "-j", "statistic", "show"))
    assert as_json.values == snap.values


def test_all_reduce_perf_writes_nccl_tests_json(lab_dir):
    """`-J` as nccl-tests 2.17.3+: rank 0 writes the JSON file (the real file's keys), says
    where, and takes `.0` when the path exists; `-h` lists the option."""
    from pytest_hpcnet.campaigns.nccl.output import offers_json, written_path
    from pytest_hpcnet.probes.nccl import NcclExpected
    from pytest_hpcnet.probes.nccl_json import parse_nccl_json
    from tests.corpus import sample

    assert offers_json(_tool(lab_dir, "all_reduce_perf", "-h"))
    path = str(lab_dir / "ar.json")
    out = _tool(lab_dir, "all_reduce_perf", "-b", "1K", "-e", "4K", "-f", "2", "-J", path)
    assert written_path(out, path) == (path, None)
    real = json.loads(sample("nccl_allreduce", "h200-nccl-tests-2.19.6-g1-json.json").read_text())
    mine = json.loads(Path(path).read_text())
    assert mine.keys() == real.keys() and mine["config"].keys() == real["config"].keys()
    assert mine["results"][0].keys() == real["results"][0].keys()
    r = parse_nccl_json(Path(path).read_text(), NcclExpected(max_bytes=4096, ranks=1, nodes=1))
    assert r.ok and r.max_size_bytes == 4096 and r.hosts == ("node01",)
    again = _tool(lab_dir, "all_reduce_perf", "-b", "1K", "-e", "1K", "-J", path)
    assert written_path(again, path) == (path + ".0", None)
