"""PCIe devices that carry the work (NVIDIA GPUs, ERIs, NVMe) as sysfs shows them: each
one's AER counters (`aer_dev_correctable`, `aer_dev_nonfatal`, `aer_dev_fatal`) and its
link speed and width, in one facts section.

Devices are found by PCI id and class under `$HPCNET_SYSFS/bus/pci/devices` (else /sys):
NVIDIA (0x10de) display/3D controllers (class 0x03xxxx, not its NVSwitch bridges), the
ERI (`1ded:107f`) and NVMe controllers (class 0x010802). Each output line is
`BDF KEY VALUE...`; an AER file's lines (`TLP 0`, `TOTAL_ERR_FATAL 0`: the kernel's
sysfs-bus-pci-devices-aer_stats format) each come after its BDF and file name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_hpcnet.probes.erdma import ERDMA_PCI_ID
from pytest_hpcnet.probes.sections import Section, always
from pytest_hpcnet.probes.text import strip_ansi

SYSFS = "${HPCNET_SYSFS:-/sys}"
NVIDIA = "0x10de"
NVME_CLASS = "0x010802"
AER_FILES = {
    "aer_dev_correctable": ("correctable", "TOTAL_ERR_COR"),
    "aer_dev_nonfatal": ("nonfatal", "TOTAL_ERR_NONFATAL"),
    "aer_dev_fatal": ("fatal", "TOTAL_ERR_FATAL"),
}
"""sysfs file -> (severity, the kernel's total line in it)."""
LINK_FILES = ("current_link_speed", "max_link_speed", "current_link_width", "max_link_width")


@dataclass(frozen=True)
class PcieDevice:
    """One device: its kind (`gpu`, `eri`, `nvme`), ids, AER totals and link."""

    bdf: str
    kind: str
    vendor: str = ""
    device: str = ""
    aer: dict[str, int] = field(default_factory=dict)
    """severity (`correctable`, `nonfatal`, `fatal`) -> the kernel's total; a severity
    whose file sysfs lacks (AER not supported or not enabled) is absent."""
    aer_detail: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    """severity -> the non-zero error bits (`TLP`, `RxErr`) with their counts."""
    link: dict[str, str] = field(default_factory=dict)

    def _speed(self, key: str) -> float | None:
        try:
            return float(self.link[key].split()[0])
        except (KeyError, IndexError, ValueError):
            return None

    def _width(self, key: str) -> int | None:
        value = self.link.get(key, "")
        return int(value) if value.isdigit() else None

    @property
    def speed_gts(self) -> float | None:
        return self._speed("current_link_speed")

    @property
    def speed_max_gts(self) -> float | None:
        return self._speed("max_link_speed")

    @property
    def width(self) -> int | None:
        return self._width("current_link_width")

    @property
    def width_max(self) -> int | None:
        return self._width("max_link_width")


@dataclass(frozen=True)
class PcieDevices:
    """The node's GPUs, ERIs and NVMe controllers; `complete` when the listing ended."""

    devices: tuple[PcieDevice, ...] = ()
    complete: bool = False
    problems: tuple[str, ...] = ()

    @property
    def incomplete(self) -> bool:
        """The output was cut before its `done` line."""
        return not self.complete

    def of_kind(self, kind: str) -> tuple[PcieDevice, ...]:
        return tuple(d for d in self.devices if d.kind == kind)


IDS = ("vendor", "device", "class")
_SELECT = (
    # grep -H prints `BDF/file:value`, each file kind over all devices in turn, ids first
    '{ i = index($0, "/"); b = substr($0, 1, i - 1); r = substr($0, i + 1); '
    'j = index(r, ":"); f = substr(r, 1, j - 1); v = substr(r, j + 1) } '
    'f == "vendor" { ven[b] = v; next } f == "device" { dev[b] = v; next } '
    'f == "class" { k = ""; '
    f'if (ven[b] == "{NVIDIA}" && v ~ /^0x03/) k = "gpu"; '
    'else if (ven[b] == "{vendor}" && dev[b] == "{device}") k = "eri"; '
    f'else if (v == "{NVME_CLASS}") k = "nvme"; '
    'if (k != "") { kind[b] = k; print b, "kind", k, ven[b], dev[b] } next } '
    "(b in kind) { print b, f, v }"
)


def pcie_devices_command() -> str:
    """Each GPU, ERI and NVMe device's ids, link and AER files, then `done`: one `grep` over
    every device's files and one `awk` keeping the devices that carry the work (POSIX sh; a
    few processes however many PCI devices the host has)."""
    vendor, device = ERDMA_PCI_ID
    files = " ".join(f"*/{name}" for name in (*IDS, *LINK_FILES, *AER_FILES))
    select = _SELECT.replace("{vendor}", vendor).replace("{device}", device)
    return (
        f"cd {SYSFS}/bus/pci/devices 2>/dev/null && grep -H . {files} 2>/dev/null | "
        f"awk '{select}'; echo done"
    )


def parse_pcie_devices(text: str) -> PcieDevices:
    """Group the lines by BDF; a device's AER total is the file's TOTAL_ line (the sum of
    its bits where the kernel printed none)."""
    order: list[str] = []
    kinds: dict[str, tuple[str, str, str]] = {}
    links: dict[str, dict[str, str]] = {}
    bits: dict[str, dict[str, dict[str, int]]] = {}
    problems: list[str] = []
    complete = False
    for raw in strip_ansi(text).splitlines():
        line = raw.strip()
        if line == "done":
            complete = True
            continue
        fields = line.split()
        if len(fields) < 3:
            if line:
                problems.append(f"unreadable line: {line[:120]!r}")
            continue
        bdf, key, rest = fields[0], fields[1], fields[2:]
        if key == "kind" and len(rest) == 3:
            order.append(bdf)
            kinds[bdf] = (rest[0], rest[1], rest[2])
        elif key in LINK_FILES:
            links.setdefault(bdf, {})[key] = " ".join(rest)
        elif key in AER_FILES and len(rest) == 2 and rest[1].isdigit():
            bits.setdefault(bdf, {}).setdefault(key, {})[rest[0]] = int(rest[1])
        else:
            problems.append(f"unreadable line: {line[:120]!r}")
    devices = []
    for bdf in order:
        kind, vendor, device = kinds[bdf]
        aer, detail = {}, {}
        for name, counts in bits.get(bdf, {}).items():
            severity, total_key = AER_FILES[name]
            shown = {k: v for k, v in counts.items() if k != total_key}
            aer[severity] = counts.get(total_key, sum(shown.values()))
            detail[severity] = tuple((k, v) for k, v in shown.items() if v)
        devices.append(PcieDevice(bdf, kind, vendor, device, aer, detail, links.get(bdf, {})))
    return PcieDevices(tuple(devices), complete, tuple(problems))


PCIE_DEVICES: Section[PcieDevices] = Section(
    "pcie_devices", parse_pcie_devices, build=always(pcie_devices_command())
)
