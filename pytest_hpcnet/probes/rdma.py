"""RDMA devices and ports: `ibv_devinfo`, `ibstat`, `rdma link`, and the erdma kernel module.

Three sources describe the same devices; `parse_ibv_devinfo`, `parse_ibstat` and
`parse_rdma_link` all return an `RdmaDevices`, and `compare_sources` lists where two of
them disagree. Port states are normalised to the `rdma link` vocabulary (`ACTIVE`,
`DOWN`, `INIT`, `ARMED`; physical `LINK_UP`, `POLLING`, `DISABLED`, ...) while the text
the tool printed is kept for messages.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

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
# shared parsing bits

_NOT_FOUND_RE = re.compile(
    r"hpcnet: (?P<t1>\S+) not found|(?P<t2>[\w.-]+): (?:command )?not found\s*$"
)
_TOOL_NOISE_RE = re.compile(
    r"^(?:Failed to|libibverbs:|ibpanic|ibwarn|ibstat:|ibv_devinfo:|rdma:|Error|error|Warning|"
    r"WARNING|mlx5:|mlx4:|Couldn't|Could not)"
)
_LOGICAL_STATES = {
    "NOP": "NOP",
    "DOWN": "DOWN",
    "INIT": "INIT",
    "INITIALIZING": "INIT",
    "ARMED": "ARMED",
    "ACTIVE": "ACTIVE",
    "ACTIVE_DEFER": "ACTIVE_DEFER",
}
_PHYSICAL_STATES = {
    "NOP": "NOP",
    "NO_STATE_CHANGE": "NOP",
    "SLEEP": "SLEEP",
    "POLLING": "POLLING",
    "DISABLED": "DISABLED",
    "PORTCONFIGURATIONTRAINING": "PORT_CONFIGURATION_TRAINING",
    "PORT_CONFIGURATION_TRAINING": "PORT_CONFIGURATION_TRAINING",
    "LINKUP": "LINK_UP",
    "LINK_UP": "LINK_UP",
    "LINKERRORRECOVERY": "LINK_ERROR_RECOVERY",
    "LINK_ERROR_RECOVERY": "LINK_ERROR_RECOVERY",
    "PHYTEST": "PHY_TEST",
    "PHY_TEST": "PHY_TEST",
}


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in (text or "").splitlines()]


def _tool_missing(text: str, tool: str) -> bool:
    for line in _lines(text):
        m = _NOT_FOUND_RE.search(line.strip())
        if m and (m.group("t1") or m.group("t2")) == tool:
            return True
    return False


def _normalise_state(value: str | None) -> str | None:
    """`PORT_ACTIVE (4)` / `Active` / `ACTIVE` / `4: ACTIVE` -> `ACTIVE`; None if unknown."""
    if not value:
        return None
    word = re.sub(r"\(\d+\)", "", value).strip()
    word = re.sub(r"^\d+:\s*", "", word).upper().replace(" ", "_")
    word = word.removeprefix("PORT_").removeprefix("IBV_PORT_")
    return _LOGICAL_STATES.get(word)


def _normalise_physical(value: str | None) -> str | None:
    """`LinkUp` / `LINK_UP (5)` / `5: LinkUp` -> `LINK_UP`; None if unknown."""
    if not value:
        return None
    word = re.sub(r"\(\d+\)", "", value).strip()
    word = re.sub(r"^\d+:\s*", "", word).upper().replace(" ", "")
    return _PHYSICAL_STATES.get(word)


def _reported(value: str) -> str:
    """The state word as printed, without the numeric code: `PORT_ACTIVE (4)` -> `PORT_ACTIVE`."""
    return re.sub(r"\s*\(\d+\)\s*$", "", value).strip()


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    m = re.match(r"\s*(\d+)", value)
    return int(m.group(1)) if m else None


def _float(value: str | None) -> float | None:
    if value is None:
        return None
    m = re.match(r"\s*(\d+(?:\.\d+)?)", value)
    return float(m.group(1)) if m else None


def _guid(value: str | None) -> str | None:
    """`0x506b4b0300284ddc` or `506b:4b03:0028:4ddc` -> `506b:4b03:0028:4ddc`."""
    if not value:
        return None
    digits = value.strip().lower().removeprefix("0x").replace(":", "")
    if not re.fullmatch(r"[0-9a-f]{1,16}", digits):
        return value.strip()
    digits = digits.rjust(16, "0")
    return ":".join(digits[i : i + 4] for i in range(0, 16, 4))


def _dedupe(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


class _DeviceDraft:
    """Mutable accumulator for one device while parsing."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.fields: dict[str, str] = {}
        self.ports: dict[int, dict[str, str]] = {}

    def build(self, problems: list[str], source: str) -> RdmaDevice:
        f = self.fields
        ports = []
        for number, pf in self.ports.items():
            raw_state = pf.get("state")
            state = _normalise_state(raw_state)
            if raw_state and state is None:
                problems.append(
                    f"{source}: {self.name} port {number}: unreadable state {raw_state!r}"
                )
            raw_phys = pf.get("phys_state")
            phys = _normalise_physical(raw_phys)
            if raw_phys and phys is None:
                problems.append(
                    f"{source}: {self.name} port {number}: unreadable physical state {raw_phys!r}"
                )
            ports.append(
                RdmaPort(
                    number=number,
                    state=state,
                    reported_state=_reported(raw_state) if raw_state else None,
                    physical_state=phys,
                    max_mtu=_int(pf.get("max_mtu")),
                    active_mtu=_int(pf.get("active_mtu")),
                    link_layer=pf.get("link_layer"),
                    netdev=pf.get("netdev"),
                    rate_gbps=_float(pf.get("rate")),
                    lid=_int(pf.get("lid")),
                    sm_lid=_int(pf.get("sm_lid")),
                )
            )
        count = _int(f.get("phys_port_cnt"))
        if count is not None and ports and count != len(ports):
            problems.append(f"{source}: {self.name} reports {count} ports but lists {len(ports)}")
        return RdmaDevice(
            name=self.name,
            ports=tuple(sorted(ports, key=lambda p: p.number)),
            transport=f.get("transport"),
            fw_ver=f.get("fw_ver"),
            node_guid=_guid(f.get("node_guid")),
            sys_image_guid=_guid(f.get("sys_image_guid")),
            vendor_id=f.get("vendor_id"),
            vendor_part_id=f.get("vendor_part_id"),
            hw_ver=f.get("hw_ver"),
            board_id=f.get("board_id"),
            ca_type=f.get("ca_type"),
            phys_port_cnt=count,
        )


