"""The host's own hardware: CPU model and logical CPUs (`lscpu`), memory and huge pages
(`/proc/meminfo`), local NVMe namespaces and their sizes (sysfs), in one facts section.

Reads `$HPCNET_PROC` (else /proc) and `$HPCNET_SYSFS` (else /sys): unset on a real node,
the lab's per-node view in the lab. `requirements/host_hardware` judges the result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_hpcnet.probes.sections import Section, always
from pytest_hpcnet.probes.text import strip_ansi

PROC = "${HPCNET_PROC:-/proc}"
SYSFS = "${HPCNET_SYSFS:-/sys}"
PART = re.compile(r"^== (\w+)$")
SECTOR_BYTES = 512
"""sysfs `size` of a block device counts 512-byte sectors whatever the device's own sector."""


@dataclass(frozen=True)
class NvmeDisk:
    """One local NVMe namespace (`nvme0n1`) and its size in bytes."""

    name: str
    size_bytes: int


@dataclass(frozen=True)
class HostHardware:
    """What one node reports of its CPUs, memory and local NVMe; None where not shown."""

    cpu_model: str | None = None
    cpus: int | None = None
    sockets: int | None = None
    threads_per_core: int | None = None
    mem_total_kib: int | None = None
    hugepages_total: int | None = None
    hugepage_kib: int | None = None
    nvme: tuple[NvmeDisk, ...] | None = None
    """None: the NVMe part was not printed (cut); empty: no NVMe namespace in sysfs."""
    problems: tuple[str, ...] = ()

    @property
    def mem_total_gib(self) -> float | None:
        return None if self.mem_total_kib is None else self.mem_total_kib / 1024**2


def host_hardware_command() -> str:
    """`lscpu`, the memory lines of meminfo and each NVMe namespace's size, each part headed
    by `== name` (POSIX sh; a namespace's partitions `nvme0n1p1` are left out)."""
    return (
        "echo '== lscpu'; LC_ALL=C lscpu 2>&1; "
        f"echo '== meminfo'; grep -E '^(MemTotal|HugePages_Total|Hugepagesize):' {PROC}/meminfo"
        " 2>&1; "
        f"echo '== nvme'; for b in {SYSFS}/class/block/nvme*n*; do "
        "n=${b##*/}; case $n in *p[0-9]*) continue;; esac; "
        '[ -r "$b/size" ] && echo "$n $(cat "$b/size")"; done; true'
    )


_LSCPU = {
    "Model name": "cpu_model",
    "CPU(s)": "cpus",
    "Socket(s)": "sockets",
    "Thread(s) per core": "threads_per_core",
}
_MEMINFO = {"MemTotal": "mem_total_kib", "HugePages_Total": "hugepages_total"}
_MEMINFO["Hugepagesize"] = "hugepage_kib"


def _parts(text: str) -> dict[str, list[str]]:
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None  # lines before any header: lscpu's own output
    for raw in strip_ansi(text).splitlines():
        m = PART.match(raw.strip())
        if m:
            current = parts.setdefault(m.group(1), [])
        elif raw.strip():
            if current is None:
                current = parts.setdefault("lscpu", [])
            current.append(raw.strip())
    return parts


def _int(text: str) -> int | None:
    m = re.match(r"^(\d+)", text.strip())
    return int(m.group(1)) if m else None


def parse_host_hardware(text: str) -> HostHardware:
    """Read the three parts; a line lscpu or grep printed as an error is kept as a problem."""
    parts = _parts(text)
    found: dict[str, object] = {}
    problems: list[str] = []
    for line in parts.get("lscpu", []):
        key, sep, value = line.partition(":")
        field = _LSCPU.get(key.strip()) if sep else None
        if field == "cpu_model":
            found[field] = " ".join(value.split()) or None
        elif field:
            found[field] = _int(value)
        elif not sep or "not found" in line:
            problems.append(f"lscpu: {line[:120]}")
    for line in parts.get("meminfo", []):
        key, sep, value = line.partition(":")
        field = _MEMINFO.get(key.strip()) if sep else None
        if field:
            found[field] = _int(value)
        else:
            problems.append(f"meminfo: {line[:120]}")
    disks = None
    if "nvme" in parts:
        disks = []
        for line in parts["nvme"]:
            fields = line.split()
            if len(fields) == 2 and fields[1].isdigit():
                disks.append(NvmeDisk(fields[0], int(fields[1]) * SECTOR_BYTES))
            else:
                problems.append(f"nvme: {line[:120]}")
        disks = tuple(disks)
    missing = [p for p in ("lscpu", "meminfo") if p not in parts]
    problems += [f"no {p} part in the output" for p in missing]
    return HostHardware(**found, nvme=disks, problems=tuple(problems))  # type: ignore[arg-type]


HOST_HARDWARE: Section[HostHardware] = Section(
    "host_hardware", parse_host_hardware, build=always(host_hardware_command())
)
