"""Kernel parameters: read several sysctl keys at once and compare them with expectations.

Expectation semantics (`ExpectedSysctl.mode`):

- `min`: numeric "at least". A single integer is compared with a single integer
  (`net.core.rmem_max = 16777216`). Triples such as `tcp_rmem` (`min default max`)
  compare elementwise when the expectation is a triple too (every field at least the
  expected field); a single expected integer against a triple compares the last
  field, the maximum.
- `equal`: the value equals the expectation, whitespace-normalised
  (`tcp_congestion_control = bbr`; `4096 87380 16777216` equals `4096\\t87380\\t16777216`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from pytest_hpcnet.probes.text import strip_ansi

Mode = Literal["min", "equal", "one_of"]


@dataclass(frozen=True)
class ExpectedSysctl:
    """One expectation: `key` at least (`min`), equal to (`equal`) or one of (`one_of`,
    comma-separated) `value`."""

    key: str
    value: str
    mode: Mode = "equal"


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


@dataclass(frozen=True)
class SysctlDeviation:
    """A key that does not meet its expectation."""

    key: str
    found: str | None
    expected: str
    mode: Mode
    reason: str


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


def _ints(value: str) -> list[int] | None:
    fields = value.split()
    if fields and all(re.fullmatch(r"-?\d+", f) for f in fields):
        return [int(f) for f in fields]
    return None


def check_sysctl(found: str | None, expectation: ExpectedSysctl) -> SysctlDeviation | None:
    """The deviation of one value from its expectation, or None when it meets it."""
    exp = expectation

    def deviation(reason: str) -> SysctlDeviation:
        return SysctlDeviation(exp.key, found, exp.value, exp.mode, reason)

    if found is None:
        return deviation(f"{exp.key} could not be read")
    norm_found = " ".join(found.split())
    norm_exp = " ".join(exp.value.split())
    if exp.mode == "equal":
        if norm_found == norm_exp:
            return None
        return deviation(f"{exp.key} is {norm_found!r}, expected {norm_exp!r}")
    if exp.mode == "one_of":
        allowed = [" ".join(v.split()) for v in exp.value.split(",")]
        if norm_found in allowed:
            return None
        return deviation(f"{exp.key} is {norm_found!r}, expected one of {', '.join(allowed)}")
    have, want = _ints(norm_found), _ints(norm_exp)
    if have is None or want is None:
        return deviation(f"{exp.key}: cannot compare {norm_found!r} with {norm_exp!r} as numbers")
    if len(want) == 1:
        if have[-1] >= want[0]:
            return None
        which = "maximum " if len(have) > 1 else ""
        return deviation(f"{exp.key} {which}{have[-1]} is below {want[0]}")
    if len(have) != len(want):
        return deviation(f"{exp.key} has {len(have)} fields ({norm_found!r}), expected {len(want)}")
    low = [
        f"field {i + 1}: {h} < {w}"
        for i, (h, w) in enumerate(zip(have, want, strict=True))
        if h < w
    ]
    if not low:
        return None
    return deviation(f"{exp.key} {norm_found!r} below {norm_exp!r} ({'; '.join(low)})")


def compare_sysctl(
    values: SysctlValues | Mapping[str, str], expectations: Iterable[ExpectedSysctl]
) -> tuple[SysctlDeviation, ...]:
    """Every expectation not met by `values`, in expectation order."""
    lookup = values.get if isinstance(values, SysctlValues) else dict(values).get
    out = []
    for exp in expectations:
        dev = check_sysctl(lookup(_norm_key(exp.key)), exp)
        if dev is not None:
            out.append(dev)
    return tuple(out)
