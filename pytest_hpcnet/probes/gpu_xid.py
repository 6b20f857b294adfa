"""XID events since boot from the kernel log (`journalctl -k -b`, else `dmesg`).

The command says which log it could read (`hpcnet-klog: journalctl|dmesg|none`) and
prints only the `NVRM: Xid` lines, so a long log does not cross the wire. The driver
prints `NVRM: Xid (PCI:0000:5d:00): 79, pid=..., GPU has fallen off the bus.`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pytest_hpcnet.probes.sections import Section, on_gpu
from pytest_hpcnet.probes.text import strip_ansi

XID_SOURCE = "https://docs.nvidia.com/deploy/xid-errors/index.html"
"""NVIDIA, "Xid Errors" (the Xid catalog); 48/63/64 also in "Dynamic Page Retirement"."""

XID_MEANINGS: dict[int, str] = {  # NVIDIA's names; the parentheses are our short notes
    # Checked 2026-11-30 against NVIDIA's Xid catalog ("Analyzing Xid Errors with the Xid
    # Catalog", https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, and
    # the description column of its older table as copied verbatim by public health checks):
    # 74 is spelt "NVLINK Error" and 121 is "C2C Link Error" (was "C2C Link corrected error");
    # 154 "GPU recovery action changed" is from driver messages (open-gpu-kernel-modules #1045).
    13: "Graphics Engine Exception (often the application: illegal address, out of range)",
    31: "GPU memory page fault (often the application: illegal memory access)",
    32: "Invalid or corrupted push buffer stream",
    43: "GPU stopped processing (a channel was reset by the driver)",
    45: "Preemptive cleanup, due to previous errors",
    48: "Double Bit ECC Error (uncorrectable memory error)",
    61: "Internal micro-controller breakpoint/warning",
    62: "Internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    68: "NVDEC0 Exception (video decoder)",
    69: "Graphics Engine class error",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error (the application that hit it must be restarted)",
    95: "Uncontained ECC error (all applications on the GPU affected; reset the GPU)",
    119: "GSP RPC Timeout",
    120: "GSP Error",
    121: "C2C Link Error",
    154: "GPU recovery action changed (reset or reboot required)",
}


def xid_meaning(xid: int) -> str:
    """NVIDIA's name for an XID, or a pointer to the catalog."""
    return XID_MEANINGS.get(xid, f"see the Xid catalog ({XID_SOURCE})")


KERNEL_LOG_COMMAND = (
    'if j=$(journalctl -k -b --no-pager -q 2>/dev/null) && [ -n "$j" ]; then '
    "echo 'hpcnet-klog: journalctl'; printf '%s\\n' \"$j\" | grep -a 'NVRM: Xid'; "
    'elif d=$(dmesg 2>/dev/null) && [ -n "$d" ]; then '
    "echo 'hpcnet-klog: dmesg'; printf '%s\\n' \"$d\" | grep -a 'NVRM: Xid'; "
    "else echo 'hpcnet-klog: none'; fi; true"
)
"""Both read as the SSH user: `dmesg` needs root or `kernel.dmesg_restrict=0`, the journal
root or the `adm`/`systemd-journal` group. A kernel log since boot is never empty."""

Source = Literal["journalctl", "dmesg", "none"]

_MARK_RE = re.compile(r"^hpcnet-klog: (journalctl|dmesg|none)\s*$")
_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.\d)?)\):"
    r"\s*(?P<xid>\d+)\s*,?\s*(?P<detail>.*)$"
)


@dataclass(frozen=True)
class XidEvent:
    """One `NVRM: Xid` line."""

    xid: int
    bus_id: str
    detail: str
    line: str

    @property
    def meaning(self) -> str:
        return xid_meaning(self.xid)


@dataclass(frozen=True)
class XidLog:
    """The XIDs since boot and which log they came from; `error` when none was readable."""

    source: Source | None = None
    events: tuple[XidEvent, ...] = ()
    error: str | None = None
    unreadable: tuple[str, ...] = ()
    """`NVRM: Xid` lines whose code or bus id could not be read."""


def parse_kernel_log(text: str) -> XidLog:
    """Parse KERNEL_LOG_COMMAND's output; without its marker line the XIDs are read but
    `error` says the output is not whole (cut short, or not from that command)."""
    source: Source | None = None
    events: list[XidEvent] = []
    unreadable: list[str] = []
    for raw in strip_ansi(text).splitlines():
        line = raw.strip()
        m = _MARK_RE.match(line)
        if m:
            source = m.group(1)  # type: ignore[assignment]
            continue
        if "NVRM: Xid" not in line:
            continue
        x = _XID_RE.search(line)
        if x is None:
            unreadable.append(line[:200])
            continue
        events.append(XidEvent(int(x.group("xid")), x.group("bus"), x.group("detail"), line))
    error = None
    if source == "none":
        error = (
            "neither journalctl -k nor dmesg was readable "
            "(needs root, the adm/systemd-journal group, or kernel.dmesg_restrict=0)"
        )
    elif source is None:
        error = "no hpcnet-klog line: the kernel log output is cut short or not ours"
    elif unreadable:
        error = f"{len(unreadable)} XID line(s) not understood: {unreadable[0][:100]!r}"
    return XidLog(source=source, events=tuple(events), error=error, unreadable=tuple(unreadable))


GPU_KLOG: Section[XidLog] = Section("gpu_klog", parse_kernel_log, build=on_gpu(KERNEL_LOG_COMMAND))
