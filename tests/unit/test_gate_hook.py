"""The generic action hook: argv from the template, timeout, output kept."""

from __future__ import annotations

import shlex
import sys
import time

from pytest_hpcnet.gate.hook import hook_argv, run_hook
from pytest_hpcnet.gate.judge import NodeJudgement
from pytest_hpcnet.inventory.gate_settings import ActionSettings

HOSTILE = NodeJudgement("node02", "fail", ["mtu", "tuning"], ["a'b $(reboot)", "c; rm -rf /"])


def test_placeholders_stay_single_arguments_whatever_they_hold():
    settings = ActionSettings(
        command="kubectl taint nodes {slurm_node} 'hpcnet={checks}:NoSchedule' --why {reasons}"
    )
    argv = hook_argv(settings, HOSTILE, "gpu-node02")
    assert argv == (
        "kubectl",
        "taint",
        "nodes",
        "gpu-node02",
        "hpcnet=mtu,tuning:NoSchedule",
        "--why",
        "a'b $(reboot); c; rm -rf /",
    )
    assert tuple(shlex.split(shlex.join(argv))) == argv


def test_without_placeholders_node_checks_reasons_are_appended():
    argv = hook_argv(ActionSettings(command="/usr/local/bin/ticket --queue hpc"), HOSTILE)
    assert argv[-3:] == ("node02", "mtu,tuning", "a'b $(reboot); c; rm -rf /")


def test_hook_output_and_status_are_kept():
    code = "import sys; print('args', sys.argv[1:]); sys.exit(3)"
    result = run_hook("node02", (sys.executable, "-c", code, "node02", "x y"), 10)
    assert result.exit_status == 3 and not result.ok and not result.timed_out
    assert "args ['node02', 'x y']" in result.output
    assert result.record()["command"] == result.command


def test_hook_timeout_kills_the_whole_process_group():
    code = "import subprocess, time; subprocess.Popen(['sleep', '30']); time.sleep(30)"
    started = time.monotonic()
    result = run_hook("node02", (sys.executable, "-c", code), 0.5)
    assert result.timed_out and result.exit_status is None and not result.ok
    assert time.monotonic() - started < 10


def test_a_missing_program_is_a_failed_result_not_an_exception():
    result = run_hook("node02", ("/nonexistent/hook",), 1)
    assert result.exit_status is None and "cannot run" in result.output
