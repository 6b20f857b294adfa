"""A facts section is read through its probe's `Section`: parsed once per node, never
spelled outside its probe."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.facts import MissingMeasurement, NodeFacts
from pytest_hpcnet.probes.gpu import GPU_QUERY
from pytest_hpcnet.probes.sections import Section, SectionOutput
from pytest_hpcnet.transport.results import CommandResult

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_hpcnet"


def _facts(status: int | None) -> NodeFacts:
    result = CommandResult("n1", "facts", 0, "", "", duration_s=0.1, started_at=0.0)
    return NodeFacts("n1", result, {"counted": SectionOutput("a\nb\n", status)})


def test_get_parses_once_per_node():
    calls: list[str] = []
    section = Section("counted", lambda text: calls.append(text) or len(text.split()))
    facts = _facts(0)
    assert facts.get(section) == 2
    assert facts.get(section) == 2
    assert calls == ["a\nb\n"]


@pytest.mark.parametrize("status", [None, 124])
def test_get_of_a_cut_or_timed_out_section_is_not_measured(status):
    section = Section("counted", lambda text: pytest.fail("a partial section was parsed"))
    with pytest.raises(MissingMeasurement, match="counted"):
        _facts(status).get(section)


def test_gpu_query_is_spelled_only_by_its_probe():
    spelled = [
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if f'"{GPU_QUERY.name}"' in p.read_text(encoding="utf-8")
    ]
    assert spelled == ["probes/gpu.py"]
