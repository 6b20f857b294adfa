"""The framing of a multi-command script's output: each command's output between a begin
line and an end line carrying its exit status (`MARK`), so one round trip returns many
commands and a cut or killed section is told from a whole one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from pytest_hpcnet.transport.results import TIMED_OUT_STATUSES

if TYPE_CHECKING:
    from pytest_hpcnet.inventory.expectations import Expectations
    from pytest_hpcnet.inventory.models import Node

MARK = "@@hpcnet"
_SECTION = re.compile(rf"^{MARK} begin (\S+)$")
_STATUS = re.compile(rf"^{MARK} end (\S+) (\d+)$")


T = TypeVar("T")

Build = Callable[["Node", "Expectations"], str]
"""A section's POSIX sh command for one node under its expectations."""

NOT_EXPECTED = "echo 'not expected'"
"""What a section runs where the profile expects nothing of it (its check is not applicable)."""


@dataclass(frozen=True)
class Section(Generic[T]):
    """A facts section as its probe declares it: the name it is framed under, the pure parser
    that reads its output into a typed result (`NodeFacts.get` parses it once) and the command
    that gathers it in the facts round trip (`campaigns.fact_sections` gathers every section a
    registered requirement reads). `build` is None for a second reading of a section another
    `Section` of the same name gathers, or for a phase's own output."""

    name: str
    parse: Callable[[str], T]
    build: Build | None = None


def always(command: str) -> Build:
    """`command` on every node."""
    return lambda node, expect: command


def when(expected: Callable[[Expectations], object], build: Callable[[Expectations], str]) -> Build:
    """`build(expect)` where `expected(expect)` holds, else nothing (`NOT_EXPECTED`)."""
    return lambda node, expect: build(expect) if expected(expect) else NOT_EXPECTED


def gpu_profile(expect: Expectations) -> object:
    """A GPU profile (a CPU-only one, `expect.gpu.count` unset, runs no GPU section)."""
    return expect.gpu.count


def on_gpu(command: str) -> Build:
    """`command` on a GPU profile's nodes, nothing on a CPU-only profile's."""
    return when(gpu_profile, lambda expect: command)


@dataclass(frozen=True)
class SectionOutput:
    """What one section printed (stdout and stderr together) and its exit status: None when
    its end line never came (the script was killed or its output cut inside the section)."""

    text: str
    status: int | None

    @property
    def timed_out(self) -> bool:
        """Its command was killed by a `timeout` of its own."""
        return self.status in TIMED_OUT_STATUSES

    @property
    def complete(self) -> bool:
        """The section ran to its end line and its command was not killed by a timeout."""
        return self.status is not None and not self.timed_out


def sections_script(commands: dict[str, str], parallel: bool = False) -> str:
    """One script running each named command, its output framed by marker lines.

    With `parallel`, the commands run at once (each into its own temp file) and their
    outputs are printed in order once all have finished; the temp folder is removed
    however the script ends, short of SIGKILL.
    """
    if not parallel:
        return "\n".join(
            f"echo '{MARK} begin {name}'; ( {cmd} ) </dev/null 2>&1; "
            f'echo; echo "{MARK} end {name} $?"'
            for name, cmd in commands.items()
        )
    lines = [
        "d=$(mktemp -d /tmp/hpcnet-sections.XXXXXX) || exit 1",
        # killed (timeout, closed channel): the temp folder goes with the script
        "trap 'rm -rf \"$d\"' EXIT; trap 'exit 143' HUP INT TERM PIPE",
    ]
    for i, cmd in enumerate(commands.values()):
        lines.append(f'( ( {cmd} ) </dev/null >"$d/{i}" 2>&1; echo $? >"$d/{i}.rc" ) &')
    lines.append("wait")
    for i, name in enumerate(commands):
        lines.append(
            f"echo '{MARK} begin {name}'; cat \"$d/{i}\"; "
            f'echo; echo "{MARK} end {name} $(cat "$d/{i}.rc")"'
        )
    lines.append('rm -rf "$d"')
    return "\n".join(lines)


def split_sections(output: str) -> dict[str, SectionOutput]:
    """Split the facts script's output into sections; a section without its end line (cut
    off, or followed by another section's begin line) has status None: not `complete`."""
    sections: dict[str, SectionOutput] = {}
    current: str | None = None
    lines: list[str] = []
    for line in output.splitlines():
        begin = _SECTION.match(line)
        end = _STATUS.match(line)
        if begin:
            if current is not None:
                sections[current] = SectionOutput("\n".join(lines), None)
            current, lines = begin.group(1), []
        elif end and current == end.group(1):
            text = "\n".join(lines)
            sections[current] = SectionOutput(
                text[:-1] if text.endswith("\n") else text, int(end.group(2))
            )
            current, lines = None, []
        elif current is not None:
            lines.append(line)
    if current is not None:
        sections[current] = SectionOutput("\n".join(lines), None)
    return {
        name: SectionOutput(out.text.rstrip("\n"), out.status) for name, out in sections.items()
    }
