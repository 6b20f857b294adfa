"""Parsers of the three tools that list RDMA devices: `ibv_devinfo`, `ibstat`, `rdma link`.

Each returns an `RdmaDevices` (see `rdma`), whatever the layout (old and new tool
versions, `-v`, JSON from `rdma -j`), with warning lines skipped and a missing tool or an
error output reported as such rather than as "no devices".

Fail closed: a device block cut short (no port, fewer ports than `phys_port_cnt`, a port
without its state or link layer, a state cut mid-word; with `-v`, a port cut before the
verbose fields that end it) is marked `truncated`, and `RdmaDevices.incomplete` names every
such device in one line.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable

from pytest_hpcnet.probes.rdma import (
    RdmaDevice,
    RdmaDevices,
    RdmaPort,
    ibv_devinfo_command,
    output_lines,
    rdma_link_command,
)
from pytest_hpcnet.probes.sections import Section, always
from pytest_hpcnet.probes.text import PARSE_CACHE, strip_ansi

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


def _tool_missing(text: str, tool: str) -> bool:
    for line in output_lines(text):
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


_FIELD_NAMES = {
    "phys_state": "physical state",
    "link_layer": "link layer",
    "active_speed": "active speed",
}
_IBV_REQUIRED = ("state", "active_mtu", "link_layer")
"""Fields `ibv_devinfo` prints for every port (phys_state only in newer rdma-core)."""
_IBV_VERBOSE_REQUIRED = ("active_speed",)
"""The last port field `ibv_devinfo -v` prints after `link_layer` whatever the transport
(devinfo.c); `phys_state` follows, which some versions print for transport 0
(IBV_TRANSPORT_IB: InfiniBand, eRDMA) only, then the GID table."""
_IBSTAT_REQUIRED = ("state", "phys_state", "link_layer")


class _DeviceDraft:
    """Mutable accumulator for one device while parsing."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.fields: dict[str, str] = {}
        self.ports: dict[int, dict[str, str]] = {}
        self.verbose = False
        """The block shows `ibv_devinfo -v`'s device attributes."""

    def build(
        self, problems: list[str], source: str, required: tuple[str, ...] = ("state",)
    ) -> RdmaDevice:
        """The device; `required` are the port fields a whole port block always shows."""
        f = self.fields
        ports = []
        cut: list[str] = []
        for number, pf in self.ports.items():
            raw_state = pf.get("state")
            state = _normalise_state(raw_state)
            missing = [_FIELD_NAMES.get(k, k) for k in required if not pf.get(k)]
            if missing:
                cut.append(f"port {number} has no {', '.join(missing)}")
            if raw_state and state is None:
                problems.append(
                    f"{source}: {self.name} port {number}: unreadable state {raw_state!r}"
                )
                cut.append(f"port {number} state {_reported(raw_state)!r} unreadable")
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
        if not ports:
            cut.insert(0, "no port block")
        elif count is not None and len(ports) < count:
            cut.insert(0, f"reports {count} ports, lists {len(ports)}")
        return RdmaDevice(
            truncated="; ".join(cut) or None,
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
    "active_speed": "active_speed",
}
_IBV_VERBOSE_KEYS = {"max_mr_size", "page_size_cap", "max_qp"}
"""Device attributes only `-v` prints, first after `phys_port_cnt` (rdma-core devinfo.c)."""
_KV_RE = re.compile(r"^\s*([A-Za-z_][\w \[\]]*?)\s*:\s*(.*?)\s*$")


def _ibv_required(draft: _DeviceDraft) -> tuple[str, ...]:
    """The port fields a whole block of this device shows: with `-v` attributes, its ports
    go on past `link_layer` (devinfo.c), so a port cut there is cut, not whole."""
    if not draft.verbose:
        return _IBV_REQUIRED
    required = _IBV_REQUIRED + _IBV_VERBOSE_REQUIRED
    if re.search(r"\(0\)$", draft.fields.get("transport", "")):
        required += ("phys_state",)
    return required


