"""eRDMA in depth: device identity, GID table and driver state of every ERI on a node.

Identity is by driver (`/sys/class/infiniband/*/device/driver` -> `erdma`) or PCI id
`1ded:107f`, never by name alone: Alibaba's ACK example shows `rocep26s0` (docs/sources.md
section 3, S10); a name glob stays an option. The GID table comes from `ibv_devinfo -v`:
the default (iWARP) driver has one MAC-derived GID at index 0, `compat_mode=Y` fills
RoCEv2-style GIDs where IPv4 is usually index 1 but moves per device with extra IPv6
addresses (section 5, S12/S13). Driver state: module, version, `compat_mode`, congestion
control (`eadm conf -d <dev> -t cc` where `eadm` exists), the port `rate`.

The port `rate` file reads "100 Gb/sec (4X EDR)" whatever the ERI can do (the public
driver hard-codes it, section 4): it is kept as text and never used as a threshold.
Builders return shell commands; parsers are pure, never raise and say what they could not
read in `problems`.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from pytest_hpcnet.probes.sections import Section, always
from pytest_hpcnet.probes.text import strip_ansi

ERDMA_DRIVER = "erdma"
ERDMA_PCI_ID = ("0x1ded", "0x107f")
"""Alibaba eRDMA PCI vendor:device (source S12 README)."""
NOMINAL_RATE = "100 Gb/sec (4X EDR)"
"""What the public driver's `erdma_query_port` reports for every ERI (S12): not a capacity."""
CC_ALGORITHMS = ("newreno", "cubic", "hpcc_rtt", "hpcc_ecn", "mpcc")
"""The public driver's congestion-control enum (S12 `erdma.h`); no DCQCN."""
IB_MTUS = (4096, 2048, 1024, 512, 256)
NO_SYSFS_MARK = "hpcnet: no /sys/class/infiniband devices"
SYSFS_ENV = "HPCNET_SYSFS"
"""With no explicit root, the builders read sysfs under `$HPCNET_SYSFS`, else `/sys`: unset
on real nodes; the lab's sshd sets it to each node's emulated tree (`lab/emulation.py`)."""


def sysfs_path(sysfs: str | None, tail: str) -> str:
    """A shell word for `<sysfs>/<tail>`: quoted when `sysfs` is given, else the root is
    `${HPCNET_SYSFS:-/sys}` (tail must be a plain path)."""
    if sysfs is not None:
        return shlex.quote(f"{sysfs.rstrip('/')}/{tail}")
    if not re.fullmatch(r"[A-Za-z0-9_./*-]*", tail):
        raise ValueError(f"unsafe sysfs path {tail!r}")
    return f'"${{{SYSFS_ENV}:-/sys}}"/{tail}'


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in strip_ansi(text).replace("\r", "").splitlines() if ln.strip()]


# ---------------------------------------------------------------------------
# identity


@dataclass(frozen=True)
class EriIdentity:
    """One RDMA device as sysfs describes it; None where sysfs had no value."""

    name: str
    driver: str | None = None
    vendor: str | None = None
    device: str | None = None
    numa_node: int | None = None
    """-1 in sysfs (no NUMA affinity) is kept as -1."""
    netdevs: tuple[str, ...] = ()

    @property
    def pci_id(self) -> str | None:
        """`1ded:107f`, or None."""
        if not self.vendor or not self.device:
            return None
        return f"{self.vendor.removeprefix('0x')}:{self.device.removeprefix('0x')}"

    @property
    def is_erdma(self) -> bool:
        """Bound to the erdma driver, or Alibaba's PCI id (whatever the device is named)."""
        return (
            self.driver == ERDMA_DRIVER
            or (
                (self.vendor or "").lower(),
                (self.device or "").lower(),
            )
            == ERDMA_PCI_ID
        )


