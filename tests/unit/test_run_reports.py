"""A run's reports through pytester: evidence survives Ctrl-C, the baseline gate, metrics,
waivers, and the exit status (0 accepted, 1 rejected)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.conftest import popen_interruptible

pytest_plugins = ["pytester"]

SOON = (datetime.now(timezone.utc).date() + timedelta(days=30)).isoformat()
INVENTORY = f"""\
cluster: {{name: unit, region: cn-test}}
ssh: {{connect_timeout_s: 1, connect_retries: 1}}
nodes:
  - {{name: "n[1-2]", host: "198.18.0.[201-202]"}}
waivers:
  - {{check: placement, reason: vendor ticket 42, by: QA, expires: {SOON}}}
  - {{check: versions, reason: old, by: QA, expires: 2000-01-01}}
"""

MEASURING_SUITE = """\
import os, pytest

@pytest.mark.check("ib_write_bw", "RDMA write bandwidth")
def test_bandwidth(check):
    value = float(os.environ["HX_BW"])
    check.measure("bw_avg", value, "Gbit/s", 50.0, ">=", "expect.ib_write_bw")
    assert value >= 50.0
"""


def evidence(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "evidence.jsonl").read_text().splitlines() if x]


def only_run(reports: Path) -> Path:
    (run,) = [p for p in reports.iterdir() if p.is_dir()]
    return run


def test_baseline_gate_fails_a_20_percent_drop_and_passes_within_tolerance(
    pytester: pytest.Pytester, monkeypatch
):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=MEASURING_SUITE)
    monkeypatch.setenv("HX_BW", "100")
    first = pytester.runpytest(".", "--inventory", "inv.yaml", "--reports-dir", "base")
    first.assert_outcomes(passed=1)
    baseline = only_run(pytester.path / "base")

    monkeypatch.setenv("HX_BW", "80")  # 20 % below the baseline, still above the bound
    dropped = pytester.runpytest(
        ".", "--inventory", "inv.yaml", "--reports-dir", "drop", "--hpcnet-baseline", str(baseline)
    )
    dropped.assert_outcomes(failed=1)
    dropped.stdout.fnmatch_lines(["*ib_write_bw bw_avg on cluster: 80 vs baseline 100 (-20.0 %*"])
    (record,) = evidence(only_run(pytester.path / "drop"))
    assert record["verdict"] == "fail"
    assert record["measured"][0]["baseline"] == 100.0
    assert record["measured"][0]["delta"] == pytest.approx(-0.2)
    assert dropped.ret == 1

    monkeypatch.setenv("HX_BW", "95")  # -5 %: within the default 10 %
    within = pytester.runpytest(
        ".", "--inventory", "inv.yaml", "--reports-dir", "ok", "--hpcnet-baseline", str(baseline)
    )
    within.assert_outcomes(passed=1)
    assert within.ret == 0


def test_metrics_textfile_and_exit_status(pytester: pytest.Pytester, monkeypatch):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=MEASURING_SUITE)
    monkeypatch.setenv("HX_BW", "20")
    result = pytester.runpytest(
        ".", "--inventory", "inv.yaml", "--reports-dir", "r", "--hpcnet-metrics", "out.prom"
    )
    assert result.ret == 1
    result.stdout.fnmatch_lines(["verdict: REJECTED (selected checks, not a handover certificate)"])
    text = (pytester.path / "out.prom").read_text()
    assert 'hpcnet_ib_write_bw_bw_avg{check="ib_write_bw",' in text
    assert 'hpcnet_check_passed{check="ib_write_bw",subject="cluster",cluster="unit"} 0' in text


def test_waived_failure_passes_the_run_and_expired_waiver_does_not(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(
        test_suite="""\
import pytest

@pytest.mark.check("placement", "Waived")
def test_waived(check):
    assert False, "n1: known problem"

@pytest.mark.check("versions", "Expired")
def test_expired(check):
    assert False, "n2: known problem"
"""
    )
    result = pytester.runpytest(
        ".", "--inventory", "inv.yaml", "--reports-dir", "r", "-k", "waived"
    )
    result.assert_outcomes(xfailed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["verdict: PASSED (selected checks passed, not a handover*"])
    result = pytester.runpytest(
        ".", "--inventory", "inv.yaml", "--reports-dir", "r2", "-k", "expired"
    )
    result.assert_outcomes(failed=1)
    records = evidence(only_run(pytester.path / "r2"))
    assert records[0]["waiver"]["expires"] == "2000-01-01" and records[0]["verdict"] == "fail"


def test_interrupted_run_keeps_a_readable_evidence_bundle(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(
        test_suite="""\
import time, pytest

@pytest.mark.check("quick", "Quick")
@pytest.mark.parametrize("i", range(3))
def test_quick(check, i):
    check.measure("i", i)

@pytest.mark.check("slow", "Slow")
def test_slow(check):
    time.sleep(60)
"""
    )
    proc = popen_interruptible(
        [
            sys.executable,
            "-m",
            "pytest",
            ".",
            "--inventory",
            "inv.yaml",
            "--reports-dir",
            "r",
            "-p",
            "no:cacheprovider",
        ],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    reports = pytester.path / "r"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        runs = list(reports.glob("*/evidence.jsonl")) if reports.exists() else []
        if runs and len(runs[0].read_text().splitlines()) >= 3:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    run = only_run(reports)
    records = evidence(run)
    assert [r["check_id"] for r in records] == ["quick"] * 3
    summary = json.loads((run / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["verdict"] == "INCOMPLETE"
    assert "INCOMPLETE" in (run / "certificate.html").read_text()
    assert "verdict: INCOMPLETE" in out


def test_signed_run_verifies_and_a_changed_byte_fails(pytester: pytest.Pytester, monkeypatch):
    from pytest_hpcnet.cli import main

    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=MEASURING_SUITE)
    monkeypatch.setenv("HX_BW", "90")
    key, pub = pytester.path / "k.pem", pytester.path / "k.pub"
    assert main(["keygen", str(key), str(pub)]) == 0
    result = pytester.runpytest(
        ".", "--inventory", "inv.yaml", "--reports-dir", "r", "--hpcnet-sign-key", str(key)
    )
    assert result.ret == 0
    run = only_run(pytester.path / "r")
    assert (run / "signature.json").exists()
    assert main(["verify", str(run), "--public-key", str(pub)]) == 0
    evidence_file = run / "evidence.jsonl"
    evidence_file.write_text(evidence_file.read_text().replace('"value":90.0', '"value":99.0'))
    assert main(["verify", str(run), "--public-key", str(pub)]) == 1
