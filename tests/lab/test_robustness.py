"""Faults that must not break the run: a frozen node, a flaky connection, bad report folders."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from pytest_hpcnet.inventory import load_inventory
from pytest_hpcnet.lab import cluster as lab
from tests.lab.test_static_suite import failing, run_static

pytestmark = pytest.mark.lab


def test_frozen_sshd_costs_one_timeout_and_fails_only_that_node(lab4, tmp_path):
    t0 = time.monotonic()
    code, _ = run_static(lab4.inventory, tmp_path / "healthy")
    healthy = time.monotonic() - t0
    timeout = load_inventory(lab4.inventory).ssh.connect_timeout_s
    pid = lab4.node("node03").sshd_pid
    os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        code, records = run_static(lab4.inventory, tmp_path / "frozen")
        frozen = time.monotonic() - t0
    finally:
        os.kill(pid, signal.SIGCONT)
    assert code == 1
    bad = failing(records)
    assert bad and all("node03" in r["subject"] or "node03" in r["message"] for r in bad)
    assert all(r["verdict"] == "error" for r in bad if r["subject"] == "node03")
    assert any(
        "node03 unreachable: timed out waiting for the SSH handshake" in r["message"] for r in bad
    )
    assert frozen < healthy + timeout + 5, f"{frozen:.1f}s vs healthy {healthy:.1f}s"


def test_stopped_node_keeps_evidence_of_the_others(lab4, tmp_path):
    os.kill(lab4.node("node04").sshd_pid, signal.SIGTERM)
    try:
        code, records = run_static(lab4.inventory, tmp_path)
    finally:
        lab.start_node_sshd(lab4, "node04")
    assert code == 1
    passed = {r["subject"] for r in records if r["verdict"] == "pass"}
    assert {"node01", "node02", "node03"} <= passed
    summary = next(tmp_path.iterdir()) / "summary.json"
    assert '"verdict": "INCOMPLETE"' in summary.read_text()
    assert '"node04"' in summary.read_text()


def test_unwritable_reports_dir_is_one_clear_error(lab4, tmp_path):
    locked = tmp_path / "ro"
    locked.mkdir()
    (locked / "reports").write_text("a file where the folder should be")
    code, out = _pytest(lab4.inventory, locked / "reports")
    assert code == 4
    assert "is not writable" in out and "Traceback" not in out


def _pytest(inventory: str, reports: Path) -> tuple[int, str]:
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "suites",
            "-m",
            "static",
            "--inventory",
            inventory,
            "--reports-dir",
            str(reports),
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )
    return proc.returncode, proc.stdout + proc.stderr
