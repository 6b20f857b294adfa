"""Each lab node's own view of its host: the /proc and sysfs files the host probes read
(`probes/host_hardware`, `pcie_aer`, `host_settings`), written under the node's folder and
reached through `HPCNET_PROC` and `HPCNET_SYSFS`, and the faults that change them.

Lab nodes share the host's kernel, so each node gets files of its own, in the kernel's
formats: `meminfo` (a 2 TiB node: MemTotal 98.5 % of it), `cmdline` with `iommu=pt`,
`kernel/numa_balancing` 0, clocksource `tsc`, 96 CPUs at governor `performance`, THP
`madvise`, one IOMMU group of type `identity`, and a PCI device with link and AER files for
each GPU (the eight buses of the emulated `nvidia-smi`) and each ERI. No local NVMe. The
emulated `lscpu` and `chronyc` (tools/) print the CPU and the clock offset.

The node's kernel release (`proc/sys/kernel/osrelease`) and `etc/os-release` (under
`HPCNET_ETC`) are the host's, for the versions probe.

Faults (each recorded in the node's `faults`; healing rewrites the view): `memory GIB`
(MemTotal), `aer DEVICE SEVERITY N` (`gpu3`, `erdma_0` or a bus id; `correctable`,
`nonfatal`, `fatal`), `clocksource NAME`, `governor NAME` (every CPU), `software ITEM
VERSION` (`kernel` and `os` here; `nccl` and `rdma-core` in the emulated `dpkg-query`).
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import tempfile
from pathlib import Path

from pytest_hpcnet.lab.state import LabNode, LabState
from pytest_hpcnet.lab.system import LabError

MEMORY_GIB = 2048
MEMTOTAL_SHARE = 0.985
"""MemTotal as a share of installed memory (firmware and kernel reservations, proc(5))."""
CPUS = 96
INSTANCE_TYPE_SPECS = {"CpuCoreCount": CPUS, "MemorySize": float(MEMORY_GIB)}
"""What the lab's control plane says of the lab's instance type (DescribeInstanceTypes):
the installed memory and the CPUs this view shows, so `memory NODE GIB` fails its node
against either the profile or the instance type."""
HUGEPAGE_KIB = 2048
GPU_BUSES = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
"""The emulated GPUs' PCI buses (`emulation.GPU_BUS_IDS`, lower case as sysfs names them)."""
ERI_BUSES = ("1c", "9c")
GPU_ID = ("0x10de", "0x2335", "0x030200")
"""NVIDIA H200 (vendor, device, class: 3D controller)."""
ERI_ID = ("0x1ded", "0x107f", "0x020000")
GPU_LINK = ("32.0 GT/s PCIe", 16)
ERI_LINK = ("16.0 GT/s PCIe", 16)
_UNCORRECTABLE = "Undefined DLP SDES TLP FCP CmpltTO CmpltAbrt UnxCmplt RxOF MalfTLP ECRC "
_UNCORRECTABLE += "UnsupReq ACSViol UncorrIntErr BlockedTLP AtomicOpBlocked TLPBlockedErr "
_UNCORRECTABLE += "PoisonTLPBlocked"
AER_BITS = {
    "correctable": [
        "RxErr",
        "BadTLP",
        "BadDLLP",
        "Rollover",
        "Timeout",
        "NonFatalErr",
        "CorrIntErr",
        "HeaderOF",
        "TOTAL_ERR_COR",
    ],
    "nonfatal": [*_UNCORRECTABLE.split(), "TOTAL_ERR_NONFATAL"],
    "fatal": [*_UNCORRECTABLE.split(), "TOTAL_ERR_FATAL"],
}
"""Each AER file's lines, in the kernel's order (sysfs-bus-pci-devices-aer_stats)."""
FAULT_BIT = {"correctable": "RxErr", "nonfatal": "CmpltTO", "fatal": "DLP"}
"""The error bit a fault of each severity counts (a receiver error, a completion timeout, a
data link protocol error)."""
VIEW_FAULTS = ("memory", "aer", "clocksource", "governor", "software")
PARTS = ("proc", "sys/devices/system", "sys/kernel", "sys/bus/pci/devices", "etc")
"""What the view owns (rewritten whole); the rest of `sys` is the eRDMA view's."""


