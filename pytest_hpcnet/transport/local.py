"""`connection: local`: a node whose commands run on the controller itself, with no SSH (as
Ansible's `connection: local` and testinfra's `local://`): single-node burn-in, a Slurm
prolog, the whole suite on one GPU machine. Each command runs in `sh -c` under the same
`timeout` as on a remote node, stdin from /dev/null, its output bounded alike."""

from __future__ import annotations

import subprocess

LOCAL = "local"


def run_local(
    wrapped: str, timeout_s: float, grace_s: float, limit: int
) -> tuple[bytes, bytes, int | None, bool, bool]:
    """(stdout, stderr, exit status, timed out, truncated) of `wrapped` (already under the
    node-side `timeout`) run here; a command the `timeout` could not end is killed."""
    try:
        proc = subprocess.run(
            ["sh", "-c", wrapped],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout_s + grace_s + 5.0,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out, err = exc.stdout or b"", exc.stderr or b""
        return out[:limit], err[:limit], None, True, len(out) > limit or len(err) > limit
    out, err = proc.stdout, proc.stderr
    truncated = len(out) > limit or len(err) > limit
    return out[:limit], err[:limit], proc.returncode, False, truncated
