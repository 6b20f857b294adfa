"""Tool versions on a node (OS release, kernel, erdma driver, rdma-core, perftest, fio,
Open MPI, NCCL).

Read from the package database rather than by running the tools: `ib_write_bw --version`
on an old perftest would start a server instead.
"""

from __future__ import annotations

from pytest_hpcnet.probes.sections import Section
from pytest_hpcnet.probes.text import strip_ansi

PACKAGES_DEB = "rdma-core ibverbs-utils perftest fio openmpi-bin libnccl2"
PACKAGES_RPM = "rdma-core libibverbs-utils perftest fio openmpi libnccl"
ALIASES = {"libnccl2": "nccl", "libnccl": "nccl"}
"""Package names reported under the tool's name (NVIDIA's NCCL packages)."""


def versions_command() -> str:
    """Print `name=version` lines; tools that are not installed print nothing."""
    return (
        "printf 'kernel=%s\\n' \"$(uname -r)\"; "
        "( . /etc/os-release 2>/dev/null && "
        "printf 'os=%s\\n' \"${PRETTY_NAME:-$ID $VERSION_ID}\" ); "
        "v=/sys/module/erdma/version; [ -r $v ] && printf 'erdma=%s\\n' \"$(cat $v)\"; "
        "if command -v dpkg-query >/dev/null 2>&1; then "
        f"dpkg-query -W -f='${{Package}}=${{Version}}\\n' {PACKAGES_DEB} 2>/dev/null; "
        "elif command -v rpm >/dev/null 2>&1; then "
        f"rpm -q --qf '%{{NAME}}=%{{VERSION}}-%{{RELEASE}}\\n' {PACKAGES_RPM} 2>/dev/null "
        "| grep -v 'not installed'; fi; true"
    )


def parse_versions(text: str) -> dict[str, str]:
    """`name=version` lines as a mapping; blank versions and other lines are ignored."""
    found: dict[str, str] = {}
    for line in strip_ansi(text).splitlines():
        name, sep, version = line.strip().partition("=")
        if sep and name and version.strip() and " " not in name:
            found[ALIASES.get(name, name)] = version.strip()
    return found


VERSIONS: Section[dict[str, str]] = Section("versions", parse_versions)