def pci_devices(eris: list[str]) -> dict[str, tuple[str, tuple[str, str, str], tuple]]:
    """Name (`gpu0`, `erdma_0`) -> (bus id, PCI ids, link) of the node's devices."""
    found = {f"gpu{i}": (f"0000:{bus}:00.0", GPU_ID, GPU_LINK) for i, bus in enumerate(GPU_BUSES)}
    for i, name in enumerate(eris[: len(ERI_BUSES)]):
        found[name] = (f"0000:{ERI_BUSES[i]}:00.0", ERI_ID, ERI_LINK)
    return found


def _aer_text(severity: str, bit: str | None, count: int) -> str:
    lines = []
    for name in AER_BITS[severity]:
        value = count if name == bit or (name.startswith("TOTAL_") and bit) else 0
        lines.append(f"{name} {value}\n")
    return "".join(lines)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _shared(state: LabState, name: str, build) -> Path:
    """`<state>/host_view/<name>`, built once by `build(folder)` and shared by every node
    (built aside and renamed in: nodes start in parallel)."""
    target = state.root / "host_view" / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        aside = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{name}."))
        build(aside)
        try:
            aside.rename(target)
        except OSError:  # another node's thread got there first
            shutil.rmtree(aside, ignore_errors=True)
    return target


def _cpus(governor: str):
    def build(folder: Path) -> None:
        for cpu in range(CPUS):
            _write(folder / f"cpu{cpu}/cpufreq/scaling_governor", f"{governor}\n")

    return build


def _device(
    ids: tuple[str, str, str],
    link: tuple,
    aer: tuple[str, str, int] | None = None,
    rdma: str = "",
):
    """A PCI device folder: ids, link at its maximum, AER files (`aer`: severity, bit, N),
    and for an ERI its `infiniband/<name>` folder (how sysfs names a function's RDMA device)."""

    def build(folder: Path) -> None:
        if rdma:
            (folder / "infiniband" / rdma).mkdir(parents=True, exist_ok=True)
        for key, value in zip(("vendor", "device", "class"), ids, strict=True):
            _write(folder / key, f"{value}\n")
        for key, value in zip(("link_speed", "link_width"), link, strict=True):
            _write(folder / f"current_{key}", f"{value}\n")
            _write(folder / f"max_{key}", f"{value}\n")
        for severity in AER_BITS:
            bit, count = (aer[1], aer[2]) if aer and aer[0] == severity else (None, 0)
            _write(folder / f"aer_dev_{severity}", _aer_text(severity, bit, count))

    return build


