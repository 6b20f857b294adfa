"""A check that fails or is not measured is one line in pytest's output, whatever `--tb`
says, and pytest's last line counts what the plugin counts (not measured apart)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

pytest_plugins = ["pytester"]

INVENTORY = (
    "cluster: {name: unit, region: cn-test}\n"
    "ssh: {connect_timeout_s: 1, connect_retries: 1}\n"
    'nodes:\n  - {name: "n1", host: "198.18.0.201"}\n'
)
SUITE = """\
import pytest
from pytest_hpcnet.requirements.verdict import failing, not_measured, passing

@pytest.mark.check("gpu_health", "GPU health")
def test_cut(check):
    check.judge(not_measured("n1: GPU 3: nvidia-smi is not installed", "install the NVIDIA driver"))

@pytest.mark.check("mtu", "MTU")
def test_bad(check):
    check.judge(failing("n1: eth1 (erdma_1): MTU 1500, expected 8500", fix="set MTU 8500"))

@pytest.mark.check("mtu", "MTU")
def test_ok(check):
    check.judge(passing())
"""


@pytest.mark.parametrize("tb", ["auto", "long", "short"])
def test_each_check_is_one_line_and_the_counts_agree(pytester, tb):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(
        ".", "--hpcnet-inventory", "inv.yaml", "--hpcnet-reports-dir", "out", f"--tb={tb}"
    )
    out = result.stdout.str()
    assert result.ret == 1  # a run with a failure or a gap is never a clean exit
    for crash in ("Traceback", "Verdict(", "object at 0x", "def judge", "raise "):
        assert crash not in out, out
    failures = out.split(" FAILURES ")[1].split(" hpcnet ")[0].splitlines()
    shown = [ln for ln in failures if not ln.startswith(("_", "=", "-"))]
    assert shown == [
        "test_suite.py:10: [HPCNET-MTU] n1: eth1 (erdma_1): MTU 1500, expected 8500 "
        "(fix: set MTU 8500)"
    ]
    result.stdout.fnmatch_lines(
        [
            "checks: 1 passed, 1 failed, 1 not measured, 0 errors, 0 waived, 0 skipped",
            "*= 1 failed, 1 passed, 1 not measured in *",
        ]
    )
    # the records are the same as ever
    (run,) = (pytester.path / "out").iterdir()
    lines = (run / "evidence.jsonl").read_text().splitlines()
    verdicts = {json.loads(ln)["nodeid"].split("::")[1]: json.loads(ln)["verdict"] for ln in lines}
    assert verdicts == {"test_cut": "not_measured", "test_bad": "fail", "test_ok": "pass"}


def test_not_measured_reads_as_such_in_junit_and_verbose(pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(
        ".", "--hpcnet-inventory", "inv.yaml", "--hpcnet-reports-dir", "out", "-v"
    )
    result.stdout.fnmatch_lines(["*test_cut NOT MEASURED*"])
    (run,) = (pytester.path / "out").iterdir()
    root = ET.parse(run / "junit.xml").getroot()
    (case,) = [c for c in root.iter("testcase") if c.get("name") == "test_cut"]
    (failure,) = case.iter("failure")
    message = failure.get("message")
    assert message.endswith(
        "not measured: n1: GPU 3: nvidia-smi is not installed (fix: install the NVIDIA driver)"
    )
    assert "\n" not in failure.text.strip()
    # a failure carries its fault code as a testcase property; a gap carries none
    (bad,) = [c for c in root.iter("testcase") if c.get("name") == "test_bad"]
    props = [(p.get("name"), p.get("value")) for p in bad.iter("property")]
    assert props == [("hpcnet_fault_code", "HPCNET-MTU")]
    assert [p.get("name") for p in case.iter("property")] == []