# ---------------------------------------------------------------------------
# ibv_devinfo

_IBV_DEVICE_KEYS = {
    "transport",
    "fw_ver",
    "node_guid",
    "sys_image_guid",
    "vendor_id",
    "vendor_part_id",
    "hw_ver",
    "board_id",
    "phys_port_cnt",
}
_IBV_PORT_KEYS = {
    "state": "state",
    "phys_state": "phys_state",
    "max_mtu": "max_mtu",
    "active_mtu": "active_mtu",
    "sm_lid": "sm_lid",
    "port_lid": "lid",
    "link_layer": "link_layer",
}
_KV_RE = re.compile(r"^\s*([A-Za-z_][\w \[\]]*?)\s*:\s*(.*?)\s*$")


def parse_ibv_devinfo(text: str) -> RdmaDevices:
    """Parse `ibv_devinfo` (default or `-v`) output: devices, ports, noise lines."""
    source = "ibv_devinfo"
    if _tool_missing(text, source):
        return RdmaDevices(source, tool_missing=True, problems=("ibv_devinfo not installed",))
    drafts: list[_DeviceDraft] = []
    current: _DeviceDraft | None = None
    port: int | None = None
    notices: list[str] = []
    problems: list[str] = []
    no_devices = False
    for raw in _lines(text):
        line = raw.strip()
        if not line:
            continue
        m = re.match(r"^hca_id:\s*(\S+)", line)
        if m:
            current = _DeviceDraft(m.group(1))
            drafts.append(current)
            port = None
            continue
        if re.match(r"^No IB devices found", line, re.I):
            no_devices = True
            notices.append(line)
            continue
        m = re.match(r"^port:\s*(\d+)\s*$", line)
        if m and current is not None:
            port = int(m.group(1))
            current.ports.setdefault(port, {})
            continue
        m = _KV_RE.match(line)
        if current is not None and m and not _TOOL_NOISE_RE.match(line):
            key, value = m.group(1), m.group(2)
            if key in _IBV_DEVICE_KEYS:
                current.fields[key] = value
            elif key in _IBV_PORT_KEYS and port is not None:
                current.ports[port][_IBV_PORT_KEYS[key]] = value
            # other keys (GID, active_speed, "Device ports:" ...) are not needed
            continue
        notices.append(line)
    devices = tuple(d.build(problems, source) for d in drafts)
    if not devices and not no_devices:
        problems.append("ibv_devinfo: no device block found in output")
    for d in devices:
        if not d.ports:
            problems.append(f"ibv_devinfo: {d.name} lists no ports")
    return RdmaDevices(
        source,
        devices=devices,
        no_devices=no_devices,
        notices=_dedupe(notices),
        problems=_dedupe(problems),
    )


