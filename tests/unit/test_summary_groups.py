"""The run's summary groups what was not measured by node and cause: one line per cause
with its count, never the same reason once per check, nor `not measured: not measured:`."""

from __future__ import annotations

import ast
from pathlib import Path

pytest_plugins = ["pytester"]

INVENTORY = (
    "cluster: {name: unit, region: cn-test}\n"
    "ssh: {connect_timeout_s: 1, connect_retries: 1}\n"
    'nodes:\n  - {name: "n1", host: "198.18.0.201"}\n'
)
DOWN = "timed out waiting for the SSH handshake from 198.18.0.201:22"
SUITE = f"""\
import pytest
from pytest_hpcnet.requirements.verdict import failing, not_measured
from pytest_hpcnet.transport.results import NodeUnreachable

@pytest.mark.parametrize("check_id", ["erdma", "mtu", "tuning"])
def test_down(check_id):
    raise NodeUnreachable("n1", "{DOWN}")

for check_id in ("erdma", "mtu", "tuning"):
    test_down = pytest.mark.check(check_id, check_id)(test_down)

@pytest.mark.check("gpu_health", "GPU health")
def test_no_smi(check):
    check.judge(not_measured("n1: nvidia-smi is not installed", "install the NVIDIA driver"))

@pytest.mark.check("mtu", "MTU")
def test_bad(check):
    check.judge(failing("n1: eth1: MTU 1500, expected 8500"))
"""


def test_not_measured_is_one_line_per_node_and_cause(pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(".", "--hpcnet-inventory", "inv.yaml", "--hpcnet-reports-dir", "o")
    summary = result.stdout.str().split(" hpcnet ")[-1]
    assert "cluster unit (cn-test): 1 node\n" in summary
    assert "not measured: not measured" not in summary
    assert summary.count(DOWN) == 1, summary
    result.stdout.fnmatch_lines(
        [
            f"  n1 unreachable ({DOWN}): 3 checks not measured",
            "  n1: nvidia-smi is not installed (fix: install the NVIDIA driver): "
            "1 check not measured (gpu_health)",
        ]
    )
    assert summary.count("nvidia-smi is not installed") == 1, summary
    result.stdout.fnmatch_lines(
        ["    FAIL mtu [cluster] HPCNET-MTU: n1: eth1: MTU 1500, expected 8500"]
    )


def test_the_terminal_summary_does_not_import_the_session():
    source = Path(__file__).parents[2] / "pytest_hpcnet/report/terminal_summary.py"
    tree = ast.parse(source.read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "pytest_hpcnet.session" not in imported
