"""`connection: local`: a node whose commands run on the controller itself, with no SSH (as
Ansible's `connection: local` and testinfra's `local://`): single-node burn-in, a Slurm
prolog, the whole suite on one GPU machine. Each command runs in `sh -c` under the same
`timeout` as on a remote node, stdin from /dev/null, in a process group of its own, its
output bounded alike (the first `limit` bytes of each stream are kept, the rest read and
dropped)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from typing import IO

LOCAL = "local"
CHUNK = 1 << 16
KILL_SLACK_S = 5.0
"""Past the node-side `timeout` and its grace, before the command's group is killed here."""


def run_local(
    wrapped: str, timeout_s: float, grace_s: float, limit: int
) -> tuple[bytes, bytes, int | None, bool, bool]:
    """(stdout, stderr, exit status, timed out, truncated) of `wrapped` (already under the
    node-side `timeout`) run here; a command the `timeout` could not end is killed with its
    whole process group. Never raises: a shell that cannot start is an exit status None and
    its reason on stderr."""
    try:
        proc = subprocess.Popen(
            ["sh", "-c", wrapped],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return b"", f"hpcnet: cannot run sh here: {exc}".encode(), None, False, False
    assert proc.stdout is not None and proc.stderr is not None
    streams = [_Bounded(proc.stdout, limit), _Bounded(proc.stderr, limit)]
    readers = [threading.Thread(target=s.drain, daemon=True) for s in streams]
    for reader in readers:
        reader.start()
    status: int | None
    try:
        status, timed_out = proc.wait(timeout=timeout_s + grace_s + KILL_SLACK_S), False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        status, timed_out = None, True
    for reader in readers:
        reader.join(KILL_SLACK_S)  # a background child may hold the pipes; not waited for
    out, err = streams
    return out.head, err.head, status, timed_out, out.truncated or err.truncated


class _Bounded:
    """One output stream read to its end: its first `limit` bytes kept."""

    def __init__(self, pipe: IO[bytes], limit: int):
        self.pipe, self.limit = pipe, limit
        self.head = b""
        self.truncated = False

    def drain(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := self.pipe.read1(CHUNK):  # type: ignore[attr-defined]
                room = self.limit - len(self.head)
                if len(chunk) > room:
                    self.truncated = True
                self.head += chunk[: max(room, 0)]
