"""The open-files limit is raised to what one connection per node needs, or the run says
in one line, before its first connection, that the hard limit is short."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.transport import open_files


def inventory(tmp_path, count: int, jump: bool = False):
    path = tmp_path / "inv.yaml"
    nodes = "".join(
        f"  - {{name: n{i}, host: 10.0.{i // 250}.{i % 250 + 1}}}\n" for i in range(count)
    )
    ssh = "ssh: {jump_host: bastion}\n" if jump else ""
    path.write_text(f"cluster: {{name: c, region: r}}\n{ssh}nodes:\n{nodes}")
    return load_inventory(path)


@pytest.fixture
def limits(monkeypatch):
    """resource's NOFILE limit, faked: (soft, hard) and every setrlimit call."""
    state = {"now": (1024, 524288), "set": []}
    monkeypatch.setattr(open_files.resource, "getrlimit", lambda which: state["now"])

    def setrlimit(which, value):
        assert which == resource.RLIMIT_NOFILE
        state["set"].append(value)
        state["now"] = value

    monkeypatch.setattr(open_files.resource, "setrlimit", setrlimit)
    return state


def test_a_thousand_nodes_need_more_than_the_usual_soft_limit(tmp_path):
    needed = open_files.open_files_needed(inventory(tmp_path, 1024))
    assert needed > 1024 * 3
    assert open_files.open_files_needed(inventory(tmp_path, 1024, jump=True)) > needed


def test_the_soft_limit_is_raised_to_what_the_nodes_need(limits):
    assert open_files.raise_open_files_limit(5376) is None
    assert limits["set"] == [(5376, 524288)]


def test_a_high_enough_soft_limit_is_left_alone(limits):
    limits["now"] = (65536, 65536)
    assert open_files.raise_open_files_limit(5376) is None
    assert limits["set"] == []


def test_a_short_hard_limit_is_one_line_naming_both_figures(limits):
    limits["now"] = (1024, 4096)
    message = open_files.raise_open_files_limit(5376)
    assert message is not None and "\n" not in message
    assert "4096" in message and "5376" in message and "ulimit -n 5376" in message
    assert limits["set"] == []


def test_the_run_refuses_before_connecting_when_the_hard_limit_is_short(tmp_path):
    path = tmp_path / "inv.yaml"
    nodes = "".join(f"  - {{name: n{i}, host: 198.18.0.{i + 1}}}\n" for i in range(100))
    path.write_text(f"cluster: {{name: c, region: r}}\nnodes:\n{nodes}")

    def hard_300():
        resource.setrlimit(resource.RLIMIT_NOFILE, (300, 300))

    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--inventory", str(path), "-k", "no_such_test"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=hard_300,
    )
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout[-2000:]
    assert "open-files limit is 300" in run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    assert not (tmp_path / "reports").exists()  # refused before the run began
