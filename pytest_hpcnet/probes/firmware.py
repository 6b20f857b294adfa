"""Firmware on a node: per GPU the VBIOS, InfoROM image, GSP firmware and ECC mode
(`nvidia-smi -q`), each ERI netdev's driver and firmware (`ethtool -i`), the host's BIOS
vendor and version (sysfs `/sys/class/dmi/id`, `dmidecode -t bios` where sysfs is not
readable). Three facts sections of the one round trip; the parsers never raise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_hpcnet.probes.erdma import sysfs_path
from pytest_hpcnet.probes.sections import Section, always, on_gpu
from pytest_hpcnet.probes.text import strip_ansi

GPU_FIRMWARE_COMMAND = (
    'nvidia-smi -q 2>&1 | awk \'/^[^ ]/ {print; next} /^    [^ ]/ {b = $0; sub(/ +$/, "", b)} '
    "/^    (VBIOS Version|GSP Firmware Version) / {print} "
    '/^        (Image Version|Current) / && (b == "    Inforom Version" || b == "    ECC Mode") '
    "{print b; print}'"
)
"""The full query (GSP firmware is in no `--query-gpu` field and in no `-d` display), only
its firmware lines sent back: each GPU's head, VBIOS, GSP, InfoROM image and current ECC
mode under their block's line (about 8 lines per GPU of the 200 `-q` prints)."""
NIC_MARK = "hpcnet-nic"
NOT_EXPECTED = "not expected"
"""What a section prints where the profile expects nothing of it (`campaigns/fact_sections`)."""


def nic_info_command() -> str:
    """`ethtool -i` of each ERI's netdev (under its `== hpcnet-nic NAME` line)."""
    nets = sysfs_path(None, "class/infiniband/*/device/net/*")
    return (
        f'for d in {nets}; do [ -e "$d" ] || continue; n=${{d##*/}}; '
        f'echo "== {NIC_MARK} $n"; ethtool -i "$n" 2>&1; done; true'
    )


def bios_command() -> str:
    """BIOS vendor and version from sysfs (world-readable), else `dmidecode -t bios`."""
    dmi = sysfs_path(None, "class/dmi/id")
    return (
        f"if [ -r {dmi}/bios_version ]; then "
        f"printf 'bios_vendor=%s\\nbios_version=%s\\n' \"$(cat {dmi}/bios_vendor)\" "
        f'"$(cat {dmi}/bios_version)"; '
        "else dmidecode -t bios 2>&1; fi"
    )


# ---------------------------------------------------------------------------
# nvidia-smi -q


@dataclass(frozen=True)
class GpuFirmware:
    """One GPU's firmware as `nvidia-smi -q` prints it (`N/A` kept as printed)."""

    index: int
    bus_id: str
    vbios: str | None = None
    inforom_image: str | None = None
    gsp_firmware: str | None = None
    ecc_mode: str | None = None

    @property
    def label(self) -> str:
        return f"GPU {self.index} ({self.bus_id})"


@dataclass(frozen=True)
class GpuFirmwareList:
    """Every GPU `nvidia-smi -q` listed; `error` when it could not be read (no GPU block,
    or fewer blocks than `Attached GPUs`)."""

    gpus: tuple[GpuFirmware, ...] = ()
    error: str | None = None
    expected: bool = True
    """False where the profile expects no GPU (the section printed `not expected`)."""


_GPU_HEAD = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_ITEM = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*?)\s*$")


def parse_smi_firmware(text: str) -> GpuFirmwareList:
    """Per GPU block: `VBIOS Version`, `Inforom Version / Image Version`, `GSP Firmware
    Version` and `ECC Mode / Current` (by their indentation under their block)."""
    if text.strip() == NOT_EXPECTED:
        return GpuFirmwareList(expected=False)
    attached: int | None = None
    gpus: list[dict[str, str]] = []
    parent = ""
    for raw in strip_ansi(text).replace("\r", "").splitlines():
        head = _GPU_HEAD.match(raw)
        if head:
            gpus.append({"bus_id": head.group(1)})
            parent = ""
            continue
        m = _ITEM.match(raw)
        if m is None:
            block = raw.strip()
            if block and raw.startswith("    ") and not raw.startswith("        "):
                parent = block
            continue
        indent, key, value = len(m.group(1)), m.group(2).strip(), m.group(3)
        if key == "Attached GPUs" and value.isdigit():
            attached = int(value)
        if not gpus:
            continue
        gpu = gpus[-1]
        if indent == 4:
            parent = ""
            if key == "VBIOS Version":
                gpu["vbios"] = value
            elif key == "GSP Firmware Version":
                gpu["gsp_firmware"] = value
        elif indent == 8 and parent == "Inforom Version" and key == "Image Version":
            gpu["inforom_image"] = value
        elif indent == 8 and parent == "ECC Mode" and key == "Current":
            gpu["ecc_mode"] = value
    found = tuple(
        GpuFirmware(
            index=i,
            bus_id=g["bus_id"],
            vbios=g.get("vbios"),
            inforom_image=g.get("inforom_image"),
            gsp_firmware=g.get("gsp_firmware"),
            ecc_mode=g.get("ecc_mode"),
        )
        for i, g in enumerate(gpus)
    )
    if not found:
        line = next((ln.strip() for ln in strip_ansi(text).splitlines() if ln.strip()), "")
        return GpuFirmwareList(error=f"no GPU in `nvidia-smi -q`: {line[:100]!r}")
    if attached is not None and attached != len(found):
        return GpuFirmwareList(found, f"`nvidia-smi -q` lists {len(found)} of {attached} GPUs")
    return GpuFirmwareList(found)