# ---------------------------------------------------------------------------
# ibstat

_IBSTAT_DEVICE_KEYS = {
    "ca type": "ca_type",
    "number of ports": "phys_port_cnt",
    "firmware version": "fw_ver",
    "hardware version": "hw_ver",
    "node guid": "node_guid",
    "system image guid": "sys_image_guid",
}
_IBSTAT_PORT_KEYS = {
    "state": "state",
    "physical state": "phys_state",
    "rate": "rate",
    "base lid": "lid",
    "sm lid": "sm_lid",
    "link layer": "link_layer",
}


def parse_ibstat(text: str) -> RdmaDevices:
    """Parse `ibstat` output (`CA 'mlx5_0'`, `Port 1:`, `State: Active`, ...)."""
    source = "ibstat"
    if _tool_missing(text, source):
        return RdmaDevices(source, tool_missing=True, problems=("ibstat not installed",))
    drafts: list[_DeviceDraft] = []
    current: _DeviceDraft | None = None
    port: int | None = None
    notices: list[str] = []
    problems: list[str] = []
    for raw in _lines(text):
        line = raw.strip()
        if not line:
            continue
        m = re.match(r"^CA\s+'([^']+)'\s*$", line)
        if m:
            current = _DeviceDraft(m.group(1))
            drafts.append(current)
            port = None
            continue
        m = re.match(r"^Port\s+(\d+)\s*:\s*$", line)
        if m and current is not None:
            port = int(m.group(1))
            current.ports.setdefault(port, {})
            continue
        m = _KV_RE.match(line)
        if current is not None and m and not _TOOL_NOISE_RE.match(line):
            key, value = m.group(1).lower(), m.group(2)
            if port is not None and key in _IBSTAT_PORT_KEYS:
                current.ports[port][_IBSTAT_PORT_KEYS[key]] = value
            elif key in _IBSTAT_DEVICE_KEYS:
                current.fields[_IBSTAT_DEVICE_KEYS[key]] = value
            continue
        notices.append(line)
    devices = tuple(d.build(problems, source) for d in drafts)
    if not devices:
        problems.append("ibstat: no CA block found in output")
    return RdmaDevices(
        source, devices=devices, notices=_dedupe(notices), problems=_dedupe(problems)
    )


# ---------------------------------------------------------------------------
# rdma link

