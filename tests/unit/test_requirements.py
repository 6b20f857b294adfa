"""The requirement registry is the one catalogue: suites, certificate and plugin read it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.report.certificate.rows import DEFAULT_REQUIREMENTS
from pytest_hpcnet.requirements import registry

pytest_plugins = ["pytester"]

SUITES = Path(registry.__file__).resolve().parents[1] / "suites"


def suite_check_ids() -> dict[str, set[str]]:
    """check id -> the suite files whose `mark(id)` (or a literal check marker) names it."""
    found: dict[str, set[str]] = {}
    for path in sorted(SUITES.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            first = node.args[0]
            if name in ("mark", "check") and isinstance(first, ast.Constant):
                found.setdefault(first.value, set()).add(path.name)
    return found


def test_every_suite_check_is_registered_and_every_requirement_has_a_suite():
    used = suite_check_ids()
    assert set(used) == {r.id for r in registry.REQUIREMENTS}


def test_suites_take_titles_from_the_registry_not_literals():
    for path in SUITES.glob("test_*.py"):
        assert "mark.check(" not in path.read_text(), path.name


def test_marker_carries_the_registered_title():
    marker = registry.mark("mtu").mark
    assert marker.name == "check" and marker.args == ("mtu", "Jumbo MTU")
    with pytest.raises(KeyError, match="no requirement 'nope'"):
        registry.mark("nope")


def test_certificate_rows_follow_the_registry():
    specs = registry.certificate_specs()
    assert specs[0] == ("reachability", "Nodes reachable over SSH")
    assert specs[1:] == DEFAULT_REQUIREMENTS
    assert "perftest_localization" not in dict(specs)


def test_expectation_keys_exist():
    fields = set(Expectations.model_fields)
    for requirement in registry.REQUIREMENTS:
        assert set(requirement.expects) <= fields, requirement.id


def test_unregistered_check_keeps_its_id_as_title():
    assert registry.title("site_specific") == "site_specific"
    assert registry.title("nccl_busbw") == "NCCL bus bandwidth"


def test_terminal_summary_names_failing_requirements_by_registry_title(
    pytester: pytest.Pytester,
):
    pytester.makefile(
        ".yaml",
        inv="cluster: {name: unit, region: cn-test}\nnodes:\n  - {name: n1, host: 198.18.0.201}\n",
    )
    pytester.makepyfile(
        test_suite="""\
from pytest_hpcnet.requirements.registry import mark

@mark("mtu")
def test_mtu(check):
    assert False, "n1: mtu 1500"

@mark("erdma")
def test_erdma(check):
    pass
"""
    )
    result = pytester.runpytest(".", "--inventory", "inv.yaml", "--reports-dir", "r")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["  Jumbo MTU (mtu): 1 not passed"])
    assert "eRDMA devices (erdma)" not in result.stdout.str()
