"""NCCL_DEBUG=INFO lines: which network NCCL chose on each host, its devices, GPUDirect RDMA.

NCCL falls back to TCP sockets when it cannot use RDMA and the collective still completes;
only its INFO lines say so (docs/sources.md): `NET/IB : Using [0]erdma_0:1/RoCE
[RO]; OOB eth0:...` and `Using network IB` on eRDMA, `NET/IB : No device found.` then
`NET/Socket : Using [0]eth0:...` and `Using network Socket` on fallback. GPUDirect RDMA
shows as `GPU Direct RDMA Enabled for HCA` / `via NET/IB/<n>/GDRDMA`, off as
`GPU Direct RDMA Disabled for HCA` or channels `via NET/IB/<n>` without `/GDRDMA`.

`split_nccl_log` keeps the INFO lines apart from the result table (which `parse_nccl`
reads); `parse_nccl_debug` is pure and never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_hpcnet.probes.text import strip_ansi

_PREFIX_RE = re.compile(r"^(?:\[\d+,\d+\]<(?:stdout|stderr)>:|\s*\d+:(?=\s))")
_LINE_RE = re.compile(r"^(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+)\s+\[(?P<dev>\d+)\]\s+NCCL\s+"
                      r"(?P<level>INFO|WARN)\s+(?P<msg>.*)$")  # fmt: skip
_IB_DEV_RE = re.compile(r"\[(\d+)\]([^\s:\[\]]+):(\d+)/(\w+)")
_SOCK_DEV_RE = re.compile(r"\[(\d+)\]([^\s:\[\]]+):")
_GDR_HCA_RE = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for HCA (\d+) '([^']+)'")
_VIA_RE = re.compile(r"via NET/(\w+)/(\d+)(/GDRDMA)?")


@dataclass(frozen=True)
class IbDevice:
    """One device of `NET/IB : Using [0]erdma_0:1/RoCE`."""

    index: int
    name: str
    port: int
    link: str
    """`RoCE` or `IB`."""


@dataclass(frozen=True)
class NcclHostNet:
    """What NCCL's INFO lines say about one host (all its ranks)."""

    host: str
    networks: tuple[str, ...] = ()
    """From `Using network X` (`IB`, `Socket`, a plugin's name), in order, deduplicated."""
    ib_devices: tuple[IbDevice, ...] = ()
    socket_devices: tuple[str, ...] = ()
    ib_missing: bool = False
    """`NET/IB : No device found.`"""
    gdr: bool | None = None
    """True: GDRDMA in use; False: NCCL said it is off; None: the log does not say."""
    gdr_evidence: str | None = None
    nccl_version: str | None = None

    @property
    def on_socket(self) -> bool:
        """NCCL on this host uses TCP sockets for the network."""
        return "Socket" in self.networks


@dataclass(frozen=True)
class NcclNetLog:
    """The NCCL INFO lines of one run, by host."""

    hosts: tuple[NcclHostNet, ...] = ()
    info_lines: int = 0
    problems: tuple[str, ...] = ()

    def host(self, name: str) -> NcclHostNet | None:
        """The host's entry, or None."""
        return next((h for h in self.hosts if h.host == name), None)

    @property
    def socket_hosts(self) -> tuple[str, ...]:
        """Hosts where NCCL fell back to (or chose) sockets."""
        return tuple(h.host for h in self.hosts if h.on_socket)


def split_nccl_log(text: str) -> tuple[str, str]:
    """(NCCL INFO lines, everything else): the log kept apart from the result table."""
    info: list[str] = []
    rest: list[str] = []
    lines = (text or "").splitlines()
    for raw in lines:
        (info if " NCCL INFO " in strip_ansi(raw) else rest).append(raw)
    # an output cut mid-line stays cut: the table's parser must see its last line unfinished
    cut = bool(rest) and lines[-1] is rest[-1] and not (text or "").endswith(("\n", "\r"))
    ended = "" if cut or not rest else "\n"
    return "\n".join(info) + ("\n" if info else ""), "\n".join(rest) + ended


class _Draft:
    def __init__(self, host: str) -> None:
        self.host = host
        self.networks: list[str] = []
        self.ib: list[IbDevice] = []
        self.sock: list[str] = []
        self.ib_missing = False
        self.gdr: bool | None = None
        self.evidence: str | None = None
        self.version: str | None = None

    def gdr_seen(self, on: bool, line: str) -> None:
        if on or self.gdr is None:  # one GDRDMA channel is proof it is on
            self.gdr, self.evidence = on, line if self.gdr is not True else self.evidence

    def build(self) -> NcclHostNet:
        return NcclHostNet(
            host=self.host,
            networks=tuple(dict.fromkeys(self.networks)),
            ib_devices=tuple(dict.fromkeys(self.ib)),
            socket_devices=tuple(dict.fromkeys(self.sock)),
            ib_missing=self.ib_missing,
            gdr=self.gdr,
            gdr_evidence=self.evidence,
            nccl_version=self.version,
        )


def parse_nccl_debug(text: str) -> NcclNetLog:
    """Read the NCCL INFO/WARN lines of a run (any interleaving, mpirun prefixes)."""
    drafts: dict[str, _Draft] = {}
    count = 0
    for raw in strip_ansi(text).replace("\r", "").splitlines():
        m = _LINE_RE.match(_PREFIX_RE.sub("", raw, count=1).strip())
        if not m:
            continue
        count += m.group("level") == "INFO"
        d = drafts.setdefault(m.group("host"), _Draft(m.group("host")))
        msg = m.group("msg").strip()
        if msg.startswith("NET/IB : No device found"):
            d.ib_missing = True
        elif msg.startswith("NET/IB : Using"):
            head = msg.split(";", 1)[0]
            d.ib += [IbDevice(int(a), b, int(c), e) for a, b, c, e in _IB_DEV_RE.findall(head)]
        elif msg.startswith("NET/Socket : Using"):
            d.sock += [name for _, name in _SOCK_DEV_RE.findall(msg)]
        elif n := re.match(r"Using network (.+?)\s*$", msg):
            d.networks.append(n.group(1))
        elif n := re.match(r"NCCL version (\S+)", msg):
            d.version = n.group(1)
        if g := _GDR_HCA_RE.search(msg):
            d.gdr_seen(g.group(1) == "Enabled", msg)
        for via in _VIA_RE.finditer(msg):
            if via.group(1) == "IB":
                d.gdr_seen(via.group(3) is not None, msg)
    problems = () if count else ("no NCCL INFO lines (NCCL_DEBUG=INFO not set?)",)
    return NcclNetLog(tuple(d.build() for d in drafts.values()), count, problems)
