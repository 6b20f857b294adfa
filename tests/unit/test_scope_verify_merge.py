"""`hpcnet verify` and `hpcnet merge` reach the run's verdict and scope from the evidence."""

from __future__ import annotations

import json

from pytest_hpcnet.cli import main
from pytest_hpcnet.report.evidence import CheckRecord
from pytest_hpcnet.report.merge import merge
from pytest_hpcnet.report.records import RunScope, ScopeEntry
from pytest_hpcnet.report.verify import verify
from tests.unit.test_bundle_merge import PART_A, PART_B, partition
from tests.unit.test_certificate import RUN_START

STATIC = RunScope(handover=False, label="static checks", selection="-m static")
LAB_SCOPE = RunScope(
    handover=False,
    label="static checks",
    selection="-m static",
    excluded=[ScopeEntry(check_id="cloud_audit", reason="the lab has no control plane")],
)


def skipped(check_id: str, reason: str) -> CheckRecord:
    return CheckRecord(
        check_id=check_id,
        requirement=check_id,
        subject="gpu-a",
        verdict="skipped",
        message=reason,
        started_at=RUN_START,
    )


def test_verify_prints_a_partial_lab_run_as_such(tmp_path, capsys):
    run = partition(tmp_path, "lab", PART_A, scope=LAB_SCOPE.model_dump(), lab=True)
    assert main(["verify", str(run)]) == 0
    out = capsys.readouterr().out
    assert "verdict: LAB PASSED (static checks passed, not a handover certificate)" in out
    assert "  not in scope: cloud_audit: the lab has no control plane" in out
    assert "LAB evidence (emulated tools), not a cluster handover" in out


def test_verify_lists_what_was_not_measured(tmp_path, capsys):
    extra = (skipped("nccl_busbw", "no bound set (expect.nccl.min_busbw_largest_gbs)"),)
    run = partition(tmp_path, "r", PART_A, extra=extra)
    assert main(["verify", str(run)]) == 0
    out = capsys.readouterr().out
    assert "verdict: INCOMPLETE\n" in out
    assert "  not measured: nccl_busbw: no bound set (expect.nccl.min_busbw_largest_gbs)" in out
    assert "LAB evidence" not in out


def test_verify_recomputes_the_verdict_from_the_evidence(tmp_path):
    extra = (skipped("erdma", "ibv_devinfo or rdma (iproute2) not installed"),)
    run = partition(tmp_path, "r", PART_A, extra=extra)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["verdict"] == "INCOMPLETE"
    # a hand-edited summary (re-digested as if freshly written) does not pass verify
    summary["verdict"] = "ACCEPTED"
    (run / "summary.json").write_text(json.dumps(summary))
    result = verify(run)
    assert "verdict mismatch: summary.json says ACCEPTED, the evidence gives INCOMPLETE" in (
        result.problems
    )


def test_merged_partial_runs_stay_partial_and_lab_stays_lab(tmp_path):
    a = partition(tmp_path, "part-a", PART_A, scope=STATIC.model_dump(), lab=True, pairs=False)
    b = partition(tmp_path, "part-b", PART_B, scope=LAB_SCOPE.model_dump(), pairs=False)
    result = merge(tmp_path / "merged", [a, b])
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert result.verdict == "PASSED"
    assert summary["scope"]["handover"] is False and summary["scope"]["label"] == "static checks"
    assert summary["lab"] is True
    assert [e["check_id"] for e in summary["scope"]["excluded"]] == ["cloud_audit"]


def test_a_skip_in_one_partition_makes_the_merge_incomplete(tmp_path):
    a = partition(tmp_path, "part-a", PART_A)
    extra = (skipped("erdma", "gpu-c: ibv_devinfo or rdma (iproute2) not installed"),)
    b = partition(tmp_path, "part-b", PART_B, extra=extra)
    result = merge(tmp_path / "merged", [a, b])
    assert result.verdict == "INCOMPLETE"
