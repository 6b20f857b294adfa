"""A shipped suite test is a fetch and `check.judge(...)`: it parses nothing, builds no
measurement, raises no skip, failure or `NotMeasured`, reads no raw facts section, spells no
section name and compares nothing with a number (a bound lives in the judge and the
profiles). Read with `ast` over every `pytest_hpcnet/suites/test_*.py`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.fact_sections import SECTIONS

SUITES = Path(__file__).resolve().parents[2] / "pytest_hpcnet" / "suites"
FILES = sorted(SUITES.glob("test_*.py"))
SECTION_NAMES = {s.name for s in SECTIONS}
RAW_READS = {"text", "whole"}
STOPS = {"skip", "fail", "xfail", "exit"}

ALLOWED: dict[str, set[str]] = {
    # an unset bound, or an audit that cannot run here, is a plain skip (in scope, not
    # measured, exit status 0): no verdict outcome ends a test so yet (Check.judge ends
    # `not_measured` as a failure), so these stay until one does
    "test_cloud_audit.py": {"pytest.skip"},
    "test_rdma_perftest.py": {"pytest.skip"},
}
"""Findings a file may still have (each listed finding must still be there: the list only
shrinks)."""


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _is_number(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    )


def findings(source: str) -> set[str]:
    """What makes a suite more than a fetch and a judge, one line per kind and name."""
    found: set[str] = set()
    tree = ast.parse(source)
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    marks = {  # a requirement id may be a section's name too (`erdma_gdr`)
        id(arg)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and _name(n.func) == "mark"
        for arg in n.args
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _name(node.func)
            if name.startswith("parse"):
                found.add(f"call {name}")
            if name in ("Measurement", "NotMeasured"):
                found.add(f"builds {name}")
            if name == "measure":
                found.add("builds a measurement (check.measure)")
            if name in RAW_READS and isinstance(node.func, ast.Attribute):
                found.add(f"raw section read .{name}()")
            if (
                name in STOPS
                and isinstance(node.func, ast.Attribute)
                and _name(node.func.value) == "pytest"
            ):
                found.add(f"pytest.{name}")
        if isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if _name(raised) == "NotMeasured":
                found.add("raise NotMeasured")
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in SECTION_NAMES
            and id(node) not in docstrings | marks
        ):
            found.add(f"section name {node.value!r}")
        if isinstance(node, ast.Compare) and any(
            _is_number(n) for n in (node.left, *node.comparators)
        ):
            found.add(f"compares with a number: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_suite_is_a_fetch_and_a_judge(path: Path):
    extra = findings(path.read_text()) - ALLOWED.get(path.name, set())
    assert not extra, f"{path.name}: {sorted(extra)}"


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_allow_list_only_shrinks(name: str):
    gone = ALLOWED[name] - findings((SUITES / name).read_text())
    assert not gone, f"{name}: no longer does {sorted(gone)}: drop them from ALLOWED"


@pytest.mark.parametrize(
    "line, kind",
    [
        ("x = parse_topo(t)", "call parse_topo"),
        ("m = Measurement('a', 1)", "builds Measurement"),
        ("check.measure('a', 1)", "builds a measurement (check.measure)"),
        ("pytest.skip('no')", "pytest.skip"),
        ("pytest.fail('no')", "pytest.fail"),
        ("raise NotMeasured('x')", "raise NotMeasured"),
        ("facts.text('x')", "raw section read .text()"),
        ("facts.whole(s)", "raw section read .whole()"),
        ("s = 'gpu_topo'", "section name 'gpu_topo'"),
        ("facts.text('erdma_gdr')", "section name 'erdma_gdr'"),
        ("ok = found < 2", "compares with a number: found < 2"),
    ],
)
def test_each_kind_is_seen(line: str, kind: str):
    assert kind in findings(line)


def test_a_thin_suite_passes():
    source = (
        "@mark('erdma_gdr')\n"
        "def test_x(cluster, node, check):\n"
        "    '''The gpu_topo section.'''\n"
        "    check.judge(judge_x(cluster.facts(node, check).get(GPU_TOPO), cluster.expect))\n"
    )
    assert findings(source) == set()


def test_reported_figures_keep_their_own_outcome():
    """A figure a judge reports beside its decision (what the suites recorded with
    `check.measure`) keeps its own outcome, and the verdict's failure keeps its line."""
    from pytest_hpcnet.requirements.verdict import Measurement, failing

    shown = Measurement("eris", 1.0, "devices", 2, "==", "expect.erdma.eris")
    verdict = failing("n1: 1 eRDMA device, 2 expected").with_reported(shown)
    assert [(m.name, m.outcome) for m in verdict.measurements] == [
        ("eris", None),
        ("judge", "fail"),
    ]
    assert verdict.outcome == "fail"
