"""RDMA devices and ports: `ibv_devinfo`, `ibstat`, `rdma link`, and the erdma kernel module.

Three sources describe the same devices; `parse_ibv_devinfo`, `parse_ibstat` and
`parse_rdma_link` all return an `RdmaDevices`, and `compare_sources` lists where two of
them disagree. Port states are normalised to the `rdma link` vocabulary (`ACTIVE`,
`DOWN`, `INIT`, `ARMED`; physical `LINK_UP`, `POLLING`, `DISABLED`, ...) while the text
the tool printed is kept for messages.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from pytest_hpcnet.probes.sections import Section, when
from pytest_hpcnet.probes.text import strip_ansi

ERDMA_VENDOR_ID = "0x1ded"
"""PCI vendor id of Alibaba Cloud eRDMA devices as `ibv_devinfo` prints it."""

_MISSING_MARK = "hpcnet: {tool} not found"


@dataclass(frozen=True)
class RdmaPort:
    """One port of an RDMA device; None where the source does not show the field."""

    number: int
    state: str | None = None
    """Normalised logical state: ACTIVE, DOWN, INIT, ARMED, NOP, ACTIVE_DEFER."""
    reported_state: str | None = None
    """The state as the tool printed it (`PORT_ACTIVE`, `Active`, `ACTIVE`)."""
    physical_state: str | None = None
    """Normalised physical state: LINK_UP, POLLING, DISABLED, SLEEP, NOP, ..."""
    max_mtu: int | None = None
    active_mtu: int | None = None
    link_layer: str | None = None
    netdev: str | None = None
    rate_gbps: float | None = None
    lid: int | None = None
    sm_lid: int | None = None


@dataclass(frozen=True)
class RdmaDevice:
    """One RDMA device (HCA) and its ports."""

    name: str
    ports: tuple[RdmaPort, ...] = ()
    transport: str | None = None
    fw_ver: str | None = None
    node_guid: str | None = None
    """Normalised as four colon-separated groups of 4 lowercase hex digits."""
    sys_image_guid: str | None = None
    vendor_id: str | None = None
    vendor_part_id: str | None = None
    hw_ver: str | None = None
    board_id: str | None = None
    ca_type: str | None = None
    phys_port_cnt: int | None = None
    truncated: str | None = None
    """Why the device's block is not whole (no port, fewer ports than it reports, a port
    cut before its state or link layer), in one line; None when it is whole."""

    def port(self, number: int) -> RdmaPort | None:
        """The port with this number, or None."""
        return next((p for p in self.ports if p.number == number), None)


@dataclass(frozen=True)
class RdmaDevices:
    """What one source says about the node's RDMA devices."""

    source: str
    """`ibv_devinfo`, `ibstat` or `rdma link`."""
    devices: tuple[RdmaDevice, ...] = ()
    tool_missing: bool = False
    no_devices: bool = False
    """The tool itself said it found no device ("No IB devices found")."""
    notices: tuple[str, ...] = ()
    """Tool warning/error lines (e.g. "Failed to open device"), in order, deduplicated."""
    problems: tuple[str, ...] = ()
    """What could not be read."""

    @property
    def incomplete(self) -> str | None:
        """The truncated device blocks in one line (`erdma_0: no port block; ...`), or None."""
        cut = [f"{d.name}: {d.truncated}" for d in self.devices if d.truncated]
        return "; ".join(cut) + " (output cut short?)" if cut else None

    def names(self) -> tuple[str, ...]:
        """Device names in output order."""
        return tuple(d.name for d in self.devices)

    def device(self, name: str) -> RdmaDevice | None:
        """The device with this name, or None."""
        return next((d for d in self.devices if d.name == name), None)


@dataclass(frozen=True)
class ErdmaModule:
    """Whether the `erdma` kernel module is loaded."""

    loaded: bool | None
    """None when the output did not say."""
    evidence: str | None = None
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompatMode:
    """The `erdma` module parameter `compat_mode` (RoCE compatibility mode)."""

    raw: str | None
    """The value as read from sysfs (`Y`, `N`, `1`, `0`), None when unreadable."""
    enabled: bool | None
    problems: tuple[str, ...] = ()


