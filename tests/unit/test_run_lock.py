"""Two runs of one cluster at once: the second refuses naming the first's PID and start; a
lock left by a killed run is taken over, and said; `hpcnet gate run`'s pytest child runs
under its parent's lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_hpcnet.gate.runlock import ENV, RunLocked, lock_path, take_run_lock

pytest_plugins = ["pytester"]

HOLDER = """\
import sys
from datetime import datetime, timezone
from pathlib import Path
from pytest_hpcnet.gate.runlock import take_run_lock
at = datetime(2026, 11, 30, 2, 0, 5, tzinfo=timezone.utc)
lock = take_run_lock(Path(sys.argv[1]), "prod", at)
print("held", flush=True)
sys.stdin.read()
lock.release()
"""


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock of cluster `prod` in `tmp_path` until its stdin ends."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline() == "held\n"  # blocks until it holds the lock: no timing
    yield proc
    if proc.poll() is None:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_second_run_refuses_naming_the_first(tmp_path, holder):
    with pytest.raises(RunLocked) as refused:
        take_run_lock(tmp_path, "prod")
    message = str(refused.value)
    assert f"PID {holder.pid} " in message
    assert "started 2026-11-30 02:00:05 UTC" in message
    assert "\n" not in message
    take_run_lock(tmp_path, "other").release()  # another cluster is not blocked


def test_lock_of_a_killed_run_is_taken_over_and_said(tmp_path, holder):
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    lock = take_run_lock(tmp_path, "prod")
    assert f"stale run lock of cluster prod (PID {holder.pid} " in lock.note
    assert lock.note.endswith("; gone)")
    lock.release()
    again = take_run_lock(tmp_path, "prod")  # a clean release leaves nothing stale
    assert again.note == ""
    again.release()


def test_finished_run_releases(tmp_path, holder):
    holder.stdin.close()
    holder.wait(timeout=30)
    lock = take_run_lock(tmp_path, "prod")
    assert lock.note == ""
    assert str(os.getpid()) in lock_path(tmp_path, "prod").read_text()
    lock.release()
    assert not lock_path(tmp_path, "prod").exists()


def test_child_of_the_holder_runs_under_its_lock(tmp_path, monkeypatch):
    lock = take_run_lock(tmp_path, "prod")
    monkeypatch.setenv(ENV, str(lock_path(tmp_path, "prod")))
    child = f"""\
from pathlib import Path
from pytest_hpcnet.gate.runlock import take_run_lock
take_run_lock(Path({str(tmp_path)!r}), "prod")
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert out.stdout == "ok\n", out.stderr
    monkeypatch.delenv(ENV)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert "RunLocked" in out.stderr  # without the variable, even a child is refused
    lock.release()


INVENTORY = """\
cluster: {name: prod, region: cn-test}
ssh: {connect_timeout_s: 1, connect_retries: 1}
nodes:
  - {name: "n[1-2]", host: "198.18.0.[201-202]"}
"""


def test_pytest_run_refuses_with_one_line(pytester: pytest.Pytester, holder):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_one="def test_x():\n    pass\n")
    reports = Path(holder.args[-1])
    result = pytester.runpytest_subprocess(
        ".", "--inventory", "inv.yaml", "--reports-dir", str(reports)
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*another hpcnet run of cluster prod is in progress (PID {holder.pid} on *"]
    )
    assert [p.name for p in reports.iterdir()] == [".hpcnet-prod.lock"]  # the holder's, no run


def test_pytest_run_releases_at_the_end(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_one="def test_x():\n    pass\n")
    for _ in range(2):
        result = pytester.runpytest(".", "--inventory", "inv.yaml", "--reports-dir", "r")
        assert result.ret == 0
    assert not lock_path(pytester.path / "r", "prod").exists()


def test_reports_path_that_is_a_file_is_one_clear_error(pytester: pytest.Pytester):
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_one="def test_x():\n    pass\n")
    (pytester.path / "r").write_text("a file where the folder should be")
    result = pytester.runpytest_subprocess(".", "--inventory", "inv.yaml", "--reports-dir", "r")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: reports directory r is not writable: File exists"])