def _link(path: Path, target: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def write_host_view(state: LabState, node: LabNode, eris: list[str]) -> None:
    """Write the node's /proc and sysfs host files, with its faults applied. What every node
    shows alike (the CPUs' governors, a healthy PCI device) is one shared folder each node
    links to, as sysfs links `bus/pci/devices/BDF` to the device: a 256-node lab writes it
    once."""
    root = state.node_dir(node.name)
    for part in PARTS:
        shutil.rmtree(root / part, ignore_errors=True)
    faults = node.faults
    gib = float(faults.get("memory", MEMORY_GIB * MEMTOTAL_SHARE))
    meminfo = f"MemTotal:       {int(gib * 1024**2)} kB\nHugePages_Total:       0\n"
    _write(root / "proc/meminfo", meminfo + f"Hugepagesize:       {HUGEPAGE_KIB} kB\n")
    _write(root / "proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-lab root=/dev/vda1 ro iommu=pt\n")
    _write(root / "proc/sys/kernel/numa_balancing", "0\n")
    item, _, version = faults.get("software", "").partition(" ")
    kernel_release = version if item == "kernel" else platform.release()
    _write(root / "proc/sys/kernel/osrelease", f"{kernel_release}\n")
    _write(root / "etc/os-release", _os_release(version if item == "os" else None))
    system = root / "sys/devices/system"
    clock = faults.get("clocksource", "tsc")
    _write(system / "clocksource/clocksource0/current_clocksource", f"{clock}\n")
    governor = faults.get("governor", "performance")
    _link(system / "cpu", _shared(state, f"cpu-{governor}", _cpus(governor)))
    kernel = root / "sys/kernel"
    _write(kernel / "mm/transparent_hugepage/enabled", "always [madvise] never\n")
    _write(kernel / "iommu_groups/0/type", "identity\n")
    aer = faults.get("aer", "").split()
    devices = root / "sys/bus/pci/devices"
    devices.mkdir(parents=True)
    for name, (bdf, ids, link) in pci_devices(eris).items():
        rdma = "" if name.startswith("gpu") else name
        if len(aer) == 3 and aer[0] in (name, bdf):
            severity = aer[1]
            fault = (severity, FAULT_BIT[severity], int(aer[2]))
            _device(ids, link, fault, rdma)(devices / bdf)
        else:
            shared = f"pci-{bdf}-{rdma}" if rdma else f"pci-{bdf}"
            _link(devices / bdf, _shared(state, shared, _device(ids, link, rdma=rdma)))


def _os_release(pretty: str | None) -> str:
    """The host's /etc/os-release, its PRETTY_NAME replaced by the fault's `pretty`."""
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        text = ""
    if pretty is None:
        return text
    kept = [ln for ln in text.splitlines() if not ln.startswith("PRETTY_NAME=")]
    return "".join(f"{ln}\n" for ln in [*kept, f'PRETTY_NAME="{pretty}"'])


def _rewrite(state: LabState, node: LabNode) -> None:
    """The view again from the node's rdma.json (its ERIs) and faults."""
    try:
        devices = json.loads(state.rdma_file(node.name).read_text()).get("devices", [])
    except (OSError, ValueError):
        devices = []
    write_host_view(state, node, [d["name"] for d in devices])


_CHECKS = {
    "memory": (r"\d+(?:\.\d+)?", "a size in GiB such as 1792"),
    "aer": (
        r"(?:gpu[0-7]|erdma_\d|0000:[0-9a-f]{2}:00\.0) (?:correctable|nonfatal|fatal) \d+",
        "DEVICE SEVERITY COUNT such as `gpu3 fatal 1` (gpuN, erdma_N or a bus id)",
    ),
    "clocksource": (r"[a-z0-9_-]+", "a clocksource such as hpet"),
    "governor": (r"[a-z0-9_-]+", "a governor such as powersave"),
    "software": (
        r"(?:kernel|os|nccl|rdma-core) [0-9a-z][0-9a-z.+:~_-]*(?: [0-9a-z.+:~_()-]+)*",
        "ITEM VERSION such as `kernel 5.15.0-999-lab` (kernel, os, nccl, rdma-core)",
    ),
}
DEFAULTS = {"memory": "1792", "clocksource": "hpet", "governor": "powersave"}
DEFAULTS["software"] = "kernel 5.15.0-999-hpcnet-lab"


def view_fault(kind: str):
    """The (injector, healer) of one host-view fault: recorded, then the view rewritten."""
    pattern, what = _CHECKS[kind]

    def inject(state: LabState, node: LabNode, arg: str | None) -> tuple[str, str, str]:
        value = " ".join((arg or DEFAULTS.get(kind, "")).lower().split())
        if not re.fullmatch(pattern, value):
            raise LabError(f"{kind}: expected {what}, got {arg!r}")
        node.faults[kind] = value
        _rewrite(state, node)
        return kind, value, ""

    def heal(state: LabState, node: LabNode, fault_id: str, undo: str) -> None:
        node.faults.pop(kind, None)
        _rewrite(state, node)

    return inject, heal