# ---------------------------------------------------------------------------
# command builders


def _guarded(tool: str, invocation: str) -> str:
    """Run `invocation` when `tool` is on PATH, else print the hpcnet "not found" marker."""
    mark = shlex.quote(_MISSING_MARK.format(tool=tool))
    return f"if command -v {tool} >/dev/null 2>&1; then {invocation}; else echo {mark}; fi"


def ibv_devinfo_command(device: str | None = None, verbose: bool = False) -> str:
    """`ibv_devinfo [-d dev] [-v]` with stderr merged (it prints "Failed to open device")."""
    args = ["ibv_devinfo"]
    if device:
        args += ["-d", shlex.quote(device)]
    if verbose:
        args.append("-v")
    return _guarded("ibv_devinfo", " ".join(args) + " 2>&1")


def ibstat_command(device: str | None = None) -> str:
    """`ibstat [dev]` with stderr merged."""
    args = ["ibstat"]
    if device:
        args.append(shlex.quote(device))
    return _guarded("ibstat", " ".join(args) + " 2>&1")


def rdma_link_command(device: str | None = None) -> str:
    """`rdma link show [dev]` (iproute2) with stderr merged."""
    args = ["rdma", "link", "show"]
    if device:
        args.append(shlex.quote(device))
    return _guarded("rdma", " ".join(args) + " 2>&1")


def erdma_module_command(module: str = "erdma") -> str:
    """Test `/sys/module/<module>` and print a marker line, plus the `lsmod` line if any."""
    mod = shlex.quote(module)
    path = shlex.quote(f"/sys/module/{module}")
    return (
        f"if [ -d {path} ]; then echo 'module '{mod}' loaded'; "
        f"else echo 'module '{mod}' not loaded'; fi; "
        f"lsmod 2>/dev/null | awk -v m={mod} '$1 == m' ; true"
    )


def compat_mode_command(module: str = "erdma") -> str:
    """Print `compat_mode=<value>` from sysfs, or `compat_mode!<reason>`."""
    path = shlex.quote(f"/sys/module/{module}/parameters/compat_mode")
    return (
        f"if [ -r {path} ]; then printf 'compat_mode=%s\\n' \"$(cat {path})\"; "
        f"elif [ -d {shlex.quote(f'/sys/module/{module}')} ]; "
        f"then echo 'compat_mode!no such parameter'; "
        f"else echo 'compat_mode!module not loaded'; fi"
    )


# ---------------------------------------------------------------------------
# erdma module


def output_lines(text: str) -> list[str]:
    """The lines of a tool's output, terminal escapes and trailing blanks removed."""
    return [line.rstrip() for line in strip_ansi(text).splitlines()]


def parse_erdma_module(text: str, module: str = "erdma") -> ErdmaModule:
    """Read `erdma_module_command` output, a bare `lsmod` listing, or `test -d` markers."""
    lines = [line.strip() for line in output_lines(text) if line.strip()]
    for line in lines:
        m = re.match(rf"^module\s+{re.escape(module)}\s+(not\s+)?loaded$", line)
        if m:
            return ErdmaModule(loaded=m.group(1) is None, evidence=line)
    for line in lines:
        fields = line.split()
        if fields and fields[0] == module and len(fields) >= 3 and fields[1].isdigit():
            return ErdmaModule(loaded=True, evidence=line)
    if any(line.split()[:2] == ["Module", "Size"] for line in lines):
        return ErdmaModule(loaded=False, evidence=f"lsmod lists no {module}")
    return ErdmaModule(loaded=None, problems=(f"output does not say whether {module} is loaded",))


def parse_compat_mode(text: str) -> CompatMode:
    """Read `compat_mode=<Y|N|1|0>` / `compat_mode!<reason>` (or a bare sysfs value)."""
    lines = [line.strip() for line in output_lines(text) if line.strip()]
    for line in lines:
        m = re.match(r"^compat_mode\s*!\s*(.*)$", line)
        if m:
            return CompatMode(raw=None, enabled=None, problems=(f"compat_mode: {m.group(1)}",))
        m = re.match(r"^compat_mode\s*=\s*(.*)$", line)
        if m:
            return _compat_value(m.group(1))
    if len(lines) == 1:
        return _compat_value(lines[0])
    return CompatMode(raw=None, enabled=None, problems=("no compat_mode value in output",))


