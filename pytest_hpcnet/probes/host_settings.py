"""Host settings that change results: clocksource, CPU frequency governor, NUMA balancing,
transparent huge pages and the IOMMU mode, read from sysfs and /proc in one facts section.

Each line is `key value`: the governor once per distinct value with its CPU count
(`governor 96 performance`), or `governor none` where the kernel has no cpufreq driver (a
virtual machine); a file the kernel lacks prints no line (not measured). Reads
`$HPCNET_SYSFS` and `$HPCNET_PROC` (else /sys, /proc).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_hpcnet.probes.sections import Section, always
from pytest_hpcnet.probes.text import strip_ansi

SYSFS = "${HPCNET_SYSFS:-/sys}"
PROC = "${HPCNET_PROC:-/proc}"
NO_CPUFREQ = "none"
"""The governor where no CPU has a cpufreq directory (no frequency driver)."""


@dataclass(frozen=True)
class HostSettings:
    """One node's settings; None where the kernel did not show it."""

    clocksource: str | None = None
    governors: tuple[tuple[str, int], ...] = ()
    """(governor, CPUs using it); (("none", 0),) without cpufreq; empty when not shown."""
    numa_balancing: str | None = None
    thp: str | None = None
    """The selected mode of transparent_hugepage/enabled (the bracketed word)."""
    cmdline: str | None = None
    iommu_groups: int | None = None
    iommu_type: str | None = None
    """The first IOMMU group's default domain type (`identity`, `DMA`, `DMA-FQ`)."""
    complete: bool = False

    @property
    def incomplete(self) -> bool:
        """The output was cut before its `done` line."""
        return not self.complete

    @property
    def governor(self) -> str | None:
        """The one governor every CPU uses, `mixed` when they differ, None when not shown."""
        if not self.governors:
            return None
        return self.governors[0][0] if len(self.governors) == 1 else "mixed"

    @property
    def iommu_mode(self) -> str | None:
        """`passthrough`, `translated` or `off`: the default domain type where sysfs shows
        one, else the kernel command line (`iommu=pt`), else no group at all is `off`."""
        if self.iommu_type:
            return "passthrough" if self.iommu_type == "identity" else "translated"
        args = (self.cmdline or "").split()
        if "iommu=pt" in args or "iommu.passthrough=1" in args:
            return "passthrough"
        if self.iommu_groups == 0:
            return "off"
        if self.iommu_groups:
            return "translated"
        return None


def host_settings_command() -> str:
    """The settings as `key value` lines, then `done` (POSIX sh)."""
    return (
        f"S={SYSFS}; P={PROC}; "
        'r() { [ -r "$2" ] && echo "$1 $(cat "$2")"; }; '
        'r clocksource "$S/devices/system/clocksource/clocksource0/current_clocksource"; '
        'g=$(cat "$S"/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor 2>/dev/null'
        " | sort | uniq -c); "
        'if [ -n "$g" ]; then echo "$g" | while read n v; do echo "governor $n $v"; done; '
        "else echo 'governor 0 none'; fi; "
        'r numa_balancing "$P/sys/kernel/numa_balancing"; '
        'r thp "$S/kernel/mm/transparent_hugepage/enabled"; '
        'r cmdline "$P/cmdline"; '
        'set -- "$S"/kernel/iommu_groups/*; [ -e "$1" ] || set --; '
        'echo "iommu_groups $#"; [ $# -gt 0 ] && r iommu_type "$1/type"; echo done'
    )


_BRACKETED = re.compile(r"\[(\S+)\]")


def parse_host_settings(text: str) -> HostSettings:
    """Read the `key value` lines; unknown lines are ignored."""
    found: dict[str, object] = {}
    governors: list[tuple[str, int]] = []
    complete = False
    for raw in strip_ansi(text).splitlines():
        line = raw.strip()
        if line == "done":
            complete = True
            continue
        key, _, value = line.partition(" ")
        value = value.strip()
        if key == "governor":
            count, _, name = value.partition(" ")
            if count.isdigit() and name:
                governors.append((name.strip(), int(count)))
        elif key in ("clocksource", "numa_balancing", "cmdline", "iommu_type") and value:
            found[key] = value
        elif key == "thp":
            m = _BRACKETED.search(value)
            found[key] = m.group(1) if m else value or None
        elif key == "iommu_groups" and value.isdigit():
            found[key] = int(value)
    return HostSettings(**found, governors=tuple(governors), complete=complete)  # type: ignore[arg-type]


HOST_SETTINGS: Section[HostSettings] = Section(
    "host_settings", parse_host_settings, build=always(host_settings_command())
)
