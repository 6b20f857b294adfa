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
import os, pathlib, pytest

@pytest.mark.static
@pytest.mark.check("mtu", "jumbo frames")
def test_mtu(node, check):
    once = pathlib.Path(f"failed-once-{node.name}")
    if os.environ.get("HX_FLAKY") == node.name and not once.exists():
        once.touch()
        assert False, f"{node.name}: eth0 MTU 1500 (once)"
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
    for name in ("HX_BAD", "HX_BW", "HX_NCCL", "HX_ERR", "HX_FLAKY"):
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


def test_a_failure_is_re_run_once_and_only_a_lasting_one_is_acted_on(site, monkeypatch):
    monkeypatch.setenv("HX_FLAKY", "n1")
    monkeypatch.setenv("HX_BAD", "n2")
    out = gate_run(site)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "ticket --node n2 --why 'n2: eth0 MTU 1500, expected 8500'" in out.stdout
    assert "ticket --node n1" not in out.stdout
    rerun = "  re-run to confirm: pytest -q -p no:cacheprovider --hpcnet-inventory inv.yaml"
    assert rerun in out.stdout
    assert "--hpcnet-nodes n1,n2 suite_test.py::test_mtu[n1] suite_test.py::test_mtu[n2]" in (
        out.stdout
    )
    assert "  flaky n1: mtu failed, then passed on a re-run (re-run " in out.stdout
    assert "  confirmed n2: mtu failed again (re-run " in out.stdout
    assert "dry run: 1 passed, 1 failed, 0 unjudged, 1 flaky" in out.stdout
    [run] = [p for p in (site / "r").iterdir() if p.is_dir() and not p.name.startswith(".")]
    [rerun] = list((site / "r" / ".gate" / run.name / "confirm").iterdir())
    assert (rerun / "summary.json").exists()


def test_confirm_runs_0_acts_on_the_run_alone(site, monkeypatch):
    (site / "inv.yaml").write_text(INVENTORY + "scheduler: {confirm_runs: 0}\n")
    monkeypatch.setenv("HX_FLAKY", "n1")
    out = gate_run(site)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "ticket --node n1" in out.stdout and "re-run" not in out.stdout


def test_hpcnet_nodes_narrows_the_inventory_and_refuses_an_unknown_name(site):
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--inventory"]
    argv += ["inv.yaml", "--reports-dir", "r", "suite_test.py", "-k", "mtu"]
    out = subprocess.run([*argv, "--hpcnet-nodes", "n2"], cwd=site, capture_output=True, text=True)
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout + out.stderr
    bad = subprocess.run([*argv, "--hpcnet-nodes", "n9"], cwd=site, capture_output=True, text=True)
    assert bad.returncode == 4
    assert "--hpcnet-nodes n9: 'n9' is not a node of the inventory" in bad.stderr


def test_a_share_of_the_nodes_names_the_whole_cluster_in_its_summary(site):
    """`--hpcnet-nodes` runs a share; its summary names the inventory's whole node list (for
    `hpcnet merge` to find the nodes no partition covered) and the share it covered."""
    import json
    import os

    import pytest_hpcnet
    from pytest_hpcnet.report.evidence import node_list_sha256

    here = str(Path(pytest_hpcnet.__file__).resolve().parents[1])  # this checkout's package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--inventory"]
    argv += ["inv.yaml", "--reports-dir", "r", "suite_test.py", "-k", "mtu", "--hpcnet-nodes"]
    out = subprocess.run([*argv, "n2"], cwd=site, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    [run] = [p for p in (site / "r").iterdir() if p.is_dir() and not p.name.startswith(".")]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["cluster_nodes"] == ["n1", "n2", "n3"]
    assert summary["cluster_node_count"] == 3
    assert summary["cluster_nodes_sha256"] == node_list_sha256(["n1", "n2", "n3"])
    assert summary["partition_nodes"] == ["n2"]
