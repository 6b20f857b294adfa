"""Tool versions on a node (OS release, kernel, erdma driver, rdma-core, perftest, fio,
Open MPI, NCCL, DCGM, PyTorch). nccl-tests has no package: its version is the one its run's
header names (`# nccl-tests version 2.19.6 nccl-headers=...`), compared by `gpu_nccl_node`.

Read from the package database rather than by running the tools: `ib_write_bw --version`
on an old perftest would start a server instead. The kernel is `/proc/sys/kernel/osrelease`
(what `uname -r` prints) and the OS `/etc/os-release`, read under `$HPCNET_PROC` and
`$HPCNET_ETC` where set (a lab node's own view; unset on a real node).
"""

from __future__ import annotations

from pytest_hpcnet.probes.sections import Section, always
from pytest_hpcnet.probes.text import strip_ansi

PROC = "${HPCNET_PROC:-/proc}"
ETC = "${HPCNET_ETC:-/etc}"
DCGM_PACKAGES = "datacenter-gpu-manager datacenter-gpu-manager-4-core"
PACKAGES_DEB = f"rdma-core ibverbs-utils perftest fio openmpi-bin libnccl2 {DCGM_PACKAGES}"
PACKAGES_RPM = f"rdma-core libibverbs-utils perftest fio openmpi libnccl {DCGM_PACKAGES}"
ALIASES = {
    "libnccl2": "nccl",
    "libnccl": "nccl",
    "datacenter-gpu-manager": "dcgm",
    "datacenter-gpu-manager-4-core": "dcgm",
}
"""Package names reported under the tool's name (NVIDIA's NCCL and DCGM packages)."""
SITE_PACKAGES = (
    "/usr/local/lib/python3*/dist-packages",
    "/usr/local/lib/python3*/site-packages",
    "/usr/lib/python3/dist-packages",
    "/usr/lib/python3*/site-packages",
    "/usr/lib64/python3*/site-packages",
)
"""Where the system's pip installs PyTorch: its `torch-<version>.dist-info` is read by name
(no interpreter started; a virtual environment's torch is the GPU engines' probe's)."""


def versions_command() -> str:
    """Print `name=version` lines; tools that are not installed print nothing."""
    return (
        f"printf 'kernel=%s\\n' \"$(cat {PROC}/sys/kernel/osrelease 2>/dev/null || uname -r)\"; "
        f"( . {ETC}/os-release 2>/dev/null && "
        "printf 'os=%s\\n' \"${PRETTY_NAME:-$ID $VERSION_ID}\" ); "
        "v=/sys/module/erdma/version; [ -r $v ] && printf 'erdma=%s\\n' \"$(cat $v)\"; "
        f"for t in {' '.join(d + '/torch-*.dist-info' for d in SITE_PACKAGES)}; do "
        '[ -d "$t" ] || continue; t=${t##*/torch-}; printf \'torch=%s\\n\' "${t%.dist-info}"; '
        "break; done; "
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


VERSIONS: Section[dict[str, str]] = Section(
    "versions", parse_versions, build=always(versions_command())
)
