"""`hpcnet gate run`: pytest against the last good run, then `gate apply`, under the run
lock; exit codes as documented (0 healthy, 1 nodes failed, 2 usage, 3 incomplete, 5 locked)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

INVENTORY = """\
cluster: {name: nightly, region: cn-test}
ssh: {connect_timeout_s: 1, connect_retries: 1}
nodes:
  - {name: "n[1-3]", host: "198.18.0.[201-203]"}
actions:
  command: "ticket --node {node} --why {reasons}"
"""

SUITE = """\
import os, pytest

@pytest.mark.static
@pytest.mark.check("mtu", "jumbo frames")
def test_mtu(node, check):
    bad = os.environ.get("HX_BAD", "")
    if os.environ.get("HX_ERR") == node.name:
        raise RuntimeError("probe crashed")
    check.measure("mtu", 1500 if node.name == bad else 8500, "bytes", 8500, "==", "expect.mtu")
    assert node.name != bad, f"{node.name}: eth0 MTU 1500, expected 8500"

@pytest.mark.static
@pytest.mark.check("ib_write_bw", "RDMA write bandwidth")
def test_bw(check):
    value = float(os.environ.get("HX_BW", "100"))
    check.measure("bw_avg", value, "Gbit/s", 50.0, ">=", "expect.ib_write_bw")
    assert value >= 50

@pytest.mark.benchmark
@pytest.mark.check("nccl_busbw", "NCCL")
def test_nccl(check):
    assert os.environ.get("HX_NCCL") != "fail", "busbw low"
"""


def gate_run(tmp_path: Path, *extra: str, env: dict[str, str] | None = None):
    argv = [sys.executable, "-m", "pytest_hpcnet.cli", "gate", "run", "--inventory", "inv.yaml"]
    argv += ["--reports-dir", "r", *extra, "--", "suite_test.py"]
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture
def site(tmp_path, monkeypatch):
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    (tmp_path / "suite_test.py").write_text(SUITE)
    for name in ("HX_BAD", "HX_BW", "HX_NCCL", "HX_ERR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_healthy_then_failed_node_then_regression(site, monkeypatch):
    first = gate_run(site)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "baseline auto: no earlier ACCEPTED/PASSED run of cluster nightly" in first.stdout
    assert (
        "hpcnet gate: pytest -m static -q" in first.stdout and "nccl" not in first.stdout
    )  # benchmarks left out
    assert "hpcnet gate: run " in first.stdout
    monkeypatch.setenv("HX_BAD", "n2")
    failed = gate_run(site)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "ticket --node n2 --why 'n2: eth0 MTU 1500, expected 8500'" in failed.stdout
    monkeypatch.delenv("HX_BAD")
    monkeypatch.setenv("HX_BW", "70")  # -30 % against the first (the last good) night
    dropped = gate_run(site)
    assert dropped.returncode == 1, dropped.stdout + dropped.stderr
    assert "70 vs baseline 100 (-30.0 %" in dropped.stdout
    assert "REJECTED by checks that name no node: nothing to drain" in dropped.stdout
    assert not (site / "r" / ".hpcnet-nightly.lock").exists()  # released


def test_bench_adds_the_benchmarks(site, monkeypatch):
    monkeypatch.setenv("HX_NCCL", "fail")
    assert gate_run(site).returncode == 0
    bench = gate_run(site, "--bench")
    assert bench.returncode == 1, bench.stdout
    assert "pytest -m 'static or benchmark' -q" in bench.stdout


def test_usage_errors_are_2(site):
    (site / "bad.yaml").write_text("cluster: [")
    out = subprocess.run(
        [sys.executable, "-m", "pytest_hpcnet.cli", "gate", "run", "--inventory", "bad.yaml"],
        cwd=site,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert gate_run(site, "--no-such-pytest-option").returncode == 2


def test_second_gate_run_is_refused_with_5(site):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; "
            "from pytest_hpcnet.gate.runlock import take_run_lock; "
            "lock = take_run_lock(Path('r'), 'nightly'); print('held', flush=True); "
            "sys.stdin.read(); lock.release()",
        ],
        cwd=site,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        refused = gate_run(site)
        assert refused.returncode == 5
        assert f"is in progress (PID {holder.pid} on " in refused.stdout
        assert not [p for p in (site / "r").iterdir() if p.is_dir()]  # pytest never started
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_errored_check_is_an_incomplete_run_3(site, monkeypatch):
    monkeypatch.setenv("HX_ERR", "n3")
    out = gate_run(site)
    assert out.returncode == 3, out.stdout
    assert "(INCOMPLETE), dry run: 2 passed, 0 failed, 1 unjudged" in out.stdout
