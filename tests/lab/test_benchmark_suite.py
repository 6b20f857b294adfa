"""The benchmark suite against the 4-node lab: clean when healthy; a throttled node fails the
bandwidth and NCCL checks, is named as the suspect, and nothing else fails; no benchmark
process is left on any node."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from pytest_hpcnet.lab import faults
from tests.conftest import popen_interruptible
from tests.lab.test_lab_bench_support import leftovers
from tests.lab.test_static_suite import failing, run_static

pytestmark = pytest.mark.lab


def run_benchmarks(inventory: str, reports: Path, output: list[str] | None = None):
    return run_static(inventory, reports, marker="benchmark", output=output)


def test_healthy_lab_passes_the_benchmarks(lab4, tmp_path):
    printed: list[str] = []
    code, records = run_benchmarks(lab4.inventory, tmp_path, printed)
    progress = "\n".join(ln for ln in printed[0].splitlines() if ln.startswith("hpcnet: "))
    for phase in ("ib_write_bw round 1/2: 2 pairs", "NCCL all_reduce_perf on 4 nodes", "fio"):
        assert f"hpcnet: {phase}" in progress, progress
    assert not failing(records), [r["message"] for r in failing(records)]
    assert code == 0
    checks = {r["check_id"] for r in records if r["verdict"] == "pass"}
    assert {"ib_write_bw", "ib_write_lat", "nccl_busbw", "cpfs"} <= checks
    assert leftovers(lab4) == []
    # the lab's all_reduce_perf offers -J: the result is its JSON file, kept in outputs/
    nccl = next(r for r in records if r["check_id"] == "nccl_busbw")
    read = [c for c in nccl["commands"] if c["command"].startswith("cat -- /tmp/hpcnet-nccl-")]
    assert len(read) == 1 and read[0]["node"] == "node01", nccl["commands"]
    outputs = next(tmp_path.iterdir()) / "outputs"
    kept = json.loads((outputs / f"{read[0]['output_digest']}.txt").read_text())
    assert len(kept["config"]["devices"]) == 4 and kept["results"]


def test_slow_node_is_named_the_suspect(lab4, tmp_path):
    faults.inject("slow", "node02", "50mbit", Path(lab4.state_dir))
    try:
        code, records = run_benchmarks(lab4.inventory, tmp_path)
    finally:
        faults.heal("node02", Path(lab4.state_dir))
    bad = failing(records)
    assert code == 1
    slowed = {"ib_write_bw", "erdma_eri_bw", "nccl_busbw", "perftest_localization"}
    assert {r["check_id"] for r in bad} == slowed
    for record in bad:
        assert "node02" in record["message"], record["message"]
        assert "node02" in record["suspect_nodes"], record
    assert leftovers(lab4) == []


def test_ctrl_c_during_a_round_stops_remote_tools_and_closes_the_bundle(lab4, tmp_path):
    import json
    import signal
    import sys
    import time

    root = Path(__file__).resolve().parents[2]
    proc = popen_interruptible(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "benchmark",
            "-k",
            "rdma_write_bandwidth",
            "-p",
            "no:cacheprovider",
            "--inventory",
            lab4.inventory,
            "--reports-dir",
            str(tmp_path),
        ],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any("ib_write_bw" in p for p in leftovers(lab4)):
        time.sleep(0.1)
    assert leftovers(lab4), "no perftest server ever started"
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and leftovers(lab4):
        time.sleep(0.2)
    assert leftovers(lab4) == []
    (run,) = list(tmp_path.iterdir())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["verdict"] == "INCOMPLETE"
    assert "INCOMPLETE" in (run / "certificate.html").read_text()
    assert "verdict: LAB INCOMPLETE" in out


def _healthy_nccl(lab4, **args):
    from pytest_hpcnet.inventory.loader import load_inventory
    from pytest_hpcnet.transport.fanout import Transport
    from tests.lab.test_lab_bench_collective import _allreduce

    transport = Transport(load_inventory(lab4.inventory))
    try:
        result, _ = _allreduce(load_inventory(lab4.inventory), transport, **args)
    finally:
        transport.close()
    assert result.ok and result.avg_busbw_gbs > 0, result.reason
    return result


def test_slow_nccl_rank_is_found_by_halving(lab4, tmp_path):
    """node03's rank is slow in NCCL only: the pairs blame nobody, NCCL on halves names it."""
    inventory = yaml.safe_load(Path(lab4.inventory).read_text())
    inventory["benchmarks"]["nccl"]["args"]["e"] = "4M"  # 1M..4M: each of the 5 runs is short
    # The emulated ring's speed is the machine's: bounds at a third of a healthy run here and
    # now hold whatever the load (a 10x slower rank falls far below, healthy halves stay above)
    healthy = _healthy_nccl(lab4, e="4M")
    inventory["expect"]["nccl"] = {
        "min_avg_busbw_gbs": round(healthy.avg_busbw_gbs / 3, 6),
        "min_busbw_largest_gbs": round(healthy.busbw_at_max_size_gbs / 3, 6),
    }
    smaller = tmp_path / "lab.yaml"
    smaller.write_text(yaml.safe_dump(inventory))
    reports = tmp_path / "reports"
    faults.inject("nccl-slow", "node03", "10", Path(lab4.state_dir))
    try:
        printed: list[str] = []
        code, records = run_static(
            str(smaller), reports, "-k", "bus_bandwidth", marker="benchmark", output=printed
        )
    finally:
        faults.heal("node03", Path(lab4.state_dir))
    bad = failing(records)
    assert code == 1
    assert {r["check_id"] for r in bad} == {"nccl_busbw"}, [r["message"] for r in bad]
    for record in bad:
        assert "suspect node: node03 (NCCL on halves, 4 runs)" in record["message"], record
        assert record["suspect_nodes"] == ["node03"]
    assert "hpcnet: NCCL bisection on 2 nodes (node01 .. node02): passes" in printed[0]
    assert "hpcnet: NCCL bisection on 2 nodes (node03 .. node01): fails" in printed[0]
    assert leftovers(lab4) == []


def test_rank_crash_after_the_table_fails_every_nccl_check(lab4, tmp_path):
    """Issue 23 (3): node03's rank segfaults once the whole table is out. Every NCCL check
    fails, naming the failure line (and so node03), and no other check fails."""
    inventory = yaml.safe_load(Path(lab4.inventory).read_text())
    inventory["benchmarks"]["nccl"]["args"].update(e="2M", n=2)
    smaller = tmp_path / "lab.yaml"
    smaller.write_text(yaml.safe_dump(inventory))
    faults.inject("nccl-crash", "node03", None, Path(lab4.state_dir))
    try:
        code, records = run_static(
            str(smaller), tmp_path / "reports", "-k", "nccl", marker="benchmark"
        )
    finally:
        faults.heal("node03", Path(lab4.state_dir))
    bad = failing(records)
    assert code == 1
    assert {r["check_id"] for r in bad} <= {"nccl_busbw", "nccl_transport"}, bad
    assert len([r for r in bad if r["check_id"] == "nccl_busbw"]) == 3, bad
    for record in bad:
        assert "node03: Test NCCL failure common.cu:1279" in record["message"], record
        assert "launcher:" in record["message"] and "exit status" in record["message"]
    assert leftovers(lab4) == []
