"""Progress lines: a phase says when it starts and how it ended; they show past capture."""

from __future__ import annotations

import pytest

from pytest_hpcnet.campaigns.progress import phase

pytest_plugins = ["pytester"]

INVENTORY = """\
cluster: {name: unit-cluster, region: cn-test}
nodes:
  - {name: "gpu-[1-3]", host: "198.18.0.[201-203]"}
"""

SUITE = """\
def test_long_phase(cluster):
    print("captured test output")
    cluster.progress("facts from 3 nodes ...")
"""


def test_phase_reports_start_outcome_and_duration():
    lines: list[str] = []
    with phase(lines.append, "facts from 3 nodes") as outcome:
        outcome.text = "3 answered, 0 unreachable"
    assert lines[0] == "facts from 3 nodes ..."
    assert lines[1].startswith("facts from 3 nodes: 3 answered, 0 unreachable (")
    assert lines[1].endswith(" s)")


def test_phase_reports_its_end_when_it_fails():
    lines: list[str] = []
    with pytest.raises(RuntimeError), phase(lines.append, "fio on 3 nodes"):
        raise RuntimeError("interrupted")
    assert len(lines) == 2 and lines[1].startswith("fio on 3 nodes: done (")


def test_progress_shows_while_the_test_output_is_captured(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(".", "--inventory", "inv.yaml", "--reports-dir", "out", "-q")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["hpcnet: facts from 3 nodes ..."])
    assert "captured test output" not in result.stdout.str()


def test_progress_silent_with_qq(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(".", "--inventory", "inv.yaml", "--reports-dir", "out", "-qq")
    assert result.ret == pytest.ExitCode.OK
    assert "hpcnet: facts" not in result.stdout.str()