def _compat_value(raw: str) -> CompatMode:
    value = raw.strip()
    enabled = {"y": True, "1": True, "n": False, "0": False}.get(value.lower())
    problems = () if enabled is not None else (f"compat_mode: unexpected value {value!r}",)
    return CompatMode(raw=value, enabled=enabled, problems=problems)


# ---------------------------------------------------------------------------
# decisions


def match_devices(
    devices: RdmaDevices | Iterable[RdmaDevice], pattern: str = "erdma*"
) -> tuple[RdmaDevice, ...]:
    """Devices whose name matches the glob `pattern` (case-sensitive)."""
    items = devices.devices if isinstance(devices, RdmaDevices) else tuple(devices)
    return tuple(d for d in items if fnmatchcase(d.name, pattern))


def is_erdma(device: RdmaDevice) -> bool:
    """An eRDMA device by name, vendor id (0x1ded) or transport, whatever the driver named it."""
    return (
        device.name.startswith("erdma")
        or (device.vendor_id or "").lower() == ERDMA_VENDOR_ID
        or (device.transport or "").lower().startswith("erdma")
    )


def compare_sources(first: RdmaDevices, second: RdmaDevices) -> tuple[str, ...]:
    """Human-readable disagreements between two sources: device/port sets and states."""
    out: list[str] = []
    a_name, b_name = first.source, second.source
    for side, other, s_name, o_name in (
        (first, second, a_name, b_name),
        (second, first, b_name, a_name),
    ):
        for dev in side.devices:
            if other.device(dev.name) is None:
                out.append(f"{s_name} shows device {dev.name}, {o_name} does not")
    for dev in first.devices:
        other = second.device(dev.name)
        if other is None:
            continue
        a_ports = {p.number for p in dev.ports}
        b_ports = {p.number for p in other.ports}
        for n in sorted(a_ports - b_ports):
            out.append(f"{a_name} shows {dev.name} port {n}, {b_name} does not")
        for n in sorted(b_ports - a_ports):
            out.append(f"{b_name} shows {dev.name} port {n}, {a_name} does not")
        for n in sorted(a_ports & b_ports):
            pa, pb = dev.port(n), other.port(n)
            assert pa is not None and pb is not None
            if pa.state and pb.state and pa.state != pb.state:
                out.append(
                    f"{a_name} shows {dev.name} port {n} {pa.reported_state}, "
                    f"{b_name} shows {pb.reported_state}"
                )
            if pa.physical_state and pb.physical_state and pa.physical_state != pb.physical_state:
                out.append(
                    f"{a_name} shows {dev.name} port {n} physical state {pa.physical_state}, "
                    f"{b_name} shows {pb.physical_state}"
                )
            if pa.link_layer and pb.link_layer and pa.link_layer != pb.link_layer:
                out.append(
                    f"{a_name} shows {dev.name} port {n} link layer {pa.link_layer}, "
                    f"{b_name} shows {pb.link_layer}"
                )
    return tuple(out)


@dataclass(frozen=True)
class ModuleListing:
    """`erdma_module_command` output, read for the module a check asks about."""

    text: str

    def state(self, module: str) -> ErdmaModule:
        """Whether `module` is loaded, as the listing says."""
        return parse_erdma_module(self.text, module)


ERDMA_MODULE: Section[ModuleListing] = Section(
    "erdma_module",
    ModuleListing,
    build=when(
        lambda e: e.rdma.kernel_module, lambda e: erdma_module_command(e.rdma.kernel_module)
    ),
)
COMPAT_MODE: Section[CompatMode] = Section(
    "compat_mode",
    parse_compat_mode,
    build=when(
        lambda e: e.rdma.compat_mode,
        lambda e: compat_mode_command(e.rdma.kernel_module or "erdma"),
    ),
)
