"""Judges of the host settings that change results: clocksource, CPU frequency governor,
NUMA balancing, transparent huge pages, IOMMU mode, and the clock's offset from its time
source.

Each setting is one measurement per node: judged against its `expect.host` key where the
profile or inventory sets one (with its source in the profile's notes), else reported with
"reported, not judged". A node where no setting is judged is not measured, naming the keys
to set; a setting expected but not shown is not measured.
"""

from __future__ import annotations

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.host_settings import HOST_SETTINGS, HostSettings
from pytest_hpcnet.probes.timesync import TIMESYNC, TimeSync
from pytest_hpcnet.requirements.verdict import (
    NOT_MEASURED,
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

SETTINGS = ("clocksource", "governor", "numa_balancing", "thp", "iommu")
FIXES = {
    "clocksource": "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource"
    " (and `clocksource=tsc` on the kernel command line); check dmesg for 'tsc unstable'",
    "governor": "`cpupower frequency-set -g performance` (or tuned's throughput-performance)",
    "numa_balancing": "`sysctl -w kernel.numa_balancing=0` and keep it in /etc/sysctl.d/",
    "thp": "write the mode to /sys/kernel/mm/transparent_hugepage/enabled "
    "(`transparent_hugepage=` on the kernel command line)",
    "iommu": "`iommu=pt` on the kernel command line (GRUB_CMDLINE_LINUX), then reboot",
}
REPORTED = "reported, not judged (expect.host.{key} not set)"


def _value(settings: HostSettings, key: str) -> str | None:
    if key == "iommu":
        return settings.iommu_mode
    return getattr(settings, key)


def judge_host_settings(node: str, settings: HostSettings, expect: Expectations) -> Verdict:
    """Each setting `expect.host` names as expected (one measurement per setting, the rest
    reported); a setting that differs fails naming it, its value and the expected one."""
    sections = (HOST_SETTINGS.name,)
    if not settings.complete:
        return not_measured(f"{node}: host settings cut short", "re-run", sections=sections)
    measurements, problems, fixes, unread = [], [], [], []
    for key in SETTINGS:
        found = _value(settings, key)
        want = getattr(expect.host, key)
        if want is None:
            measurements.append(Measurement(key, found, source=REPORTED.format(key=key)))
            continue
        outcome = NOT_MEASURED if found is None else None
        measurements.append(
            Measurement(key, found, "", str(want), "==", f"expect.host.{key}", outcome=outcome)
        )
        if found is None:
            unread.append(f"{key} not shown")
        elif found != str(want):
            problems.append(f"{key} is {found!r}, expected {want!r}")
            fixes.append(FIXES[key])
    kw = {"measurements": tuple(measurements), "sections": sections}
    if problems:
        return failing(f"{node}: " + "; ".join(problems), "; ".join(fixes), **kw)
    if unread:
        return not_measured(f"{node}: " + "; ".join(unread), "re-run as root", **kw)
    if not any(m.comparison for m in measurements):
        keys = ", ".join(f"expect.host.{k}" for k in SETTINGS)
        return not_measured(f"{node}: measured, not judged: set {keys}", **kw)
    return passing(**kw)


TIME_SYNC_CODE = "HPCNET-TIME-SYNC"


def judge_time_offset(node: str, sync: TimeSync, expect: Expectations) -> Verdict:
    """The clock follows a time source and is within `expect.host.max_time_offset_ms` of it
    (chrony, else systemd-timesyncd). Without a bound the offset is measured, not judged
    (not measured); neither tool answering is not measured."""
    sections = (TIMESYNC.name,)
    bound = expect.host.max_time_offset_ms
    offset = None if sync.offset_ms is None else abs(sync.offset_ms)
    measured = Measurement(
        "time_offset",
        None if offset is None else round(offset, 6),
        "ms",
        bound,
        "<=" if bound is not None else None,
        "expect.host.max_time_offset_ms" if bound else REPORTED.format(key="max_time_offset_ms"),
        sync.reference or "",
        outcome=NOT_MEASURED if offset is None and bound is not None else None,
    )
    kw = {"measurements": (measured,), "sections": sections}
    fix = "start chronyd (or systemd-timesyncd) with Alibaba's NTP servers and let it step"
    if sync.error is not None or offset is None:
        return not_measured(f"{node}: time sync not read: {sync.error or 'no offset'}", fix, **kw)
    shown = f"{sync.offset_ms:+.3f} ms ({sync.tool})"
    if bound is None:
        return not_measured(
            f"{node}: clock offset {shown} measured, not judged "
            "(set expect.host.max_time_offset_ms)",
            **kw,
        )
    if sync.synchronised is False:
        return failing(f"{node}: the clock follows no time source ({shown})", fix, **kw).with_code(
            TIME_SYNC_CODE
        )
    if offset > bound:
        return failing(f"{node}: clock offset {shown} beyond {bound:g} ms", fix, **kw).with_code(
            TIME_SYNC_CODE
        )
    return passing(**kw)
