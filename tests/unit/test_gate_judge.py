"""Judging nodes from a run's evidence: who failed, who passed, who is left alone."""

from __future__ import annotations

from datetime import date, datetime, timezone

from pytest_hpcnet.gate.judge import judge, short
from pytest_hpcnet.report.evidence import CheckRecord, RunSummary, Waiver

START = datetime(2026, 11, 30, 2, 0, tzinfo=timezone.utc)


def rec(check: str, subject: str, verdict: str, message: str = "", **extra) -> CheckRecord:
    kind = "pair" if "->" in subject else ("cluster" if subject == "cluster" else "node")
    return CheckRecord(
        check_id=check,
        requirement="r",
        subject=subject,
        kind=kind,
        verdict=verdict,
        message=message,
        **extra,
    )


def summary(**extra) -> RunSummary:
    return RunSummary(run_id="20261130-020000-ab12", started_at=START, **extra)


NODES = ["node01", "node02", "node03"]


def test_failed_node_check_names_the_node_with_its_checks_and_first_reasons():
    records = [
        rec("mtu", "node01", "pass"),
        rec("mtu", "node02", "fail", "node02: eth0 MTU 1500, expected 8500"),
        rec("path_mtu", "node01->node02", "fail", "8472-byte ping lost", suspect_nodes=["node02"]),
        rec("path_mtu", "node02->node03", "fail", "second", suspect_nodes=["node02"]),
        rec("mtu", "node03", "pass"),
        rec("path_mtu", "node01->node03", "pass"),
    ]
    found = judge(records, summary(), NODES)
    assert found["node02"].status == "fail"
    assert found["node02"].checks == ["mtu", "path_mtu"]
    assert found["node02"].reasons == [
        "node02: eth0 MTU 1500, expected 8500",
        "8472-byte ping lost",
    ]
    assert found["node01"].status == "pass"
    assert found["node03"].status == "pass"


def test_pair_failure_without_suspect_blocks_both_ends_but_drains_neither():
    records = [rec("mtu", n, "pass") for n in NODES]
    records.append(rec("security_group", "node01->node02", "fail", "tcp/29500 dropped"))
    found = judge(records, summary(), NODES)
    assert found["node01"].status == found["node02"].status == "unjudged"
    assert "without naming a suspect" in found["node01"].why
    assert found["node03"].status == "pass"


def test_cluster_check_fails_its_suspects_only():
    records = [rec("mtu", n, "pass") for n in NODES]
    records.append(
        rec("placement", "cluster", "fail", "node03 in vsw-odd", suspect_nodes=["node03"])
    )
    found = judge(records, summary(), NODES)
    assert [n for n, j in found.items() if j.status == "fail"] == ["node03"]
    assert found["node01"].status == "pass"


def test_error_and_unreachable_nodes_are_unjudged():
    records = [
        rec("mtu", "node01", "error", "timed out"),
        rec("mtu", "node02", "pass"),
    ]
    found = judge(records, summary(unreachable_nodes=["node03"]), NODES)
    assert found["node01"].status == "unjudged" and "errored" in found["node01"].why
    assert found["node03"].status == "unjudged" and "unreachable" in found["node03"].why
    assert found["node02"].status == "pass"


def test_an_unreachable_node_is_never_blamed_for_what_failed_on_it():
    records = [
        rec("erdma_eri_bw", "node03", "fail", "node03: 0 ERI(s)"),
        rec("cpfs", "node03", "fail", "fio did not run"),
        rec("mtu", "node02", "fail", "node02: eth0 MTU 1500"),
    ]
    found = judge(records, summary(unreachable_nodes=["node03"]), NODES)
    assert found["node03"].status == "unjudged"
    assert found["node03"].why == (
        "unreachable in this run (erdma_eri_bw, cpfs failed: not measured, not blamed)"
    )
    assert found["node02"].status == "fail"


def test_a_check_not_measured_on_a_node_blocks_it_like_an_error():
    records = [
        rec("mtu", "node01", "pass"),
        rec("gpu_health", "node01", "not_measured", "nvidia-smi timed out"),
    ]
    found = judge(records, summary(), NODES)
    assert found["node01"].status == "unjudged" and found["node01"].why == (
        "gpu_health not measured"
    )


def test_failed_records_carry_their_test_ids_and_whether_they_are_node_checks():
    records = [
        rec("mtu", "node02", "fail", "a", nodeid="suites/test_mtu.py::test_mtu[node02]"),
        rec("mtu", "node02", "fail", "b", nodeid="suites/test_mtu.py::test_rule[node02]"),
        rec("path_mtu", "node01->node03", "fail", "c", suspect_nodes=["node03"], nodeid="p"),
    ]
    found = judge(records, summary(), NODES)
    assert found["node02"].nodeids == [
        "suites/test_mtu.py::test_mtu[node02]",
        "suites/test_mtu.py::test_rule[node02]",
    ]
    assert found["node02"].local and not found["node03"].local
    assert found["node03"].nodeids == ["p"] and found["node03"].partners == ["node01"]


def test_no_summary_or_interrupted_run_resumes_nobody_but_failures_count():
    records = [rec("mtu", "node01", "pass"), rec("mtu", "node02", "fail", "bad")]
    for the_summary, why in ((None, "no summary.json"), (summary(interrupted=True), "interrupted")):
        found = judge(records, the_summary, NODES)
        assert found["node01"].status == "unjudged" and why in found["node01"].why
        assert found["node02"].status == "fail"


def test_a_valid_waiver_is_not_a_failure_and_an_expired_one_is():
    waiver = Waiver(reason="known", by="ops", expires=date(2026, 12, 31))
    expired = Waiver(reason="known", by="ops", expires=date(2026, 11, 1))
    records = [
        rec("mtu", "node01", "fail", "w", waiver=waiver),
        rec("mtu", "node02", "waived", "x", waiver=expired),
    ]
    found = judge(records, summary(), NODES)
    assert found["node01"].status == "pass"
    assert found["node02"].status == "fail"


def test_nodes_without_any_record_are_unjudged():
    found = judge([rec("mtu", "node01", "pass")], summary(), NODES)
    assert found["node02"].why == "no check judged this node"


def test_short_squashes_lines_and_cuts():
    assert short("a\n  b\tc") == "a b c"
    assert short("x" * 100, 10) == "xxxxxxx..."