@functools.lru_cache(maxsize=PARSE_CACHE)
def parse_ibv_devinfo(text: str) -> RdmaDevices:
    """Parse `ibv_devinfo` (default or `-v`) output: devices, ports, noise lines (cached per
    output text: the result is frozen, and every eRDMA check of a node reads the same one)."""
    source = "ibv_devinfo"
    if _tool_missing(text, source):
        return RdmaDevices(source, tool_missing=True, problems=("ibv_devinfo not installed",))
    drafts: list[_DeviceDraft] = []
    current: _DeviceDraft | None = None
    port: int | None = None
    notices: list[str] = []
    problems: list[str] = []
    no_devices = False
    for raw in output_lines(text):
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
        noise = _TOOL_NOISE_RE.match(line) is not None
        if current is not None and m and not noise:
            key, value = m.group(1), m.group(2)
            if key in _IBV_DEVICE_KEYS:
                current.fields[key] = value
            elif key in _IBV_VERBOSE_KEYS and port is None:
                current.verbose = True
            elif key in _IBV_PORT_KEYS and port is not None:
                current.ports[port][_IBV_PORT_KEYS[key]] = value
            # other keys (GID, "Device ports:" ...) are not needed
            continue
        if current is not None and current.verbose and port is None and not noise:
            # `-v` device attributes: flag lists (`BAD_PKEY_CNTR`, `NO SUPPORT`), `tag
            # matching not supported`, MOFED's `ooo_rc_caps  = 0x0`; not the tool's notices
            continue
        notices.append(line)
    devices = tuple(d.build(problems, source, _ibv_required(d)) for d in drafts)
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
    for raw in output_lines(text):
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
    devices = tuple(d.build(problems, source, _IBSTAT_REQUIRED) for d in drafts)
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
    stripped = strip_ansi(text).strip()
    if stripped.startswith("["):
        parsed = _parse_rdma_link_json(stripped)
        if parsed is not None:
            return parsed
    drafts: dict[str, _DeviceDraft] = {}
    notices: list[str] = []
    problems: list[str] = []
    for raw in output_lines(text):
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
        port = entry.get("port") if isinstance(entry, dict) else None
        if not isinstance(port, int) or isinstance(port, bool) or "ifname" not in entry:
            problems.append(f"rdma link: unreadable JSON entry {entry!r}")
            continue
        draft = drafts.setdefault(str(entry["ifname"]), _DeviceDraft(str(entry["ifname"])))
        fields = draft.ports.setdefault(port, {})
        for key in ("state", "netdev", "lid", "sm_lid"):
            if key in entry:
                fields[key] = str(entry[key])
        if "physical_state" in entry:
            fields["phys_state"] = str(entry["physical_state"])
    devices = tuple(d.build(problems, "rdma link") for d in drafts.values())
    return RdmaDevices("rdma link", devices=devices, problems=_dedupe(problems))


def parse_rdma_output(text: str) -> RdmaDevices:
    """Detect which of `ibv_devinfo`, `ibstat` or `rdma link` printed `text`, and parse it."""
    body = strip_ansi(text)
    if re.search(r"^\s*CA\s+'[^']+'\s*$", body, re.M) or _tool_missing(body, "ibstat"):
        return parse_ibstat(body)
    if re.search(r"^\s*(?:link\s+\S+/\d+\s|\d+/\d+:\s+\S+/\d+:?\s)", body, re.M) or (
        _tool_missing(body, "rdma")
    ):
        return parse_rdma_link(body)
    return parse_ibv_devinfo(body)


IBV_DEVINFO: Section[RdmaDevices] = Section(
    "ibv_devinfo_v", parse_ibv_devinfo, build=always(ibv_devinfo_command(verbose=True))
)
"""`ibv_devinfo -v`: the devices and their ports."""
RDMA_LINK: Section[RdmaDevices] = Section(
    "rdma_link", parse_rdma_link, build=always(rdma_link_command())
)
