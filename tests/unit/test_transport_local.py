"""`connection: local` commands: output bounded while read, a command past its time killed
with its whole process group, a shell that cannot start reported, never raised."""

from __future__ import annotations

import os
import time

from pytest_hpcnet.transport import local


def test_output_past_the_limit_is_cut_and_flagged():
    out, err, status, timed_out, truncated = local.run_local(
        "head -c 3000000 /dev/zero; echo oops >&2", 10, 1, 1000
    )
    assert (len(out), err, status, timed_out, truncated) == (1000, b"oops\n", 0, False, True)


def test_a_command_past_its_time_is_killed_with_its_children(monkeypatch):
    monkeypatch.setattr(local, "KILL_SLACK_S", 0.3)
    t0 = time.monotonic()
    out, _, status, timed_out, _ = local.run_local("sleep 30 & echo $!; wait", 0.1, 0.0, 1000)
    assert (status, timed_out) == (None, True) and time.monotonic() - t0 < 5
    child = int(out.split()[0])
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{child}")  # the background sleep went with the group


def test_a_shell_that_cannot_start_is_reported(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(7, "Argument list too long")

    monkeypatch.setattr(local.subprocess, "Popen", refuse)
    out, err, status, timed_out, truncated = local.run_local("true", 1, 1, 10)
    assert (out, status, timed_out, truncated) == (b"", None, False, False)
    assert b"cannot run sh here" in err and b"Argument list too long" in err
