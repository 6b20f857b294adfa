"""Every output of a lab run says LAB: the terminal's and `verify`'s verdict line,
report.html (pytest-html) and junit.xml; a run on a cluster says no such thing."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pytest_hpcnet.report.html_report import verdict_html
from pytest_hpcnet.report.junit import junit_verdict
from pytest_hpcnet.report.records import RunScope, RunSummary
from pytest_hpcnet.report.verdict import verdict_line

JUNIT = (
    '<?xml version="1.0" encoding="utf-8"?>'
    '<testsuites><testsuite name="pytest" tests="1"/></testsuites>'
)
PARTIAL = RunScope(handover=False, label="static checks", selection="-m static")


def summary(lab: bool, scope: RunScope | None = None) -> RunSummary:
    return RunSummary(
        run_id="r1",
        verdict="ACCEPTED" if scope is None else "PASSED",
        lab=lab,
        scope=scope or RunScope(),
    )


def junit_properties(tmp_path, run: RunSummary) -> dict[str, str]:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    junit_verdict(str(path), run)
    return {p.get("name"): p.get("value") for p in ET.parse(path).getroot().iter("property")}


@pytest.mark.parametrize(
    ("run", "line"),
    [
        (summary(lab=True), "LAB ACCEPTED"),
        (
            summary(lab=True, scope=PARTIAL),
            "LAB PASSED (static checks passed, not a handover certificate)",
        ),
        (summary(lab=False), "ACCEPTED"),
    ],
)
def test_the_verdict_line_of_a_lab_run_says_lab(run, line):
    assert verdict_line(run) == line


def test_junit_of_a_lab_run_carries_the_lab_flag_and_the_verdict_as_lab(tmp_path):
    props = junit_properties(tmp_path, summary(lab=True))
    assert props["hpcnet_lab"] == "true"
    assert props["hpcnet_verdict"] == "LAB ACCEPTED"
    assert props["hpcnet_verdict_line"] == "LAB ACCEPTED"


def test_junit_of_a_cluster_run_is_not_marked_lab(tmp_path):
    props = junit_properties(tmp_path, summary(lab=False))
    assert props["hpcnet_lab"] == "false" and props["hpcnet_verdict"] == "ACCEPTED"


def test_report_html_of_a_lab_run_says_lab():
    lab = verdict_html(verdict_line(summary(lab=True)))
    assert "hpcnet verdict: <strong>LAB ACCEPTED</strong>" in lab
    assert "LAB evidence (emulated tools), not a cluster handover" in lab
    assert "LAB" not in verdict_html(verdict_line(summary(lab=False)))
