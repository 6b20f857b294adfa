"""The verdict's scope against the 4-node lab: a static run is PASSED (not a handover) and
marked as lab evidence, with the cloud audit in scope (the lab serves its own control plane)
and only what the lab lacks out of it; CPFS throughput is measured only where CPFS is
mounted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import cpfs
from pytest_hpcnet.report.verdict import LAB_EVIDENCE
from pytest_hpcnet.transport.fanout import Transport
from tests.lab.test_static_suite import run_static

pytestmark = pytest.mark.lab

NODE = "node02"


def summary_of(reports: Path) -> dict:
    (run,) = list(reports.iterdir())
    return json.loads((run / "summary.json").read_text())


def test_a_static_lab_run_is_passed_not_a_handover_and_marked_lab(lab4, tmp_path):
    printed: list[str] = []
    code, records = run_static(lab4.inventory, tmp_path, output=printed)
    assert code == 0
    summary = summary_of(tmp_path)
    assert summary["verdict"] == "PASSED", summary["scope"]
    assert summary["scope"]["handover"] is False and summary["scope"]["label"] == "static checks"
    assert summary["lab"] is True and summary["profile"] == "lab"
    assert summary["profile_sources"]["instance_types"]
    excluded = {(e["check_id"], e["kind"], e["reason"]) for e in summary["scope"]["excluded"]}
    assert not [e for e in excluded if e[1] == "inventory"], excluded  # nothing left out
    reason = "not applicable: no kernel module expected (expect.rdma.kernel_module is null)"
    assert ("erdma", "not_applicable", reason) in excluded
    assert summary["scope"]["incomplete"] == []
    audited = [r for r in records if r["check_id"] == "cloud_audit"]
    assert audited and {r["verdict"] for r in audited} == {"pass"}
    assert any(r["check_id"] == "instance_type" and r["verdict"] == "pass" for r in records)
    out = printed[0]
    assert "verdict: LAB PASSED (static checks passed, not a handover certificate)" in out
    assert LAB_EVIDENCE in out
    (run,) = list(tmp_path.iterdir())
    verify = subprocess.run(
        [sys.executable, "-m", "pytest_hpcnet.cli", "verify", str(run)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verify.returncode == 0, verify.stdout
    assert "verdict: LAB PASSED (static checks passed, not a handover certificate)" in verify.stdout
    assert LAB_EVIDENCE in verify.stdout


def test_the_lab_profile_on_another_instance_type_fails_naming_both(lab4, tmp_path):
    inventory = tmp_path / "ebmgn8is.yaml"
    text = Path(lab4.inventory).read_text().replace("profile: lab", "profile: ebmgn8is")
    inventory.write_text(text)
    code, records = run_static(str(inventory), tmp_path / "r", "-k", "instance_type")
    (record,) = [r for r in records if r["check_id"] == "instance_type"]
    assert code == 1 and record["verdict"] == "fail"
    assert (
        "report ecs.hpcnet-lab.emulated, profile ebmgn8is is for ecs.ebmgn8is.*"
        in (record["message"])
    )
    assert summary_of(tmp_path / "r")["lab"] is True  # the metadata still says lab


def test_cpfs_throughput_only_where_cpfs_is_mounted(lab4, tmp_path):
    transport = Transport(load_inventory(lab4.inventory))
    try:
        assert transport.run(NODE, f"umount {cpfs.MOUNT}").exit_status == 0
        code, records = run_static(lab4.inventory, tmp_path, "-k", "cpfs", marker="benchmark")
    finally:
        transport.run(
            NODE,
            f"mountpoint -q {cpfs.MOUNT} || mount -t {cpfs.FSTYPE} -o size={cpfs.SIZE},"
            f"mode=0755 {cpfs.SOURCE} {cpfs.MOUNT}",
        )
        transport.close()
    ours = [r for r in records if r["subject"] == NODE]
    assert {r["verdict"] for r in ours} == {"fail", "not_measured"}
    for record in ours:
        assert f"{NODE}: {cpfs.MOUNT} is not a mount point" in record["message"], record
    throughput = [r for r in ours if "throughput" in r["nodeid"]]
    assert len(throughput) == 2 and all(r["verdict"] == "not_measured" for r in throughput)
    ran_fio = [c for r in records for c in r["commands"] if "--directory=" in c["command"]]
    assert ran_fio and all(c["node"] != NODE for c in ran_fio)
    fairness = [r for r in records if "fairness" in r["nodeid"]]
    assert len(fairness) == 2
    for record in fairness:
        assert record["verdict"] == "pass", record["message"]
        left = {m["name"]: m["value"] for m in record["measured"]}
        assert left["left_out"] == NODE
    assert code == 1 and summary_of(tmp_path)["verdict"] == "INCOMPLETE"  # errors: unmeasured
