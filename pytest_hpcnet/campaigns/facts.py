"""Node facts: every static probe's command in ONE round trip per node, split by section.

A probe contributes a `FactSection` (name + command builder). `facts_command` joins
them into one shell script whose output carries a marker line before and a status
line after each section, so adding a check adds no round trip.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.fio import mount_check_command
from pytest_hpcnet.probes.links import ip_addr_command, ip_link_command
from pytest_hpcnet.probes.metadata import metadata_command
from pytest_hpcnet.probes.rdma import (
    compat_mode_command,
    erdma_module_command,
    ibv_devinfo_command,
    rdma_link_command,
)
from pytest_hpcnet.probes.sysctl import sysctl_command
from pytest_hpcnet.probes.versions import versions_command

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


def _module_command(expect: Expectations) -> str:
    module = expect.rdma.kernel_module
    return erdma_module_command(module) if module else "echo 'not expected'"


def _compat_command(expect: Expectations) -> str:
    module = expect.rdma.kernel_module or "erdma"
    return compat_mode_command(module) if expect.rdma.compat_mode else "echo 'not expected'"


SECTIONS: list[FactSection] = [
    FactSection("hostname", lambda node, expect: "hostname"),
    FactSection("kernel", lambda node, expect: "uname -r"),
    FactSection("ibv_devinfo", lambda node, expect: ibv_devinfo_command()),
    FactSection("rdma_link", lambda node, expect: rdma_link_command()),
    FactSection("erdma_module", lambda node, expect: _module_command(expect)),
    FactSection("compat_mode", lambda node, expect: _compat_command(expect)),
    FactSection("links", lambda node, expect: ip_link_command(stats=True)),
    FactSection("addr", lambda node, expect: ip_addr_command(node.interface)),
    FactSection("sysctl", lambda node, expect: sysctl_command(sorted(expect.sysctl))),
    FactSection(
        "metadata", lambda node, expect: metadata_command(base=expect.placement.metadata_url)
    ),
    FactSection("cpfs_mount", lambda node, expect: mount_check_command(expect.cpfs.mount)),
    FactSection("versions", lambda node, expect: versions_command()),
]


def sections_script(commands: dict[str, str], parallel: bool = False) -> str:
    """One script running each named command, its output framed by marker lines.

    With `parallel`, the commands run at once (each into its own temp file) and their
    outputs are printed in order once all have finished.
    """
    if not parallel:
        return "\n".join(
            f"echo '{MARK} begin {name}'; ( {cmd} ) </dev/null 2>&1; "
            f'echo; echo "{MARK} end {name} $?"'
            for name, cmd in commands.items()
        )
    lines = ["d=$(mktemp -d /tmp/hpcnet-sections.XXXXXX) || exit 1"]
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


def facts_command(node: Node, expect: Expectations) -> str:
    """The one script that gathers every section on `node`."""
    return sections_script({s.name: s.build(node, expect) for s in SECTIONS})


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
