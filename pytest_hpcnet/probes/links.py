"""Network interfaces: `ip -j [-s] link`, `ip -j addr`, and the text `ip link` / `ip addr`.

`parse_interfaces` reads either form. `mtu_matches` and `erdma_mtu_verdict` (with their
`Verdict`) remain only for suites/test_mtu.py until it moves to a judge in `requirements/`;
the NIC counters are judged in `requirements/host.judge_nic_counters`.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from pytest_hpcnet.probes.sections import Section, always
from pytest_hpcnet.probes.text import strip_ansi


@dataclass(frozen=True)
class InterfaceStats:
    """Counters of one interface (`ip -s`); None where not printed."""

    rx_bytes: int | None = None
    rx_packets: int | None = None
    rx_errors: int | None = None
    rx_dropped: int | None = None
    tx_bytes: int | None = None
    tx_packets: int | None = None
    tx_errors: int | None = None
    tx_dropped: int | None = None


@dataclass(frozen=True)
class InterfaceAddress:
    """One address of an interface."""

    family: str
    """`inet` or `inet6`."""
    address: str
    prefixlen: int | None = None
    scope: str | None = None


@dataclass(frozen=True)
class Interface:
    """One network interface as `ip` shows it."""

    name: str
    index: int | None = None
    parent: str | None = None
    """The part after `@` (`eth0@if5` -> `if5`, `ib1.8002@ib0` -> `ib0`)."""
    mtu: int | None = None
    operstate: str | None = None
    flags: tuple[str, ...] = ()
    link_type: str | None = None
    mac: str | None = None
    qlen: int | None = None
    addresses: tuple[InterfaceAddress, ...] = ()
    stats: InterfaceStats | None = None

    @property
    def is_up(self) -> bool:
        """Administratively and operationally up (flag UP and LOWER_UP, or operstate UP)."""
        return "UP" in self.flags and ("LOWER_UP" in self.flags or self.operstate == "UP")

    def ipv4(self) -> tuple[str, ...]:
        """IPv4 addresses without prefix length."""
        return tuple(a.address for a in self.addresses if a.family == "inet")


@dataclass(frozen=True)
class Interfaces:
    """The interfaces of one node, and what could not be read."""

    interfaces: tuple[Interface, ...] = ()
    tool_missing: bool = False
    problems: tuple[str, ...] = ()

    def names(self) -> tuple[str, ...]:
        """Interface names in output order."""
        return tuple(i.name for i in self.interfaces)

    def get(self, name: str) -> Interface | None:
        """The interface with this name, or None."""
        return next((i for i in self.interfaces if i.name == name), None)

    def by_address(self, address: str) -> Interface | None:
        """The interface holding this IP address, or None."""
        return next(
            (i for i in self.interfaces if any(a.address == address for a in i.addresses)),
            None,
        )


# ---------------------------------------------------------------------------
# command builders


def ip_link_command(interface: str | None = None, stats: bool = True) -> str:
    """`ip -j [-s] link show [dev IF]`, JSON, stderr merged."""
    args = ["ip", "-j"] + (["-s"] if stats else []) + ["link", "show"]
    if interface:
        args += ["dev", shlex.quote(interface)]
    return _guarded("ip", " ".join(args) + " 2>&1")


def ip_addr_command(interface: str | None = None) -> str:
    """`ip -j addr show [dev IF]`, JSON, stderr merged."""
    args = ["ip", "-j", "addr", "show"]
    if interface:
        args += ["dev", shlex.quote(interface)]
    return _guarded("ip", " ".join(args) + " 2>&1")


def _guarded(tool: str, invocation: str) -> str:
    mark = shlex.quote(f"hpcnet: {tool} not found")
    return f"if command -v {tool} >/dev/null 2>&1; then {invocation}; else echo {mark}; fi"


# ---------------------------------------------------------------------------
# parsers


def parse_interfaces(text: str) -> Interfaces:
    """JSON (`ip -j ...`) or text (`ip link` / `ip addr` / `ip -s link`), detected."""
    text = strip_ansi(text)
    if re.search(r"hpcnet: ip not found|\bip: (?:command )?not found", text or ""):
        return Interfaces(tool_missing=True, problems=("ip (iproute2) not installed",))
    start = (text or "").find("[{")
    if start < 0 and (text or "").strip().startswith("[]"):
        return Interfaces(problems=("ip printed an empty list",))
    if start >= 0:
        return parse_ip_json(text)
    return parse_ip_text(text)


def parse_ip_json(text: str) -> Interfaces:
    """Parse `ip -j link`, `ip -j -s link` or `ip -j addr` output (noise around is ignored)."""
    text = strip_ansi(text)
    problems: list[str] = []
    start = (text or "").find("[")
    if start < 0:
        return Interfaces(problems=("no JSON array in output",))
    if start > 0 and text[:start].strip():
        problems.append(f"text before JSON: {text[:start].strip()[:120]!r}")
    try:
        data, _end = json.JSONDecoder().raw_decode(text[start:])
    except ValueError as exc:
        return Interfaces(problems=(*problems, f"invalid JSON: {exc}"))
    if not isinstance(data, list):
        return Interfaces(problems=(*problems, "JSON is not a list"))
    interfaces: list[Interface] = []
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(entry.get("ifname"), str):
            problems.append(f"entry without ifname: {str(entry)[:80]}")
            continue
        interfaces.append(_interface_from_json(entry, problems))
    return Interfaces(interfaces=tuple(interfaces), problems=tuple(problems))


def _opt_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _interface_from_json(entry: dict, problems: list[str]) -> Interface:
    name = entry["ifname"]
    parent = entry.get("link")
    if not isinstance(parent, str):
        parent = f"if{entry['link_index']}" if _opt_int(entry.get("link_index")) else None
    addresses = []
    for info in entry.get("addr_info") or ():
        if isinstance(info, dict) and isinstance(info.get("local"), str):
            addresses.append(
                InterfaceAddress(
                    family=str(info.get("family", "")),
                    address=info["local"],
                    prefixlen=_opt_int(info.get("prefixlen")),
                    scope=info.get("scope") if isinstance(info.get("scope"), str) else None,
                )
            )
    stats = None
    raw_stats = entry.get("stats64") or entry.get("stats")
    if isinstance(raw_stats, dict):
        rx = raw_stats.get("rx") if isinstance(raw_stats.get("rx"), dict) else {}
        tx = raw_stats.get("tx") if isinstance(raw_stats.get("tx"), dict) else {}
        stats = InterfaceStats(
            rx_bytes=_opt_int(rx.get("bytes")),
            rx_packets=_opt_int(rx.get("packets")),
            rx_errors=_opt_int(rx.get("errors")),
            rx_dropped=_opt_int(rx.get("dropped")),
            tx_bytes=_opt_int(tx.get("bytes")),
            tx_packets=_opt_int(tx.get("packets")),
            tx_errors=_opt_int(tx.get("errors")),
            tx_dropped=_opt_int(tx.get("dropped")),
        )
    mtu = _opt_int(entry.get("mtu"))
    if mtu is None:
        problems.append(f"{name}: no mtu")
    flags = entry.get("flags")
    return Interface(
        name=name,
        index=_opt_int(entry.get("ifindex")),
        parent=parent,
        mtu=mtu,
        operstate=entry.get("operstate") if isinstance(entry.get("operstate"), str) else None,
        flags=tuple(str(f) for f in flags) if isinstance(flags, list) else (),
        link_type=entry.get("link_type") if isinstance(entry.get("link_type"), str) else None,
        mac=entry.get("address") if isinstance(entry.get("address"), str) else None,
        qlen=_opt_int(entry.get("txqlen")),
        addresses=tuple(addresses),
        stats=stats,
    )


_HEAD_RE = re.compile(
    r"^(?P<index>\d+):\s+(?P<name>[^\s:@]+)(?:@(?P<parent>[^\s:]+))?:\s+<(?P<flags>[^>]*)>(?P<rest>.*)$"
)
_ADDR_RE = re.compile(
    r"^(?P<family>inet6?)\s+(?P<addr>[0-9A-Fa-f.:]+)(?:/(?P<plen>\d+))?(?:.*?\bscope\s+(?P<scope>\S+))?"
)


class _TextDraft:
    def __init__(self, m: re.Match[str]) -> None:
        rest = m.group("rest")
        self.name = m.group("name")
        self.index = int(m.group("index"))
        self.parent = m.group("parent")
        self.flags = tuple(f for f in m.group("flags").split(",") if f)
        self.mtu = _word_after(rest, "mtu")
        self.operstate = _word_after_str(rest, "state")
        self.qlen = _word_after(rest, "qlen")
        self.link_type: str | None = None
        self.mac: str | None = None
        self.addresses: list[InterfaceAddress] = []
        self.stats: dict[str, int] = {}
        # (direction, or '' for a detail row, and columns) of a stats header just read
        self.pending_header: tuple[str, list[str]] | None = None

    def build(self) -> Interface:
        s = self.stats
        stats = (
            InterfaceStats(
                rx_bytes=s.get("rx_bytes"),
                rx_packets=s.get("rx_packets"),
                rx_errors=s.get("rx_errors"),
                rx_dropped=s.get("rx_dropped"),
                tx_bytes=s.get("tx_bytes"),
                tx_packets=s.get("tx_packets"),
                tx_errors=s.get("tx_errors"),
                tx_dropped=s.get("tx_dropped"),
            )
            if s
            else None
        )
        return Interface(
            name=self.name,
            index=self.index,
            parent=self.parent,
            mtu=self.mtu,
            operstate=self.operstate,
            flags=self.flags,
            link_type=self.link_type,
            mac=self.mac,
            qlen=self.qlen,
            addresses=tuple(self.addresses),
            stats=stats,
        )


def _word_after(text: str, key: str) -> int | None:
    m = re.search(rf"\b{key}\s+(\d+)", text)
    return int(m.group(1)) if m else None


def _word_after_str(text: str, key: str) -> str | None:
    m = re.search(rf"\b{key}\s+(\S+)", text)
    return m.group(1) if m else None


def parse_ip_text(text: str) -> Interfaces:
    """Parse text `ip link show`, `ip addr`, `ip -s link` (`N: name[@parent]: <FLAGS> mtu ...`)."""
    drafts: list[_TextDraft] = []
    problems: list[str] = []
    current: _TextDraft | None = None
    for raw in strip_ansi(text).splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _HEAD_RE.match(line)
        if m:
            current = _TextDraft(m)
            drafts.append(current)
            if current.mtu is None:
                problems.append(f"{current.name}: no mtu")
            continue
        if current is None:
            continue
        if current.pending_header is not None:
            direction, columns = current.pending_header
            current.pending_header = None
            values = line.split()
            if values and all(v.isdigit() for v in values):
                if direction:  # "RX errors: length crc ..." detail rows are skipped
                    for col, val in zip(columns, values, strict=False):
                        current.stats[f"{direction}_{col}"] = int(val)
                continue
        m = re.match(r"^(RX|TX)(?::|\s)\s*(.*)$", line)
        if m and not re.search(r"\d", m.group(2)):
            words = m.group(2).split()
            detail = bool(words) and words[0].endswith(":")
            columns = [c.rstrip(":").lower() for c in words]
            current.pending_header = ("" if detail else m.group(1).lower(), columns)
            continue
        m = re.match(r"^link/(\S+)(?:\s+(\S+))?", line)
        if m:
            current.link_type = m.group(1)
            current.mac = m.group(2) if m.group(2) and m.group(2) != "brd" else None
            continue
        m = _ADDR_RE.match(line)
        if m:
            current.addresses.append(
                InterfaceAddress(
                    family=m.group("family"),
                    address=m.group("addr"),
                    prefixlen=int(m.group("plen")) if m.group("plen") else None,
                    scope=m.group("scope"),
                )
            )
    if not drafts:
        problems.append("no interface line found in output")
    return Interfaces(interfaces=tuple(d.build() for d in drafts), problems=tuple(problems))


# ---------------------------------------------------------------------------
# decisions

LINKS: Section[Interfaces] = Section(
    "links", parse_interfaces, build=always(ip_link_command(stats=True))
)
"""`ip -s link`: every interface with its MTU and counters."""
ADDR: Section[Interfaces] = Section("addr", parse_interfaces, build=always(ip_addr_command()))
"""`ip addr`: every interface with its addresses."""
