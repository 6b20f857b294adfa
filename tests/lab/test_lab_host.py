"""The host checks against the 4-node lab (`-m static`, the host tests only): each host fault
fails its requirement on its node and nowhere else."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpcnet.lab import faults
from tests.lab.test_static_suite import failing, run_static

pytestmark = pytest.mark.lab

HOST_TESTS = ("-k", "test_host_hardware or test_pcie_aer or test_host_settings or test_time_offset")
FAULTS = (
    ("memory", "node01", "1792"),
    ("clock-skew", "node01", "2"),
    ("aer", "node02", "gpu3 fatal 1"),
    ("aer", "node03", "erdma_0 correctable 50"),
    ("clocksource", "node03", "hpet"),
    ("governor", "node04", "powersave"),
)
FAILED = {
    ("host_hardware", "node01"),
    ("host_settings", "node01"),
    ("pcie_aer", "node02"),
    ("pcie_aer", "node03"),
    ("host_settings", "node03"),
    ("host_settings", "node04"),
}


def test_host_faults_fail_exactly_their_nodes(lab4, tmp_path):
    """One run with every host fault injected; the healthy lab's pass of these tests is
    `test_static_suite.test_healthy_lab_passes_the_static_suite`."""
    state_dir = Path(lab4.state_dir)
    for kind, node, arg in FAULTS:
        faults.inject(kind, node, arg, state_dir)
    try:
        code, records = run_static(lab4.inventory, tmp_path, *HOST_TESTS)
    finally:
        faults.heal("all", state_dir)
    bad = failing(records)
    assert code == 1
    assert {(r["check_id"], r["subject"]) for r in bad} == FAILED, [r["message"] for r in bad]
    assert all(r["verdict"] == "fail" and r["subject"] in r["message"] for r in bad)
    others = {(r["check_id"], r["subject"]) for r in records} - FAILED
    assert len(others) == 4 * 3 - len(FAILED)  # every other node passes each requirement
    assert all(r["verdict"] == "pass" for r in records if (r["check_id"], r["subject"]) in others)
