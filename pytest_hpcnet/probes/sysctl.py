"""Kernel parameters: read several sysctl keys at once (`sysctl`, or /proc/sys without it).

The parser keeps each value whitespace-normalised and each key the node would not show with
the tool's message; `requirements/host.judge_sysctl` compares them with `expect.sysctl`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_hpcnet.probes.sections import Section
from pytest_hpcnet.probes.text import strip_ansi


@dataclass(frozen=True)
class SysctlValues:
    """Values read from one node."""

    values: tuple[tuple[str, str], ...] = ()
    """(key, value) with whitespace inside values normalised to one space."""
    missing: tuple[tuple[str, str], ...] = ()
    """(key, the tool's message) for keys that could not be read."""
    problems: tuple[str, ...] = ()

    def get(self, key: str) -> str | None:
        """The value of `key`, or None."""
        return dict(self.values).get(_norm_key(key))


_KEY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$")


def _norm_key(key: str) -> str:
    return key.strip().replace("/", ".")


def sysctl_command(keys: Iterable[str]) -> str:
    """`sysctl k1 k2 ...` (stderr merged so unknown keys show); /proc/sys when no sysctl.

    The fallback needs only `cat` and shell builtins.
    """
    keys = tuple(keys)
    if not keys:
        raise ValueError("no sysctl keys given")
    for key in keys:
        if not _KEY_RE.match(key):
            raise ValueError(f"not a sysctl key: {key!r}")
    quoted = " ".join(shlex.quote(k) for k in keys)
    proc_reads = []
    for key in keys:
        path = "/proc/sys/" + key.replace(".", "/")
        missing = shlex.quote(f"sysctl: cannot stat {path}: No such file or directory")
        quoted_path = shlex.quote(path)
        proc_reads.append(
            f"if [ -r {quoted_path} ]; "
            f"then printf '%s = %s\\n' {shlex.quote(key)} \"$(cat {quoted_path})\"; "
            f"else echo {missing}; fi"
        )
    return (
        f"if command -v sysctl >/dev/null 2>&1; then sysctl {quoted} 2>&1; "
        f"else {'; '.join(proc_reads)}; fi 2>/dev/null"
    )


_VALUE_RE = re.compile(r"^(?P<key>[A-Za-z0-9_][A-Za-z0-9_.\-/]*)\s*(?:=|:)\s?(?P<value>.*)$")
_STAT_RE = re.compile(r"cannot stat /proc/sys/(?P<path>\S+?):\s*(?P<why>.*)$")
_NAMED_RE = re.compile(
    r"(?:unknown oid|permission denied on key|error reading key)\s+'(?P<key>[^']+)'(?P<why>.*)$",
    re.I,
)


def parse_sysctl(text: str) -> SysctlValues:
    """Parse `key = value` lines (tabs in values allowed) and sysctl's per-key errors."""
    values: dict[str, str] = {}
    missing: dict[str, str] = {}
    problems: list[str] = []
    for raw in strip_ansi(text).splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _STAT_RE.search(line)
        if m:
            missing[m.group("path").replace("/", ".")] = line
            continue
        m = _NAMED_RE.search(line)
        if m:
            missing[_norm_key(m.group("key"))] = line
            continue
        if line.startswith("sysctl:"):
            problems.append(line)
            continue
        m = _VALUE_RE.match(line)
        if m:
            values[_norm_key(m.group("key"))] = " ".join(m.group("value").split())
            continue
        problems.append(f"unreadable line: {line[:120]!r}")
    return SysctlValues(
        values=tuple(values.items()), missing=tuple(missing.items()), problems=tuple(problems)
    )


SYSCTL: Section[SysctlValues] = Section(
    "sysctl", parse_sysctl, build=lambda node, expect: sysctl_command(sorted(expect.sysctl))
)
