"""Node facts: every static probe's command in ONE round trip per node, split by section.

A probe contributes a `FactSection` (name + command builder). `facts_command` joins
them into one shell script whose output carries a marker line before and a status
line after each section, so adding a check adds no round trip.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pytest_hpcnet.expectations import Expectations
from pytest_hpcnet.inventory import Node

MARK = "@@hpcnet"
_SECTION = re.compile(rf"^{MARK} begin (\S+)$")
_STATUS = re.compile(rf"^{MARK} end (\S+) (\d+)$")


@dataclass(frozen=True)
class FactSection:
    """One probe's share of the facts script; `build` returns a POSIX sh command."""

    name: str
    build: Callable[[Node, Expectations], str]


@dataclass(frozen=True)
class SectionOutput:
    """What one section printed (stdout and stderr together) and its exit status."""

    text: str
    status: int | None


SECTIONS: list[FactSection] = [
    FactSection("hostname", lambda node, expect: "hostname"),
    FactSection("kernel", lambda node, expect: "uname -r"),
]


def register(section: FactSection) -> None:
    """Add a probe's section (once; a later registration of the same name replaces it)."""
    SECTIONS[:] = [s for s in SECTIONS if s.name != section.name] + [section]


def facts_command(node: Node, expect: Expectations) -> str:
    """The one script that gathers every registered section on `node`."""
    parts = []
    for section in SECTIONS:
        parts.append(
            f"echo '{MARK} begin {section.name}'; "
            f"( {section.build(node, expect)} ) </dev/null 2>&1; "
            f'echo; echo "{MARK} end {section.name} $?"'
        )
    return "\n".join(parts)


def split_sections(output: str) -> dict[str, SectionOutput]:
    """Split the facts script's output into sections; a cut-off section has status None."""
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
