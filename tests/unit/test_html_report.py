"""report.html (pytest-html): skips grouped by reason after the result counts, each skipped
row's log its reason on one line instead of pytest's raw (file, line, reason) tuple."""

from __future__ import annotations

import html
import json
import re

import pytest

pytest_plugins = ["pytester"]
pytest.importorskip("pytest_html")

CONFTEST = """
from types import SimpleNamespace

from pytest_hpcnet.report.html_report import add_environment


def pytest_configure(config):
    cluster = SimpleNamespace(name="unit", region="cn-test")
    add_environment(config, SimpleNamespace(cluster=cluster, nodes=[], sha256="", expect_sha256=""))
"""
TESTS = """
import pytest

@pytest.mark.parametrize("n", range(3))
def test_audit(n):
    pytest.skip("no Alibaba Cloud credentials")

def test_bound():
    pytest.skip("expect.nccl unset <script>alert(1)</script>")

def test_ok():
    pass
"""


def test_skips_are_grouped_by_reason_and_logs_read_as_reasons(pytester: pytest.Pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_some=TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "--html=report.html")
    result.assert_outcomes(passed=1, skipped=4)
    page = (pytester.path / "report.html").read_text()
    counts = page.index('class="additional-summary postfix"')
    grouped = page[counts : page.index('id="results-table"')]
    assert "Skipped: 4, by reason" in grouped
    assert "3 × no Alibaba Cloud credentials" in grouped
    assert grouped.index("3 ×") < grouped.index("1 ×")  # most frequent first
    assert "<script>alert" not in page  # the reason is escaped
    blob = html.unescape(re.search(r'data-jsonblob="([^"]*)"', page).group(1))
    logs = [t["log"] for tests in json.loads(blob)["tests"].values() for t in tests]
    skipped = [log for log in logs if "skipped" in log.lower()]
    assert skipped and all("Skipped: " not in log and "test_some.py'" not in log for log in skipped)
    assert any(log.startswith("skipped: no Alibaba Cloud credentials") for log in skipped)


INVENTORY = """\
cluster: {name: unit, region: cn-test}
ssh: {connect_timeout_s: 1, connect_retries: 1}
nodes:
  - {name: "node[01-02]", host: "198.18.0.[201-202]"}
"""


@pytest.mark.parametrize("opt_out", [False, True])
def test_a_run_writes_report_html_and_junit_unless_pytest_is_told_not_to(
    pytester: pytest.Pytester, opt_out: bool
):
    """docs/gate.md: `-p no:html -p no:junitxml` leaves both out; the certificate stays."""
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_one="def test_x():\n    pass\n")
    switches = ("-p", "no:html", "-p", "no:junitxml") if opt_out else ()
    reports = pytester.path / "r"
    args = (".", "-p", "no:cacheprovider", "--inventory", "inv.yaml", "--reports-dir", str(reports))
    assert pytester.runpytest(*args, *switches).ret == 0
    (run,) = [p for p in reports.iterdir() if p.is_dir()]
    written = {p.name for p in run.iterdir()}
    assert {"certificate.html", "summary.json"} <= written
    pytest_reports = {"report.html", "junit.xml"}
    assert pytest_reports & written == (set() if opt_out else pytest_reports)
