"""GPUDirect RDMA readiness of a node: the peer-memory module and PCIe ACS.

NCCL moves GPU memory over the ERI directly only with a peer-memory path (`nvidia_peermem`,
or dma-buf with NCCL >= 2.27, S13) and, on Alibaba's L20N template, with PCIe ACS off on
the bridges ("only with ACS off do GPU <-> eRDMA P2P transfers work"; check: `lspci -vvv`
shows no `ACSCtl: SrcValid+`, S14). The builder is one POSIX sh command; the parser is pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_hpcnet.probes.sections import Section, when
from pytest_hpcnet.probes.text import strip_ansi

PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
NO_PEERMEM = "hpcnet: no peer-memory module"
NO_LSPCI = "hpcnet: lspci not installed"
ACS_MARK = "@@hpcnet acs"


def gdr_command() -> str:
    """Loaded peer-memory modules, then every device line and ACS control line of lspci."""
    mods = "|".join(PEERMEM_MODULES)
    return (
        f"grep -E '^({mods}) ' /proc/modules || echo '{NO_PEERMEM}'; echo '{ACS_MARK}'; "
        "if command -v lspci >/dev/null 2>&1; then lspci -vvv 2>&1 | "
        "grep -E '^[0-9a-f]{2,}:[0-9a-f]{2}[.]|ACSCtl:|access denied'; "
        f"else echo '{NO_LSPCI}'; fi"
    )


@dataclass(frozen=True)
class GdrState:
    """Peer-memory module and ACS state of one node."""

    peermem: str | None = None
    """The loaded module's name (`nvidia_peermem`), None when none is loaded."""
    acs_on: tuple[str, ...] = ()
    """PCI addresses whose ACS control has `SrcValid+` (ACS redirecting P2P)."""
    acs_read: int = 0
    """How many ACSCtl lines were read."""
    problems: tuple[str, ...] = ()


_DEVICE = re.compile(
    r"^([0-9a-f]{2,}:[0-9a-f]{2}\.[0-7]|[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\s"
)


def parse_gdr(text: str) -> GdrState:
    """Read `gdr_command` output (or plain `lspci -vvv` text, then the module is unknown)."""
    lines = [ln.rstrip() for ln in strip_ansi(text).replace("\r", "").splitlines()]
    peermem = None
    problems: list[str] = []
    if ACS_MARK in lines:
        head, tail = lines[: lines.index(ACS_MARK)], lines[lines.index(ACS_MARK) + 1 :]
        for line in head:
            name = line.split(" ", 1)[0]
            if name in PEERMEM_MODULES:
                peermem = name
    else:
        tail = lines
        problems.append("peer-memory module not read (no marker line)")
    current = None
    acs_on: list[str] = []
    read = 0
    for line in tail:
        if line.strip() == NO_LSPCI:
            problems.append("lspci not installed: ACS state unknown")
        elif "access denied" in line:
            problems.append("lspci capabilities access denied (not root): ACS state unknown")
        elif m := _DEVICE.match(line):
            current = m.group(1)
        elif "ACSCtl:" in line:
            read += 1
            if re.search(r"\bSrcValid\+", line):
                acs_on.append(current or "?")
    return GdrState(peermem, tuple(dict.fromkeys(acs_on)), read, tuple(dict.fromkeys(problems)))


ERDMA_GDR: Section[GdrState] = Section(
    "erdma_gdr", parse_gdr, build=when(lambda e: e.erdma.gdr, lambda e: gdr_command())
)