# ---------------------------------------------------------------------------
# ethtool -i


@dataclass(frozen=True)
class NicInfo:
    """`ethtool -i` of one netdev: the empty firmware of a virtio NIC stays ``""``."""

    netdev: str
    driver: str | None = None
    version: str | None = None
    firmware: str | None = None
    bus_info: str | None = None


def parse_ethtool_info(netdev: str, text: str) -> NicInfo:
    """One `ethtool -i` output (`key: value` lines; a trailing space or no value is "")."""
    fields: dict[str, str] = {}
    for line in strip_ansi(text).replace("\r", "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and " " not in key.strip():
            fields[key.strip()] = value.strip()
    return NicInfo(
        netdev=netdev,
        driver=fields.get("driver") or None,
        version=fields.get("version"),
        firmware=fields.get("firmware-version"),
        bus_info=fields.get("bus-info"),
    )


def parse_nic_info(text: str) -> tuple[NicInfo, ...]:
    """Each `== hpcnet-nic NAME` block's `ethtool -i` (a block without `driver:` is kept,
    its driver None: ethtool failed there)."""
    blocks: list[tuple[str, list[str]]] = []
    for line in strip_ansi(text).replace("\r", "").splitlines():
        if line.startswith(f"== {NIC_MARK} "):
            blocks.append((line.split(None, 2)[2].strip(), []))
        elif blocks:
            blocks[-1][1].append(line)
    return tuple(parse_ethtool_info(name, "\n".join(lines)) for name, lines in blocks)


# ---------------------------------------------------------------------------
# BIOS


@dataclass(frozen=True)
class BiosInfo:
    """The host's BIOS vendor and version (None: not read)."""

    vendor: str | None = None
    version: str | None = None
    date: str | None = None


def parse_bios(text: str) -> BiosInfo:
    """`bios_vendor=`/`bios_version=` lines (sysfs), else the `BIOS Information` block of
    `dmidecode` (its `Vendor:`, `Version:` and `Release Date:`)."""
    clean = strip_ansi(text).replace("\r", "")
    pairs = dict(
        line.partition("=")[::2] for line in clean.splitlines() if line.startswith("bios_")
    )
    if pairs.get("bios_version", "").strip():
        return BiosInfo(
            vendor=pairs.get("bios_vendor", "").strip() or None,
            version=pairs["bios_version"].strip(),
        )
    fields: dict[str, str] = {}
    inside = False
    for line in clean.splitlines():
        if not line.strip():
            if inside and fields:
                break
            continue
        if not line[0].isspace():
            inside = line.strip() == "BIOS Information"
            continue
        key, sep, value = line.strip().partition(":")
        if inside and sep:
            fields.setdefault(key.strip(), value.strip())
    return BiosInfo(
        vendor=fields.get("Vendor") or None,
        version=fields.get("Version") or None,
        date=fields.get("Release Date") or None,
    )


GPU_FIRMWARE: Section[GpuFirmwareList] = Section(
    "gpu_firmware", parse_smi_firmware, build=on_gpu(GPU_FIRMWARE_COMMAND)
)
NIC_INFO: Section[tuple[NicInfo, ...]] = Section(
    "nic_info", parse_nic_info, build=always(nic_info_command())
)
BIOS: Section[BiosInfo] = Section("bios", parse_bios, build=always(bios_command()))


# ---------------------------------------------------------------------------
# the node's firmware as items to compare


@dataclass(frozen=True)
class FirmwareItem:
    """One compared value: the item (`vbios`), where on the node (`GPU 3 (…)`, `eth0`, ""
    for the host) and its value (``""`` for an empty one: a virtio NIC's firmware)."""

    item: str
    where: str
    value: str


@dataclass(frozen=True)
class NodeFirmware:
    """A node's firmware items, and what could not be read (one line each)."""

    items: tuple[FirmwareItem, ...] = ()
    unread: tuple[str, ...] = ()


def node_firmware(
    gpus: GpuFirmwareList | None, nics: tuple[NicInfo, ...] | None, bios: BiosInfo | None
) -> NodeFirmware:
    """A node's items from its three sections (None: the section was not given whole,
    named as unread; GPUs the profile does not expect are left out)."""
    items: list[FirmwareItem] = []
    unread: list[str] = []
    for name, section in ((GPU_FIRMWARE, gpus), (NIC_INFO, nics), (BIOS, bios)):
        if section is None:
            unread.append(f"section {name.name} not given whole")
    if gpus is not None and gpus.expected:
        if gpus.error:
            unread.append(gpus.error)
        for gpu in gpus.gpus:
            for item in ("vbios", "inforom_image", "gsp_firmware", "ecc_mode"):
                value = getattr(gpu, item)
                if value is not None:
                    items.append(FirmwareItem(item, gpu.label, value))
    for nic in nics or ():
        if nic.driver is None:
            unread.append(f"`ethtool -i {nic.netdev}` unreadable")
            continue
        driver = f"{nic.driver} {nic.version or ''}".strip()
        items.append(FirmwareItem("nic_driver", nic.netdev, driver))
        items.append(FirmwareItem("nic_firmware", nic.netdev, nic.firmware or ""))
    if bios is not None:
        if bios.version is None:
            unread.append("BIOS version unreadable (sysfs dmi, dmidecode)")
        else:
            items.append(FirmwareItem("bios_vendor", "", bios.vendor or ""))
            items.append(FirmwareItem("bios_version", "", bios.version))
    return NodeFirmware(tuple(items), tuple(unread))
