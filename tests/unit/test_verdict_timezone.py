"""A waiver expiring on the run's own (UTC) date gives one verdict everywhere: the terminal,
JUnit and the certificate agree whatever the controller's time zone."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from pytest_hpcnet.report.records import GOOD_VERDICTS

pytest_plugins = ["pytester"]

#: Shanghai (UTC+8) and Los Angeles (UTC-8) are the controllers the issue names; UTC+14 and
#: UTC-12 make sure that, at any hour of the day, at least one zone's local date is not the
#: run's UTC date (so a verdict taken on the local date is caught whenever the test runs).
ZONES = ("Asia/Shanghai", "America/Los_Angeles", "Pacific/Kiritimati", "Etc/GMT+12")

SUITE = """\
import pytest

@pytest.mark.check("placement", "Waived")
def test_waived(check):
    assert False, "n1: known problem"
"""


def inventory(expires: str) -> str:
    return (
        "cluster: {name: unit, region: cn-test}\n"
        "ssh: {connect_timeout_s: 1, connect_retries: 1}\n"
        "nodes:\n"
        '  - {name: "n[1-2]", host: "198.18.0.[201-202]"}\n'
        "waivers:\n"
        f"  - {{check: placement, reason: vendor ticket 42, by: QA, expires: {expires}}}\n"
    )


def junit_verdict(path: Path) -> str:
    (case,) = ET.parse(path).getroot().iter("testcase")
    kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
    return {"": "pass", "skipped": "waived", "failure": "fail", "error": "error"}["".join(kinds)]


def run_once(pytester: pytest.Pytester, zone: str, attempt: int) -> tuple[str, dict, str]:
    """(run date, verdict per report, expiry) of one run with a waiver expiring UTC-today."""
    today = datetime.now(timezone.utc).date().isoformat()
    pytester.makefile(".yaml", inv=inventory(today))
    reports = pytester.path / f"r{attempt}"
    result = pytester.runpytest_subprocess(
        ".", "--inventory", "inv.yaml", "--reports-dir", str(reports), "-p", "no:cacheprovider"
    )
    (run,) = [p for p in reports.iterdir() if p.is_dir()]
    outcomes = result.parseoutcomes()
    terminal = "waived" if outcomes.get("xfailed") == 1 else "fail"
    if outcomes.get("failed"):
        terminal = "fail"
    facts = json.loads((run / "certificate.json").read_text())
    certificate = [v for v, n in facts["counts"].items() if n] == ["waived"]
    verdicts = {
        "terminal": terminal,
        "terminal_run_verdict": "waived" if "verdict: PASSED" in result.stdout.str() else "fail",
        "junit": junit_verdict(run / "junit.xml"),
        "certificate": "waived" if certificate else "fail",
        # ACCEPTED until the certificate reads the run's scope (certificate helper), then PASSED
        "certificate_run_verdict": "waived" if facts["verdict"] in GOOD_VERDICTS else "fail",
    }
    return facts["run_date"], verdicts, today


@pytest.mark.parametrize("zone", ZONES)
def test_waiver_expiring_today_same_verdict_in_terminal_junit_certificate(
    pytester: pytest.Pytester, monkeypatch, zone
):
    monkeypatch.setenv("TZ", zone)
    pytester.makepyfile(test_suite=SUITE)
    run_date, verdicts, today = run_once(pytester, zone, 1)
    if run_date != today:  # UTC midnight passed between writing the waiver and the run
        run_date, verdicts, today = run_once(pytester, zone, 2)
    assert run_date == today
    assert verdicts == dict.fromkeys(verdicts, "waived"), verdicts


def test_the_zones_straddle_the_utc_date_at_any_hour():
    now = datetime.now(timezone.utc)
    assert any(now.astimezone(ZoneInfo(z)).date() != now.date() for z in ZONES)
