"""A check's record is serialized once, where its report is made: the report carries its
evidence line (through pytest-xdist's report serialization too) and the controller appends
that line as is."""

from __future__ import annotations

import pytest

from pytest_hpcnet.report.evidence import EvidenceBundle, evidence_line, read_records
from pytest_hpcnet.report.recording import Check, attach, detach


def a_report() -> pytest.TestReport:
    return pytest.TestReport(
        "t.py::test_mtu[n1]", ("t.py", 1, "test_mtu"), {}, "passed", None, "call"
    )


def test_the_record_travels_as_its_evidence_line(pytestconfig, tmp_path):
    bundle = EvidenceBundle(tmp_path / "run")
    check = Check("mtu", "mtu", "n1", "node", "t.py::test_mtu[n1]", bundle)
    check.measure("mtu", 8500, "bytes", 8500, "==", "expect.mtu")
    record = check.record("pass", "", None)
    report = a_report()
    attach(report, record, {"n2": "connection refused"})
    hook = pytestconfig.hook
    data = hook.pytest_report_to_serializable(config=pytestconfig, report=report)
    shipped = hook.pytest_report_from_serializable(config=pytestconfig, data=data)
    carried = detach(shipped)
    line = carried.line
    assert line == evidence_line(record)
    assert (carried.verdict, carried.check_id, carried.contacted, carried.unreachable) == (
        "pass",
        "mtu",
        False,
        {"n2": "connection refused"},
    )
    assert carried.record()["subject"] == "n1"
    bundle.append_line(line)
    (written,) = read_records(bundle.run_dir)
    assert written.measured[0].value == 8500 and written.check_id == "mtu"
    assert (bundle.run_dir / "evidence.jsonl").read_text() == line


def test_a_report_without_a_record_carries_nothing():
    assert detach(a_report()) is None
