"""The host side of a GPU node: `/proc/driver/nvidia/version`, loaded kernel modules
(`nvidia`, `nvidia_peermem`) and the locked-memory limit NCCL needs (`ulimit -l`)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from pytest_hpcnet.probes.sections import Section, gpu_profile, on_gpu, when
from pytest_hpcnet.probes.text import strip_ansi

DRIVER_VERSION_COMMAND = "cat /proc/driver/nvidia/version 2>&1"
MODULES_COMMAND = "cat /proc/modules 2>&1 || lsmod 2>&1"


@dataclass(frozen=True)
class KernelDriver:
    """`/proc/driver/nvidia/version`: the loaded kernel module's version and flavour."""

    version: str | None = None
    open_module: bool | None = None
    """True for the open kernel module, False for the proprietary one."""
    gcc: str | None = None
    error: str | None = None


_NVRM_RE = re.compile(r"NVRM version:\s*(?P<desc>.*?)\s+(?P<ver>\d+\.\d+(?:\.\d+)?)\s")


def parse_driver_version(text: str) -> KernelDriver:
    """Parse `/proc/driver/nvidia/version` (missing file: `error` says no driver loaded)."""
    clean = strip_ansi(text)
    m = _NVRM_RE.search(clean + " ")
    if not m:
        line = next((ln.strip() for ln in clean.splitlines() if ln.strip()), "")
        if "No such file" in line:
            missing = "no NVIDIA kernel driver loaded (/proc/driver/nvidia/version missing)"
            return KernelDriver(error=missing)
        shown = f"no 'NVRM version' line: {line[:100]!r}" if line else "empty output"
        return KernelDriver(error=shown)
    gcc = re.search(r"GCC version:\s*(.+)", clean)
    return KernelDriver(
        version=m.group("ver"),
        open_module="Open Kernel Module" in m.group("desc"),
        gcc=gcc.group(1).strip() if gcc else None,
    )


@dataclass(frozen=True)
class LoadedModules:
    """Kernel module names from `/proc/modules` or `lsmod`."""

    names: frozenset[str] = frozenset()
    error: str | None = None

    def loaded(self, name: str) -> bool:
        return name.replace("-", "_") in self.names


def parse_modules(text: str) -> LoadedModules:
    """Module names (first word of each line; lsmod's `Module` header skipped)."""
    names: set[str] = set()
    for line in strip_ansi(text).splitlines():
        words = line.split()
        if len(words) >= 3 and words[1].isdigit() and re.fullmatch(r"[\w-]+", words[0]):
            names.add(words[0].replace("-", "_"))
    if not names:
        first = text.strip().splitlines()[0][:100] if text.strip() else "empty output"
        return LoadedModules(error=f"no module list: {first!r}")
    return LoadedModules(names=frozenset(names))


def memlock_command(user: str | None = None) -> str:
    """`ulimit -l` of this login, or of `user` (the one NCCL runs as) through `su`."""
    if not user:
        return "ulimit -l 2>&1"
    return f"su -s /bin/sh {shlex.quote(user)} -c 'ulimit -l' 2>&1"


@dataclass(frozen=True)
class Memlock:
    """The locked-memory limit: unlimited, or KiB."""

    unlimited: bool = False
    kib: int | None = None
    error: str | None = None


def parse_memlock(text: str) -> Memlock:
    """`unlimited` or a number of KiB; anything else is an error."""
    lines = [ln.strip() for ln in strip_ansi(text).splitlines() if ln.strip()]
    if len(lines) == 1 and lines[0] == "unlimited":
        return Memlock(unlimited=True)
    if len(lines) == 1 and lines[0].isdigit():
        return Memlock(kib=int(lines[0]))
    shown = lines[0][:100] if lines else "empty output"
    return Memlock(error=f"not a ulimit -l value: {shown!r}")


GPU_DRIVER: Section[KernelDriver] = Section(
    "gpu_driver", parse_driver_version, build=on_gpu(DRIVER_VERSION_COMMAND)
)
GPU_MODULES: Section[LoadedModules] = Section(
    "gpu_modules", parse_modules, build=on_gpu(MODULES_COMMAND)
)
GPU_MEMLOCK: Section[Memlock] = Section(
    "gpu_memlock",
    parse_memlock,
    build=when(gpu_profile, lambda e: memlock_command(e.gpu.nccl_user)),
)
