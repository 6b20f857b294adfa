"""The generic action hook: one command per failed node (Kubernetes taints, tickets, ...).

The inventory's `actions.command` is split like a shell would (`shlex.split`) once; in each
word, `{node}`, `{slurm_node}`, `{checks}`, `{reasons}`, `{run_id}` and `{cluster}` are
replaced by the value, which stays one argument whatever it holds. Without any placeholder,
node, checks and reasons are appended as the last three arguments. No shell is involved; what
is printed is the argv shell-quoted, so it can be pasted as is.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from dataclasses import asdict, dataclass

from pytest_hpcnet.gate.judge import NodeJudgement
from pytest_hpcnet.inventory.gate_settings import PLACEHOLDERS, ActionSettings
from pytest_hpcnet.redact import redact
from pytest_hpcnet.report.evidence import bound_output

OUTPUT_LIMIT = 64 * 1024


@dataclass
class HookResult:
    """One hook run: what ran, how it ended and what it printed (redacted, bounded)."""

    node: str
    command: str
    exit_status: int | None
    duration_s: float
    timed_out: bool
    output: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out

    def record(self) -> dict:
        """A JSON-able record for the run folder (see `gate.jsonl` in docs/gate.md)."""
        return asdict(self)


def hook_argv(
    settings: ActionSettings,
    judgement: NodeJudgement,
    slurm_node: str = "",
    run_id: str = "",
    cluster: str = "",
) -> tuple[str, ...]:
    """The argv of the hook for one failed node."""
    assert settings.command is not None
    values = {
        "{node}": judgement.node,
        "{slurm_node}": slurm_node or judgement.node,
        "{checks}": ",".join(judgement.checks),
        "{reasons}": "; ".join(judgement.reasons),
        "{run_id}": run_id,
        "{cluster}": cluster,
    }
    words = shlex.split(settings.command)
    if not any(p in word for word in words for p in PLACEHOLDERS):
        return (*words, values["{node}"], values["{checks}"], values["{reasons}"])
    argv = []
    for word in words:
        for key, value in values.items():
            word = word.replace(key, value)
        argv.append(word)
    return tuple(argv)


def run_hook(node: str, argv: tuple[str, ...], timeout_s: float) -> HookResult:
    """Run the hook in its own process group; on timeout the whole group is killed."""
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        message = f"cannot run: {exc.strerror or exc}"
        return HookResult(node, shlex.join(argv), None, 0.0, False, message)
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid)
        try:
            out, _ = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a child left the group and holds the pipe
            proc.kill()
            out = b"[hpcnet: output lost: a child of the hook kept it open]"
    text = bound_output(redact(out.decode("utf-8", errors="replace")), OUTPUT_LIMIT)
    duration = round(time.monotonic() - started, 3)
    status = None if timed_out else proc.returncode
    return HookResult(node, shlex.join(argv), status, duration, timed_out, text)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
