"""The verdict's scope: skips in scope are not a pass, exclusions and partial runs."""

from __future__ import annotations

from datetime import datetime, timezone

from pytest_hpcnet.report.evidence import EvidenceBundle, read_summary
from pytest_hpcnet.report.records import CheckRecord, RunScope, RunSummary, ScopeEntry
from pytest_hpcnet.report.verdict import overall_verdict, scope_of, verdict_line

START = datetime(2026, 11, 30, 5, 0, tzinfo=timezone.utc)
DAY = START.date()


def rec(check_id: str, subject: str, verdict: str, message: str = "") -> CheckRecord:
    return CheckRecord(
        check_id=check_id,
        requirement=check_id,
        subject=subject,
        verdict=verdict,
        message=message,
        started_at=START,
    )


AUDIT_SKIP = "no Alibaba Cloud credentials (default credential chain): the audit is skipped"


def test_a_skipped_requirement_makes_a_handover_incomplete_with_its_reason():
    records = [
        rec("mtu", "n1", "pass"),
        rec("cloud_audit", "cluster", "skipped", AUDIT_SKIP + "\n  (second line)"),
    ]
    scope = scope_of(records, RunScope(), DAY)
    assert overall_verdict(records, (), DAY) == "INCOMPLETE"
    [entry] = scope.incomplete
    assert (entry.check_id, entry.kind, entry.subject) == ("cloud_audit", "skipped", "cluster")
    assert entry.reason == AUDIT_SKIP + " (second line)"  # one line


def test_an_unset_bound_names_the_key_to_set():
    message = "no bound set (expect.nccl.min_busbw_largest_gbs): set it in the inventory"
    records = [rec("mtu", "n1", "pass"), rec("nccl_busbw", "cluster", "skipped", message)]
    [entry] = scope_of(records, None, DAY).incomplete
    assert (entry.kind, entry.key) == ("unbound", "expect.nccl.min_busbw_largest_gbs")
    assert overall_verdict(records, (), DAY) == "INCOMPLETE"


def test_not_applicable_skips_are_listed_out_of_scope_and_do_not_block():
    reason = "not applicable: no kernel module expected (expect.rdma.kernel_module is null)"
    records = [rec("mtu", "n1", "pass")] + [
        rec("erdma", f"n{i}", "skipped", reason) for i in range(10)
    ]
    scope = scope_of(records, None, DAY)
    assert overall_verdict(records, (), DAY) == "ACCEPTED"
    [entry] = scope.excluded
    assert (entry.kind, entry.reason) == ("not_applicable", reason)
    assert entry.subject == "n0, n1, n2, n3, n4, n5, n6, n7 and 2 more"


def test_inventory_exclusion_ignores_the_requirement_and_can_be_accepted():
    excluded = ScopeEntry(check_id="cloud_audit", reason="the lab has no control plane")
    scope = RunScope(excluded=[excluded], required=["mtu", "cloud_audit"])
    records = [
        rec("mtu", "n1", "pass"),
        rec("cloud_audit", "cluster", "skipped", AUDIT_SKIP),
        rec("cloud_audit", "n1", "fail", "ignored: out of scope"),
    ]
    completed = scope_of(records, scope, DAY)
    assert overall_verdict(records, (), DAY, scope=scope) == "ACCEPTED"
    assert completed.excluded == [excluded] and completed.incomplete == []


def test_a_required_requirement_with_no_record_is_incomplete():
    scope = RunScope(required=["mtu", "cpfs"])
    records = [rec("mtu", "n1", "pass")]
    assert overall_verdict(records, (), DAY, scope=scope) == "INCOMPLETE"
    [entry] = scope_of(records, scope, DAY).incomplete
    assert (entry.check_id, entry.kind) == ("cpfs", "not_run")


def test_a_partial_run_that_passed_is_passed_never_accepted():
    scope = RunScope(handover=False, label="static checks", selection="-m static")
    records = [rec("mtu", "n1", "pass")]
    assert overall_verdict(records, (), DAY, scope=scope) == "PASSED"
    failing = [*records, rec("mtu", "n2", "fail")]
    assert overall_verdict(failing, (), DAY, scope=scope) == "REJECTED"
    skipped = [*records, rec("erdma", "n2", "skipped", "ibv_devinfo not installed")]
    assert overall_verdict(skipped, (), DAY, scope=scope) == "INCOMPLETE"
    summary = RunSummary(run_id="r", verdict="PASSED", scope=scope)
    assert verdict_line(summary) == "PASSED (static checks passed, not a handover certificate)"


def test_the_bundle_writes_the_completed_scope_and_its_verdict(tmp_path):
    bundle = EvidenceBundle(tmp_path, "r1")
    bundle.started_at = START
    bundle.append(rec("mtu", "n1", "pass"))
    bundle.append(rec("erdma", "n1", "skipped", "n1: ibv_devinfo or rdma not installed"))
    scope = RunScope(required=["mtu", "erdma"])
    bundle.close({"scope": scope.model_dump()})
    summary = read_summary(tmp_path)
    assert summary.verdict == "INCOMPLETE"
    assert [e.check_id for e in summary.scope.incomplete] == ["erdma"]
    assert summary.scope.required == ["mtu", "erdma"]


def test_the_suites_unset_bound_skips_name_their_keys():
    cases = {
        "no bound set (expect.ib_write_bw.min_gbps); measured 96.5": "expect.ib_write_bw.min_gbps",
        "no bound set (expect.nccl.min_avg_busbw_gbs); measured 9.1": (
            "expect.nccl.min_avg_busbw_gbs"
        ),
        "no bound set (expect.cpfs.min_read_mbs_per_node); measured 2100 MB/s": (
            "expect.cpfs.min_read_mbs_per_node"
        ),
        "no bound set (expect.instance_types): the instance types the profile is for": (
            "expect.instance_types"
        ),
    }
    for message, key in cases.items():
        for verdict in ("skipped", "not_measured"):  # a judge's unbound verdict, or a skip
            [entry] = scope_of([rec("x", "cluster", verdict, message)], None, DAY).incomplete
            assert (entry.kind, entry.key) == ("unbound", key)


def test_a_subject_named_by_several_records_is_listed_once():
    reason = "not applicable: no compat_mode expected (expect.rdma.compat_mode is unset)"
    records = [rec("mtu", "n1", "pass")] + [  # the [all-nodes] item of two merged partitions
        rec("erdma", "all-nodes", "skipped", reason) for _ in range(2)
    ]
    [entry] = scope_of(records, None, DAY).excluded
    assert (entry.subject, entry.reason) == ("all-nodes", reason)
