"""Every registry entry is a whole requirement, and the lists that pages show derive from it.

Whole: its judges resolve to functions a suite test hands to `check.judge`, a suite test
carries its `check` marker and its selector marker, the facts sections it names are ones the
facts script gathers, a lab fault breaks it (or it is in `NO_LAB_FAULT`, printed), and
docs/checks.md has its row. Each check is a function returning its problems, so the tests at
the end can show that each one fails on a broken entry.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

from pytest_hpcnet import suites
from pytest_hpcnet.campaigns.fact_sections import SECTIONS as FACT_SECTIONS
from pytest_hpcnet.lab.faults import KINDS
from pytest_hpcnet.report import merge, trends
from pytest_hpcnet.report.certificate import gpu as certificate_gpu
from pytest_hpcnet.requirements.registry import (
    BY_ID,
    GPU_NODES,
    GPUS_UNDER_LOAD,
    REQUIREMENTS,
    Figure,
    Requirement,
    group_columns,
    group_requirements,
    judge_functions,
    pair_requirements,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_hpcnet"
SELECTORS = ("static", "benchmark", "gpu_load", "burnin")
PAIR_FIXTURES = {"node_pair", "perftest_pair"}
NO_LAB_FAULT = frozenset(
    {
        "reachability",  # a node down is the lab's `down`, not a fault kind
        "erdma_gdr",
        "acl",
        "instance_type",
        "memlock",
        "erdma_gdr_bw",
    }
)
"""The requirements no lab fault breaks yet: each one to take out when its fault arrives."""


def _text(folder: Path, pattern: str) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob(pattern)))


JUDGES = _text(PACKAGE / "requirements", "*.py")
CHECKS_DOC = (ROOT / "docs" / "checks.md").read_text(encoding="utf-8")


@dataclasses.dataclass(frozen=True)
class SuiteTest:
    """A shipped suite test as the registry sees it."""

    name: str
    check_id: str | None  # its nearest `check` marker's id
    selectors: frozenset[str]
    pair: bool  # parametrized by a node pair
    source: str


def _marks(obj: object) -> list[pytest.Mark]:
    marks = getattr(obj, "pytestmark", [])
    return list(marks) if isinstance(marks, list) else [marks]


def _suite_tests() -> list[SuiteTest]:
    found = []
    for info in pkgutil.iter_modules(suites.__path__):
        module = importlib.import_module(f"{suites.__name__}.{info.name}")
        for name, func in inspect.getmembers(module, inspect.isfunction):
            if not name.startswith("test_") or func.__module__ != module.__name__:
                continue
            marks = _marks(func) + _marks(module)  # the function's first: the nearest
            checks = [m.args[0] for m in marks if m.name == "check"]
            found.append(
                SuiteTest(
                    f"{info.name}::{name}",
                    checks[0] if checks else None,
                    frozenset(m.name for m in marks if m.name in SELECTORS),
                    bool(PAIR_FIXTURES & set(inspect.signature(func).parameters)),
                    inspect.getsource(func),
                )
            )
    return found


SUITE_TESTS = _suite_tests()


def judge_problems(requirement: Requirement, tests: list[SuiteTest]) -> list[str]:
    """Its judges resolve, are callable, and a test of it calls each one."""
    if not requirement.judges:
        return ["no judge"]
    try:
        functions = judge_functions(requirement.id)
    except (ImportError, AttributeError) as exc:
        return [f"a judge does not resolve: {exc}"]
    calls = "\n".join(t.source for t in tests if t.check_id == requirement.id)
    problems = [f"{f!r} is not callable" for f in functions if not callable(f)]
    problems += [
        f"no suite test of it calls {f.__name__}"
        for f in functions
        if callable(f) and not re.search(rf"\b{f.__name__}\(", calls)
    ]
    return problems


def suite_problems(requirement: Requirement, tests: list[SuiteTest]) -> list[str]:
    """A suite test carries its check marker and its selector; `pair` is what they measure."""
    mine = [t for t in tests if t.check_id == requirement.id]
    if not mine:
        return [f'no suite test carries mark("{requirement.id}")']
    problems = [
        f"{t.name} is not marked {requirement.marker}"
        for t in mine
        if requirement.marker not in t.selectors
    ]
    measured_per_pair = any(t.pair for t in mine)
    if measured_per_pair != requirement.pair:
        problems.append(f"pair={requirement.pair}, a test of it per node pair: {measured_per_pair}")
    return problems


def section_problems(requirement: Requirement, gathered: set[str]) -> list[str]:
    """Every section it names is one the facts script gathers."""
    return [f"{s!r} is no facts section" for s in requirement.sections if s not in gathered]


def fault_problems(requirement: Requirement, broken_by: dict[str, list[str]]) -> list[str]:
    """A lab fault breaks it, or it is allow-listed; an allow-listed one has none yet."""
    faults = broken_by.get(requirement.id, [])
    if requirement.id in NO_LAB_FAULT:
        return [f"allow-listed, but {faults} break it: take it out"] if faults else []
    return [] if faults else ["no lab fault breaks it (lab/faults.py `breaks`)"]


def docs_problems(requirement: Requirement, doc: str) -> list[str]:
    """docs/checks.md has a table row `| title (`id`) | ...`."""
    if re.search(rf"^\| [^|\n]*\(`{re.escape(requirement.id)}`\) \|", doc, re.M):
        return []
    return [f"docs/checks.md has no row for `{requirement.id}`"]


def figure_problems(requirement: Requirement, judges: str) -> list[str]:
    """Each figure is one a judge records, in a unit a judge writes."""
    problems = []
    for figure in requirement.figures:
        if not re.search(rf"[\"']{re.escape(figure.name)}[\"']", judges):
            problems.append(f"no judge in requirements/ records {figure.name!r}")
        if not figure.unit or not re.search(rf"[\"']{re.escape(figure.unit)}[\"']", judges):
            problems.append(f"{figure.name}: no judge writes the unit {figure.unit!r}")
        if figure.counter and not figure.trended:
            problems.append(f"{figure.name}: a counter is trended")
    return problems


def _broken_by() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for kind in KINDS.values():
        for check_id in kind.breaks:
            found.setdefault(check_id, []).append(kind.name)
    return found


BROKEN_BY = _broken_by()
GATHERED = {s.name for s in FACT_SECTIONS}
ids = pytest.mark.parametrize("requirement", REQUIREMENTS, ids=lambda r: r.id)


@ids
def test_judges_resolve_and_a_suite_test_calls_them(requirement):
    assert judge_problems(requirement, SUITE_TESTS) == []


@ids
def test_a_suite_test_carries_its_markers(requirement):
    assert suite_problems(requirement, SUITE_TESTS) == []


@ids
def test_its_sections_are_facts_sections(requirement):
    assert section_problems(requirement, GATHERED) == []


@ids
def test_a_lab_fault_breaks_it(requirement):
    assert fault_problems(requirement, BROKEN_BY) == []


@ids
def test_docs_checks_has_its_row(requirement):
    assert docs_problems(requirement, CHECKS_DOC) == []


@ids
def test_each_figure_is_one_a_judge_records(requirement):
    assert figure_problems(requirement, JUDGES) == []


def test_no_lab_fault_allow_list(capsys):
    """The allow-list is printed (`-s`) and names only registered requirements."""
    with capsys.disabled():
        print(f"\nrequirements no lab fault breaks yet: {', '.join(sorted(NO_LAB_FAULT))}")
    assert set(BY_ID) >= NO_LAB_FAULT


def test_every_fault_breaks_registered_requirements():
    unknown = {k.name: [c for c in k.breaks if c not in BY_ID] for k in KINDS.values()}
    assert {k: v for k, v in unknown.items() if v} == {}


def test_fault_declarations_agree_with_the_lab_tests():
    """What the static lab tests see each fault fail (`tests/lab`) is what the fault declares
    it breaks among the static requirements."""
    from tests.lab import test_lab_gpu, test_static_suite

    seen = {kind: checks for kind, (_, checks) in test_static_suite.FAULTS.items()}
    seen.update(
        {
            kind: set(check) if isinstance(check, tuple) else {check}
            for kind, (_, check, _) in test_lab_gpu.FAULTS.items()
        }
    )
    declared = {
        kind: {c for c in KINDS[kind].breaks if BY_ID[c].marker == "static"} for kind in seen
    }
    assert declared == seen


def test_every_suite_test_is_of_a_registered_requirement():
    assert [t.name for t in SUITE_TESTS if t.check_id not in BY_ID] == []


# -- each check fails on a broken entry -------------------------------------------------------

MTU = BY_ID["mtu"]


def test_a_judge_that_does_not_resolve_is_caught(monkeypatch):
    broken = dataclasses.replace(MTU, judges=("mtu:judge_no_such_thing",))
    monkeypatch.setitem(BY_ID, "mtu", broken)
    assert judge_problems(broken, SUITE_TESTS)[0].startswith("a judge does not resolve")
    assert judge_problems(dataclasses.replace(MTU, judges=()), SUITE_TESTS) == ["no judge"]


def test_a_judge_no_suite_test_calls_is_caught(monkeypatch):
    broken = dataclasses.replace(MTU, judges=("mtu:judge_path_mtu",))  # path_mtu's
    monkeypatch.setitem(BY_ID, "mtu", broken)
    assert judge_problems(broken, SUITE_TESTS) == ["no suite test of it calls judge_path_mtu"]


def test_a_requirement_without_suite_test_or_marker_is_caught():
    assert suite_problems(dataclasses.replace(MTU, id="mtux"), SUITE_TESTS) == [
        'no suite test carries mark("mtux")'
    ]
    wrong = suite_problems(dataclasses.replace(MTU, marker="benchmark"), SUITE_TESTS)
    assert wrong and all("is not marked benchmark" in p for p in wrong)
    assert suite_problems(dataclasses.replace(MTU, pair=True), SUITE_TESTS)
    assert suite_problems(dataclasses.replace(BY_ID["path_mtu"], pair=False), SUITE_TESTS)


def test_an_unknown_section_is_caught():
    broken = dataclasses.replace(MTU, sections=("links", "gpu_qeury"))
    assert section_problems(broken, GATHERED) == ["'gpu_qeury' is no facts section"]


def test_a_requirement_no_fault_breaks_is_caught():
    assert fault_problems(MTU, {}) == ["no lab fault breaks it (lab/faults.py `breaks`)"]
    allowed = BY_ID["memlock"]
    assert fault_problems(allowed, {"memlock": ["gpu-memlock"]})  # stale allow-list entry


def test_a_missing_docs_row_is_caught():
    assert docs_problems(MTU, CHECKS_DOC.replace("(`mtu`)", "(mtu)")) == [
        "docs/checks.md has no row for `mtu`"
    ]


def test_a_figure_no_judge_records_is_caught():
    broken = dataclasses.replace(MTU, figures=(Figure("mtu_seen", "MTU", "bytes"),))
    assert figure_problems(broken, "Measurement('mtu_seen', v, 'frames')") == [
        "mtu_seen: no judge writes the unit 'bytes'"
    ]
    assert figure_problems(broken, "Measurement('other', v, 'bytes')") == [
        "no judge in requirements/ records 'mtu_seen'"
    ]


# -- the lists that pages show derive from the registry ---------------------------------------


def test_trends_follow_the_registry():
    registered = [(r.id, f.name, f.unit) for r in REQUIREMENTS for f in r.figures if f.trended]
    derived = [(f.check_id, f.name, f.unit) for f in trends.BURNIN_FIGURES]  # a node's summary
    assert [(f.check_id, f.name, f.unit) for f in trends.FIGURES] == registered + derived
    assert {c for c, _, _ in derived} == {"burnin"} and "burnin" in {r.id for r in REQUIREMENTS}
    assert ("gpu_compute", "bf16_tflops", "TFLOPS") in registered
    assert ("tuning", "errors", "packets") in registered


def test_gpu_tables_follow_the_registry():
    assert group_requirements(GPUS_UNDER_LOAD) == certificate_gpu.LOAD_CHECKS
    assert "gpu_nccl_node" not in certificate_gpu.LOAD_CHECKS  # a node figure, not a GPU's
    assert group_requirements(GPU_NODES) == certificate_gpu.GPU_CHECKS
    assert "versions" not in certificate_gpu.GPU_CHECKS  # the versions table has it
    columns = group_columns(GPUS_UNDER_LOAD)
    assert [f.name for f in columns][:2] == ["bf16_tflops", "tf32_tflops"]
    assert len({f.position for f in columns}) == len(columns), "two columns at one position"
    template = (PACKAGE / "templates" / "certificate_gpu.html.j2").read_text(encoding="utf-8")
    assert "bf16_tflops" not in template, "the template lists figures the registry holds"


def test_merge_pairs_follow_the_registry():
    assert pair_requirements() == merge.PAIR_CHECKS
    assert {"path_mtu", "ib_write_bw", "erdma_eri_bw"} <= set(merge.PAIR_CHECKS)


def test_no_hand_list_of_requirement_ids_outside_the_registry():
    """No module of the report, gate, scope or session layers writes out three or more
    distinct registered ids in a row (a hand list the registry should derive)."""
    where = [*(PACKAGE / "report").rglob("*.py"), *(PACKAGE / "gate").rglob("*.py")]
    where += [PACKAGE / n for n in ("session.py", "plugin.py", "run_scope.py")]
    where += list((PACKAGE / "templates").glob("*.j2"))
    quoted = "|".join(re.escape(i) for i in BY_ID)
    hand_list = re.compile(rf"(?:[\"']({quoted})[\"']\s*,\s*){{2,}}[\"']({quoted})[\"']")
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0)[:60]}"
        for p in where
        for m in hand_list.finditer(p.read_text(encoding="utf-8"))
        if len(set(re.findall(rf"[\"']({quoted})[\"']", m.group(0)))) >= 3
    ]
    assert found == []
