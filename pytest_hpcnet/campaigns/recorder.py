"""What a campaign writes into the evidence of the check that asked for it."""

from __future__ import annotations

from typing import Protocol

from pytest_hpcnet.transport.fanout import CommandResult


class Recorder(Protocol):
    """The evidence of one check: commands run for it, nodes found unreachable, tool versions.

    `report.recording.Check` is the implementation; campaigns depend only on this shape."""

    unreachable: dict[str, str]
    tool_versions: dict[str, str]

    def command(self, result: CommandResult) -> None:
        """Record a command run for the check."""

    def read(self, *sections: str) -> None:
        """Name facts sections the check read (the certificate shows those)."""