_RDMA_LINK_RE = re.compile(
    r"^(?:link\s+|\d+/\d+:\s+)(?P<dev>[^\s/]+)/(?P<port>\d+):?(?:\s+(?P<rest>.*))?$"
)
_RDMA_LINK_KEYS = {"state", "physical_state", "netdev", "lid", "sm_lid", "lmc", "subnet_prefix"}


def parse_rdma_link(text: str) -> RdmaDevices:
    """Parse `rdma link [show]`: new (`link dev/1 state ...`), old (`0/1: dev/1: ...`) or `-j`."""
    source = "rdma link"
    if _tool_missing(text, "rdma"):
        return RdmaDevices(source, tool_missing=True, problems=("rdma (iproute2) not installed",))
    stripped = (text or "").strip()
    if stripped.startswith("["):
        parsed = _parse_rdma_link_json(stripped)
        if parsed is not None:
            return parsed
    drafts: dict[str, _DeviceDraft] = {}
    notices: list[str] = []
    problems: list[str] = []
    for raw in _lines(text):
        line = raw.strip()
        if not line:
            continue
        m = _RDMA_LINK_RE.match(line)
        if not m:
            notices.append(line)
            continue
        draft = drafts.setdefault(m.group("dev"), _DeviceDraft(m.group("dev")))
        fields = draft.ports.setdefault(int(m.group("port")), {})
        tokens = (m.group("rest") or "").split()
        i = 0
        while i < len(tokens):
            key = tokens[i]
            if key in _RDMA_LINK_KEYS and i + 1 < len(tokens):
                fields["phys_state" if key == "physical_state" else key] = tokens[i + 1]
                i += 2
            else:
                i += 1
        if "state" not in fields:
            problems.append(f"rdma link: no state for {m.group('dev')}/{m.group('port')}")
    devices = tuple(d.build(problems, source) for d in drafts.values())
    if not devices:
        problems.append("rdma link: no link line found in output")
    return RdmaDevices(
        source, devices=devices, notices=_dedupe(notices), problems=_dedupe(problems)
    )


def _parse_rdma_link_json(text: str) -> RdmaDevices | None:
    try:
        data, _ = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return None
    if not isinstance(data, list):
        return None
    drafts: dict[str, _DeviceDraft] = {}
    problems: list[str] = []
    for entry in data:
        if not isinstance(entry, dict) or "ifname" not in entry or "port" not in entry:
            problems.append(f"rdma link: unreadable JSON entry {entry!r}")
            continue
        draft = drafts.setdefault(str(entry["ifname"]), _DeviceDraft(str(entry["ifname"])))
        fields = draft.ports.setdefault(int(entry["port"]), {})
        for key in ("state", "netdev", "lid", "sm_lid"):
            if key in entry:
                fields[key] = str(entry[key])
        if "physical_state" in entry:
            fields["phys_state"] = str(entry["physical_state"])
    devices = tuple(d.build(problems, "rdma link") for d in drafts.values())
    return RdmaDevices("rdma link", devices=devices, problems=_dedupe(problems))


def parse_rdma_output(text: str) -> RdmaDevices:
    """Detect which of `ibv_devinfo`, `ibstat` or `rdma link` printed `text`, and parse it."""
    body = text or ""
    if re.search(r"^\s*CA\s+'[^']+'\s*$", body, re.M) or _tool_missing(body, "ibstat"):
        return parse_ibstat(body)
    if re.search(r"^\s*(?:link\s+\S+/\d+\s|\d+/\d+:\s+\S+/\d+:?\s)", body, re.M) or (
        _tool_missing(body, "rdma")
    ):
        return parse_rdma_link(body)
    return parse_ibv_devinfo(body)


# ---------------------------------------------------------------------------
# erdma module


def parse_erdma_module(text: str, module: str = "erdma") -> ErdmaModule:
    """Read `erdma_module_command` output, a bare `lsmod` listing, or `test -d` markers."""
    lines = [line.strip() for line in _lines(text) if line.strip()]
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
    lines = [line.strip() for line in _lines(text) if line.strip()]
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