@dataclass(frozen=True)
class EriIdentities:
    """The node's RDMA devices from sysfs, and the eRDMA ones among them."""

    devices: tuple[EriIdentity, ...] = ()
    no_devices: bool = False
    """sysfs has no /sys/class/infiniband entry at all."""
    problems: tuple[str, ...] = ()

    def eris(self, name_glob: str | None = None) -> tuple[EriIdentity, ...]:
        """eRDMA devices by driver or PCI id, optionally also matching `name_glob`."""
        return tuple(
            d
            for d in self.devices
            if d.is_erdma and (name_glob is None or fnmatchcase(d.name, name_glob))
        )

    def reason(self, expected: int | None = None, name_glob: str | None = None) -> str | None:
        """Why the node's ERIs are not as expected, in one line; None when they are."""
        if self.problems and not self.devices:
            return self.problems[0]
        found = self.eris(name_glob)
        others = ", ".join(f"{d.name} (driver {d.driver or '?'})" for d in self.devices)
        if not found:
            where = f" among {others}" if others else " (no RDMA device in sysfs)"
            return f"no eRDMA device (driver erdma or PCI 1ded:107f){where}"
        if expected is not None and len(found) != expected:
            names = ", ".join(d.name for d in found)
            return f"{len(found)} eRDMA devices ({names}), {expected} expected"
        return None


def erdma_identity_command(sysfs: str | None = "/sys") -> str:
    """One `dev=... driver=... vendor=... device=... numa=... netdev=...` line per device
    (`sysfs` None: `$HPCNET_SYSFS` or /sys, see `sysfs_path`)."""
    root = sysfs_path(sysfs, "class/infiniband")
    mark = shlex.quote(NO_SYSFS_MARK)
    return (
        f'n=0; for d in {root}/*; do [ -e "$d" ] || continue; n=1; '
        'drv=$(readlink "$d/device/driver" 2>/dev/null); '
        'printf "dev=%s driver=%s vendor=%s device=%s numa=%s netdev=%s\\n" "${d##*/}" '
        '"${drv##*/}" "$(cat "$d/device/vendor" 2>/dev/null)" '
        '"$(cat "$d/device/device" 2>/dev/null)" "$(cat "$d/device/numa_node" 2>/dev/null)" '
        '"$(ls "$d/device/net" 2>/dev/null | tr "\\n" "," | sed "s/,$//")"; '
        f"done; [ $n = 1 ] || echo {mark}"
    )


