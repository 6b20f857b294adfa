"""What a command did on a node, and the error of a node that cannot be reached: plain
values (stdlib only), so the layers that read them (the report's recording, the plugin's
hooks on an xdist controller, which connects nowhere) do not load the SSH stack."""

from __future__ import annotations

from dataclasses import dataclass

TIMED_OUT_STATUSES = (124, 137)
"""Exit statuses of a command `timeout` killed (SIGTERM, then SIGKILL after `-k`)."""


@dataclass(frozen=True)
class CommandResult:
    """What one command did on one node."""

    node: str
    command: str
    exit_status: int | None
    stdout: str
    stderr: str
    duration_s: float
    started_at: float
    timed_out: bool = False
    unreachable: str | None = None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out and self.unreachable is None

    @property
    def failure(self) -> str | None:
        """One line saying why the command did not succeed, or None."""
        if self.unreachable:
            return f"{self.node} unreachable: {self.unreachable}"
        if self.timed_out:
            return f"{self.node}: command timed out after {self.duration_s:.1f}s and was killed"
        if self.exit_status != 0:
            tail = (self.stderr.strip() or self.stdout.strip()).splitlines()[-1:] or [""]
            return f"{self.node}: exit status {self.exit_status}: {tail[0][:300]}"
        return None


class NodeUnreachable(Exception):
    """A node that could not be reached; `reason` is the one-line cause."""

    def __init__(self, node: str, reason: str):
        super().__init__(f"{node} unreachable: {reason}")
        self.node = node
        self.reason = reason
