"""The clock's offset from its time source: `chronyc tracking` where chrony runs, else
`timedatectl timesync-status` (systemd-timesyncd), in one facts section.

chrony's `System time : 0.000031625 seconds slow of NTP time` is the offset now (slow is
behind: negative); timesyncd's `Offset: +291us` the last sample's. `Leap status : Not
synchronised` (chrony) or a reference of 00000000 says the clock follows no source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_hpcnet.probes.sections import Section, always
from pytest_hpcnet.probes.text import strip_ansi

TIMESYNC_COMMAND = (
    "if command -v chronyc >/dev/null 2>&1; then chronyc -n tracking; "
    "else timedatectl timesync-status; fi 2>&1"
)
UNITS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0, "min": 60_000.0}


@dataclass(frozen=True)
class TimeSync:
    """The offset (ms; positive: the clock is ahead) and what says whether it is synced."""

    tool: str | None = None
    """`chrony` or `timesyncd`; None when neither answered."""
    offset_ms: float | None = None
    synchronised: bool | None = None
    reference: str | None = None
    error: str | None = None


_CHRONY_SYSTEM = re.compile(r"^System time\s*:\s*([\d.]+) seconds (fast|slow) of NTP time", re.M)
_CHRONY_FIELD = re.compile(r"^(Reference ID|Leap status)\s*:\s*(.*)$", re.M)
_TIMESYNCD_OFFSET = re.compile(r"^\s*Offset:\s*([+-]?[\d.]+)\s*(ns|us|µs|ms|s|min)\s*$", re.M)
_TIMESYNCD_FIELD = re.compile(r"^\s*(Server|Leap|Reference):\s*(.*)$", re.M)


def parse_timesync(text: str) -> TimeSync:
    """Read chrony's tracking report or timesyncd's status; anything else is the error."""
    text = strip_ansi(text)
    m = _CHRONY_SYSTEM.search(text)
    if m:
        offset = float(m.group(1)) * 1000.0 * (1 if m.group(2) == "fast" else -1)
        fields = dict(_CHRONY_FIELD.findall(text))
        leap = fields.get("Leap status", "").strip()
        reference = fields.get("Reference ID", "").strip() or None
        synced = None if not leap else leap.lower() != "not synchronised"
        if reference and reference.split()[0].strip("0") == "":
            synced = False
        return TimeSync("chrony", offset, synced, reference)
    m = _TIMESYNCD_OFFSET.search(text)
    if m:
        fields = {k: v.strip() for k, v in _TIMESYNCD_FIELD.findall(text)}
        offset = float(m.group(1)) * UNITS[m.group(2)]
        reference = fields.get("Server") or fields.get("Reference")
        synced = None if "Leap" not in fields else fields["Leap"] != "not synchronized"
        return TimeSync("timesyncd", offset, synced, reference)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return TimeSync(error="; ".join(lines[:2])[:200] or "no output")


TIMESYNC: Section[TimeSync] = Section("timesync", parse_timesync, build=always(TIMESYNC_COMMAND))
