"""RDMA devices as the GPU checks see them: PCIe link and NUMA node from sysfs, and the
CUDA version the driver reports.

`/sys/class/infiniband/<dev>/device/` is the device's PCI function: `current_link_speed`
(`16.0 GT/s PCIe`, older kernels `16 GT/s`, `Unknown` when not reported), `max_link_speed`,
`current_link_width`/`max_link_width` (lanes) and `numa_node` (-1: the platform gives none).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_hpcnet.probes.erdma import sysfs_path

if TYPE_CHECKING:
    from pytest_hpcnet.inventory.expectations import Expectations

from pytest_hpcnet.probes.sections import Section, gpu_profile, on_gpu, when
from pytest_hpcnet.probes.text import strip_ansi

SYSFS_KEYS = (
    "numa_node",
    "current_link_speed",
    "max_link_speed",
    "current_link_width",
    "max_link_width",
)

RDMA_SYSFS_COMMAND = (
    f'n=0; for d in {sysfs_path(None, "class/infiniband/*")}; do [ -e "$d" ] || continue; '
    "n=$((n+1)); "
    f"for k in {' '.join(SYSFS_KEYS)}; do "
    'printf \'%s %s %s\\n\' "${d##*/}" "$k" "$(cat "$d/device/$k" 2>/dev/null || echo \'?\')"; '
    'done; done; echo "hpcnet-rdma-devices: $n"'
)
"""`erdma_0 current_link_speed 16.0 GT/s PCIe` per device and key, then the device count
(so an empty class and a cut-short output differ); sysfs under `${HPCNET_SYSFS:-/sys}`."""

CUDA_COMMAND = "nvidia-smi -q -d COMPUTE 2>&1 | grep -m1 'CUDA Version'"
"""The `CUDA Version : 13.0` line of `nvidia-smi -q`'s header (the driver's CUDA version)."""


@dataclass(frozen=True)
class RdmaPci:
    """One RDMA device's PCI function; None where sysfs did not say."""

    device: str
    numa_node: int | None = None
    speed_gts: float | None = None
    speed_max_gts: float | None = None
    width: int | None = None
    width_max: int | None = None
    raw: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RdmaSysfs:
    """Every RDMA device's PCI facts; `error` when the output is not whole."""

    devices: tuple[RdmaPci, ...] = ()
    error: str | None = None


def _speed(value: str | None) -> float | None:
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*GT/s", value or "")
    return float(m.group(1)) if m else None


def _number(value: str | None) -> int | None:
    value = (value or "").strip()
    return int(value) if re.fullmatch(r"-?\d+", value) else None


def parse_rdma_sysfs(text: str) -> RdmaSysfs:
    """Parse RDMA_SYSFS_COMMAND; a missing count line or a device short of keys is an error."""
    found: dict[str, dict[str, str]] = {}
    count: int | None = None
    for line in strip_ansi(text).splitlines():
        m = re.match(r"^hpcnet-rdma-devices: (\d+)\s*$", line.strip())
        if m:
            count = int(m.group(1))
            continue
        words = line.strip().split(" ", 2)
        if len(words) == 3 and words[1] in SYSFS_KEYS:
            found.setdefault(words[0], {})[words[1]] = words[2].strip()
    devices = tuple(
        RdmaPci(
            device=name,
            numa_node=_number(keys.get("numa_node")),
            speed_gts=_speed(keys.get("current_link_speed")),
            speed_max_gts=_speed(keys.get("max_link_speed")),
            width=_number(keys.get("current_link_width")),
            width_max=_number(keys.get("max_link_width")),
            raw=tuple(keys.items()),
        )
        for name, keys in found.items()
    )
    if count is None:
        return RdmaSysfs(devices, "no hpcnet-rdma-devices line: the sysfs output is cut short")
    short = [d.device for d in devices if len(d.raw) < len(SYSFS_KEYS)]
    if count != len(devices) or short:
        return RdmaSysfs(devices, f"{count} devices counted, {len(devices)} read whole")
    return RdmaSysfs(devices)


def parse_cuda_version(text: str) -> str | None:
    """`13.0` from `CUDA Version : 13.0` (`nvidia-smi -q`) or the table's `CUDA Version: 13.0`."""
    m = re.search(r"CUDA Version\s*:\s*(\d+\.\d+(?:\.\d+)?)", strip_ansi(text))
    return m.group(1) if m else None


def _sysfs_expected(expect: Expectations) -> object:
    return gpu_profile(expect) and expect.gpu.rdma_sysfs


RDMA_SYSFS: Section[RdmaSysfs] = Section(
    "rdma_sysfs",
    parse_rdma_sysfs,
    build=when(_sysfs_expected, lambda e: RDMA_SYSFS_COMMAND),
)
GPU_CUDA: Section[str | None] = Section("gpu_cuda", parse_cuda_version, build=on_gpu(CUDA_COMMAND))
