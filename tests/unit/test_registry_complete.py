"""Every registry entry is a whole requirement, and the lists that pages show derive from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_hpcnet.report import certificate_gpu, trends
from pytest_hpcnet.requirements.registry import (
    GPUS_UNDER_LOAD,
    REQUIREMENTS,
    group_columns,
    group_requirements,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_hpcnet"


def _text(folder: Path, pattern: str) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob(pattern)))


SUITES = _text(PACKAGE / "suites", "test_*.py")
JUDGES = _text(PACKAGE / "requirements", "*.py")
DOCS = _text(ROOT / "docs", "*.md")


@pytest.mark.parametrize("requirement", REQUIREMENTS, ids=lambda r: r.id)
def test_requirement_has_a_suite_test_and_a_docs_row(requirement):
    assert f'mark("{requirement.id}")' in SUITES, f"no suite test carries mark({requirement.id!r})"
    assert f"`{requirement.id}`" in DOCS, f"docs/ never names `{requirement.id}`"


@pytest.mark.parametrize("requirement", REQUIREMENTS, ids=lambda r: r.id)
def test_each_figure_is_one_a_judge_records(requirement):
    for figure in requirement.figures:
        assert re.search(rf"[\"']{re.escape(figure.name)}[\"']", JUDGES), (
            f"{requirement.id}: no judge in requirements/ records {figure.name!r}"
        )
        assert not figure.counter or figure.trended, f"{figure.name}: a counter is trended"


def test_trends_follow_the_registry():
    registered = [(r.id, f.name) for r in REQUIREMENTS for f in r.figures if f.trended]
    assert [(f.check_id, f.name) for f in trends.FIGURES] == registered
    assert ("gpu_compute", "bf16_tflops") in registered
    assert ("tuning", "errors") in registered


def test_gpu_table_follows_the_registry():
    assert group_requirements(GPUS_UNDER_LOAD) == certificate_gpu.LOAD_CHECKS
    assert "gpu_nccl_node" not in certificate_gpu.LOAD_CHECKS  # a node figure, not a GPU's
    columns = group_columns(GPUS_UNDER_LOAD)
    assert [f.name for f in columns][:2] == ["bf16_tflops", "tf32_tflops"]
    assert len({f.position for f in columns}) == len(columns), "two columns at one position"
    template = (PACKAGE / "templates" / "certificate_gpu.html.j2").read_text(encoding="utf-8")
    assert "bf16_tflops" not in template, "the template lists figures the registry holds"