def _kv(line: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep:
            out[key] = value
    return out


def parse_erdma_identity(text: str) -> EriIdentities:
    """Read `erdma_identity_command` output."""
    devices: list[EriIdentity] = []
    problems: list[str] = []
    none = False
    for line in _lines(text):
        if line == NO_SYSFS_MARK:
            none = True
            continue
        if not line.startswith("dev="):
            problems.append(f"unexpected line: {line[:80]}")
            continue
        f = _kv(line)
        numa = f.get("numa", "")
        devices.append(
            EriIdentity(
                name=f.get("dev", ""),
                driver=f.get("driver") or None,
                vendor=(f.get("vendor") or "").lower() or None,
                device=(f.get("device") or "").lower() or None,
                numa_node=int(numa) if re.fullmatch(r"-?\d+", numa) else None,
                netdevs=tuple(x for x in f.get("netdev", "").split(",") if x),
            )
        )
    if not devices and not none:
        problems.insert(0, "no device line in output (command cut short?)")
    return EriIdentities(devices=tuple(devices), no_devices=none, problems=tuple(problems))


# ---------------------------------------------------------------------------
# GID table


@dataclass(frozen=True)
class Gid:
    """One GID table entry of a port."""

    index: int
    gid: str
    """Normalised (compressed IPv6 text, `::ffff:198.18.0.11` for IPv4-mapped)."""
    gid_type: str | None = None
    """`RoCE v2`, `RoCE v1`, `IB` when the tool prints it."""

    @property
    def ipv4(self) -> str | None:
        """The IPv4 address of an IPv4-mapped GID, else None."""
        try:
            mapped = ipaddress.IPv6Address(self.gid).ipv4_mapped
        except ValueError:
            return None
        return str(mapped) if mapped else None


@dataclass(frozen=True)
class GidChoice:
    """The GID index NCCL and perftest should use on one device, and why."""

    device: str
    index: int | None
    reason: str
    ipv4: str | None = None


@dataclass(frozen=True)
class GidTables:
    """Port 1 GID table of every device in an `ibv_devinfo -v` output."""

    tables: dict[str, tuple[Gid, ...]]
    problems: tuple[str, ...] = ()

    def choose(self, device: str, address: str | None = None) -> GidChoice:
        """The IPv4 GID index of `device` (matching `address` when given).

        One GID at index 0 and no IPv4 entry is the default (iWARP) driver: index 0.
        """
        gids = self.tables.get(device)
        if gids is None:
            return GidChoice(device, None, f"{device}: not in the ibv_devinfo -v output")
        if not gids:
            return GidChoice(device, None, f"{device}: no GID lines (ibv_devinfo without -v?)")
        v4 = [g for g in gids if g.ipv4 and (address is None or g.ipv4 == address)]
        if v4:
            g = v4[0]
            return GidChoice(
                device, g.index, f"{device}: IPv4 GID {g.gid} at index {g.index}", g.ipv4
            )
        if len(gids) == 1 and gids[0].index == 0:
            return GidChoice(
                device, 0, f"{device}: single GID {gids[0].gid} at index 0 (iWARP default mode)"
            )
        want = f"IPv4 GID for {address}" if address else "IPv4-mapped GID"
        listed = ", ".join(f"[{g.index}] {g.gid}" for g in gids)
        return GidChoice(device, None, f"{device}: no {want} among {listed}")


_GID_RE = re.compile(r"^GID\[\s*(\d+)\]:\s*([0-9A-Fa-f:.]+)\s*(?:,\s*(.+?))?\s*$")


def _normal_gid(raw: str) -> str | None:
    try:
        return str(ipaddress.IPv6Address(raw))
    except ValueError:
        return None


def parse_gid_tables(text: str, port: int = 1) -> GidTables:
    """GIDs of port `port` of every device in `ibv_devinfo -v` output (old hex or new text)."""
    tables: dict[str, list[Gid]] = {}
    problems: list[str] = []
    device: str | None = None
    current_port: int | None = None
    for line in _lines(text):
        if m := re.match(r"^hca_id:\s*(\S+)", line):
            device, current_port = m.group(1), None
            tables.setdefault(device, [])
            continue
        if m := re.match(r"^port:\s*(\d+)$", line):
            current_port = int(m.group(1))
            continue
        if m := _GID_RE.match(line):
            if device is None or current_port != port:
                continue
            gid = _normal_gid(m.group(2))
            if gid is None:
                problems.append(f"{device}: unreadable GID {m.group(2)!r}")
                continue
            tables[device].append(Gid(int(m.group(1)), gid, m.group(3)))
    if not tables:
        problems.append("no hca_id block in output")
    return GidTables({k: tuple(v) for k, v in tables.items()}, tuple(problems))


# ---------------------------------------------------------------------------
# driver state


@dataclass(frozen=True)
class ErdmaDriver:
    """The erdma module and per-device driver settings of one node."""

    loaded: bool | None = None
    version: str | None = None
    version_source: str | None = None
    """Where the version came from: `sysfs`, `modinfo` or `package`; None: not reported."""
    compat_mode: bool | None = None
    cc: dict[str, str | None] | None = None
    """Device -> congestion-control algorithm (`mpcc`, `cubic`, ...); None: not readable."""
    cc_notes: dict[str, str] | None = None
    """Device -> why its CC is not known ("not readable: eadm not installed")."""
    rates: dict[str, str] | None = None
    """Device -> port `rate` text as sysfs shows it (nominal on erdma: never a threshold)."""
    problems: tuple[str, ...] = ()


def erdma_driver_command(devices: Iterable[str] | None, sysfs: str | None = "/sys") -> str:
    """Module, version, compat_mode, and per device the eadm CC setting and port rate.

    `devices` None: every device bound to the erdma driver in sysfs (one round trip, no
    identity needed first)."""
    parts = [
        f"if [ -d {sysfs_path(sysfs, 'module/erdma')} ]; then echo module=loaded; "
        "else echo module=absent; fi",
        # the public driver sets no MODULE_VERSION: modinfo, else the installed package
        f"v=$(cat {sysfs_path(sysfs, 'module/erdma/version')} 2>/dev/null) || v=; s=sysfs; "
        '[ -n "$v" ] || { v=$(modinfo -F version erdma 2>/dev/null) || v=; s=modinfo; }; '
        "[ -n \"$v\" ] || { v=$(dpkg-query -W -f='${Version}' erdma 2>/dev/null) || v=; "
        "s=package; }; "
        "[ -n \"$v\" ] || { v=$(rpm -q --qf '%{VERSION}-%{RELEASE}' erdma 2>/dev/null) || v=; "
        's=package; }; [ -n "$v" ] || s=none; echo "version=$v"; echo "version_source=$s"',
        f'echo "compat_mode=$(cat {sysfs_path(sysfs, "module/erdma/parameters/compat_mode")}'
        ' 2>/dev/null)"',
    ]
    if devices is None:
        root = sysfs_path(sysfs, "class/infiniband")
        parts.append(
            f'for d in {root}/*; do [ -e "$d" ] || continue; n=${{d##*/}}; '
            'drv=$(readlink "$d/device/driver" 2>/dev/null); '
            '[ "${drv##*/}" = erdma ] || continue; '
            "if command -v eadm >/dev/null 2>&1; then "
            'echo "cc:$n=$(eadm conf -d "$n" -t cc 2>&1 | tr "\\n" " ")"; '
            'else echo "cc:$n!eadm not installed"; fi; '
            'echo "rate:$n=$(cat "$d/ports/1/rate" 2>/dev/null)"; done'
        )
        return "; ".join(parts)
    for dev in devices:
        d = shlex.quote(dev)
        rate = shlex.quote(f"{sysfs.rstrip('/')}/class/infiniband/{dev}/ports/1/rate")
        parts.append(
            f"if command -v eadm >/dev/null 2>&1; then "
            f'echo "cc:{dev}=$(eadm conf -d {d} -t cc 2>&1 | tr "\\n" " ")"; '
            f"else echo 'cc:{dev}!eadm not installed'; fi"
        )
        parts.append(f'echo "rate:{dev}=$(cat {rate} 2>/dev/null)"')
    return "; ".join(parts)


def parse_erdma_driver(text: str) -> ErdmaDriver:
    """Read `erdma_driver_command` output."""
    f: dict[str, str] = {}
    cc: dict[str, str | None] = {}
    notes: dict[str, str] = {}
    rates: dict[str, str] = {}
    problems: list[str] = []
    for line in _lines(text):
        if m := re.match(r"^cc:(\S+?)!(.*)$", line):
            cc[m.group(1)], notes[m.group(1)] = None, f"not readable: {m.group(2)}"
        elif m := re.match(r"^cc:(\S+?)=(.*)$", line):
            found = [a for a in CC_ALGORITHMS if re.search(rf"\b{a}\b", m.group(2), re.I)]
            cc[m.group(1)] = found[-1] if len(found) == 1 else None
            if len(found) != 1:
                notes[m.group(1)] = f"not readable: eadm printed {m.group(2).strip()[:60]!r}"
        elif m := re.match(r"^rate:(\S+?)=(.*)$", line):
            rates[m.group(1)] = m.group(2).strip()
        elif m := re.match(r"^(module|version|version_source|compat_mode)=(.*)$", line):
            f[m.group(1)] = m.group(2).strip()
    loaded = {"loaded": True, "absent": False}.get(f.get("module", ""))
    if loaded is None:
        problems.append("output does not say whether erdma is loaded")
    compat = {"y": True, "1": True, "n": False, "0": False}.get(f.get("compat_mode", "").lower())
    if loaded and compat is None:
        problems.append(f"compat_mode unreadable ({f.get('compat_mode', 'no line')!r})")
    return ErdmaDriver(
        loaded=loaded,
        version=f.get("version") or None,
        version_source=(f.get("version_source") or None) if f.get("version") else None,
        compat_mode=compat,
        cc=cc,
        cc_notes=notes,
        rates=rates,
        problems=tuple(problems),
    )


def expected_active_mtu(netdev_mtu: int) -> int:
    """The IB MTU the erdma driver reports for a netdev MTU (largest IB MTU that fits):
    8500 -> 4096, 1400 -> 1024 (source S12 `erdma_query_port`)."""
    return next((m for m in IB_MTUS if netdev_mtu >= m), 256)


def rate_is_nominal(rate: str | None) -> bool:
    """The port rate is the driver's hard-coded "100 Gb/sec (4X EDR)" (not a capacity)."""
    return bool(rate) and " ".join((rate or "").split()) == NOMINAL_RATE


ERDMA_IDENTITY: Section[EriIdentities] = Section(
    "erdma_identity", parse_erdma_identity, build=always(erdma_identity_command(None))
)
ERDMA_DRIVER_STATE: Section[ErdmaDriver] = Section(
    "erdma_driver", parse_erdma_driver, build=always(erdma_driver_command(None, None))
)
GID_TABLES: Section[GidTables] = Section("ibv_devinfo_v", parse_gid_tables)
"""Port 1 GID tables, from the same `ibv_devinfo -v` section as `rdma_parsers.IBV_DEVINFO`."""
