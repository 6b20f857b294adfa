"""iperf3 TCP/UDP throughput (test-only: no suite runs iperf3): builders, parsers, typed result.

Bandwidth in results is Gb/s (10^9 bits/s); iperf3 JSON `bits_per_second` is bits/s,
its text output prints K/M/G bits/sec (decimal).
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass
from typing import Any

from pytest_hpcnet.probes.text import strip_ansi


def server_command(port: int = 5201, timeout_s: int = 120) -> str:
    """A one-shot server (`-1`), bounded by `timeout`."""
    return f"timeout -k 5 {int(timeout_s)} iperf3 -s -1 -p {int(port)}"


def client_command(
    target: str, port: int = 5201, seconds: int = 10, streams: int = 1, reverse: bool = False
) -> str:
    """A JSON-reporting TCP client against `target`."""
    argv = ["iperf3", "-c", shlex.quote(target), "-p", str(int(port)), "-t", str(int(seconds))]
    argv += ["-P", str(int(streams)), "-J"] + (["-R"] if reverse else [])
    return " ".join(argv)


@dataclass(frozen=True)
class Iperf3Result:
    """One iperf3 run: sent/received Gb/s (UDP: the single `sum`), or `error`."""

    protocol: str | None = None
    sent_gbps: float | None = None
    received_gbps: float | None = None
    retransmits: int | None = None
    lost_percent: float | None = None  # UDP
    version: str | None = None
    problems: tuple[str, ...] = ()
    error: str | None = None

    @property
    def gbps(self) -> float | None:
        """The receiver's view where known, else the sender's."""
        return self.received_gbps or self.sent_gbps

    @property
    def ok(self) -> bool:
        return self.error is None and self.gbps is not None


def _bps(block: Any) -> float | None:
    if not isinstance(block, dict):
        return None
    value = block.get("bits_per_second")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _sane(value: float | None) -> bool:
    return value is not None and not math.isnan(value) and not math.isinf(value) and value >= 0


_UNITS = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_SUMMARY_RE = re.compile(
    r"^\[\s*(?:\d+|SUM)\]\s+[\d.]+-[\d.]+\s+sec\s+[\d.]+\s+\w?Bytes\s+([\d.]+)\s+([KMGT]?)bits/sec"
    r"(?:\s+(\d+))?.*?\b(sender|receiver)\s*$"
)


def _parse_text(text: str) -> Iperf3Result:
    sent = received = None
    retr: int | None = None
    errors = []
    for line in text.splitlines():
        m = _SUMMARY_RE.match(line.strip())
        if m:
            value = float(m.group(1)) * _UNITS[m.group(2)] / 1e9
            if m.group(4) == "sender":
                sent = value
                retr = int(m.group(3)) if m.group(3) else retr
            else:
                received = value
        elif line.startswith("iperf3: error") or "unable to" in line.lower():
            errors.append(line.strip())
    if sent is None and received is None:
        if errors:
            return Iperf3Result(error="\n".join(errors))
        flat = " ".join(text.split())[:120] or "empty output"
        return Iperf3Result(error=f"unparseable output: no sender/receiver summary ({flat})")
    return Iperf3Result(protocol="TCP", sent_gbps=sent, received_gbps=received, retransmits=retr)


def parse_iperf3(text: str) -> Iperf3Result:
    """Parse `iperf3 -J` JSON (anything before the first `{` ignored) or text output."""
    text = strip_ansi(text)
    start = text.find("{")
    if start < 0:
        return _parse_text(text)
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        return Iperf3Result(error=f"unparseable output: invalid JSON ({exc.msg})")
    if not isinstance(data, dict):
        return Iperf3Result(error="unparseable output: JSON is not an object")
    start_block = data.get("start") if isinstance(data.get("start"), dict) else {}
    test = start_block.get("test_start") if isinstance(start_block.get("test_start"), dict) else {}
    end = data.get("end") if isinstance(data.get("end"), dict) else {}
    version = start_block.get("version")
    protocol = test.get("protocol")
    problems: list[str] = []
    tool_error = data.get("error") if isinstance(data.get("error"), str) else None

    sent = _bps(end.get("sum_sent"))
    received = _bps(end.get("sum_received"))
    lost = None
    if protocol == "UDP" or ("sum" in end and sent is None):
        udp = end.get("sum") if isinstance(end.get("sum"), dict) else {}
        sent = _bps(udp)
        lost = (
            udp.get("lost_percent") if isinstance(udp.get("lost_percent"), (int, float)) else None
        )
    retr = (
        end.get("sum_sent", {}).get("retransmits")
        if isinstance(end.get("sum_sent"), dict)
        else None
    )
    if received == 0.0 and sent:
        problems.append("receiver reported 0 bits/s (run cut short?)")
        received = None
    values = [v for v in (sent, received) if v is not None]
    if tool_error and not values:
        return Iperf3Result(protocol=protocol, version=version, error=tool_error)
    if not values or not all(_sane(v) for v in values):
        return Iperf3Result(
            protocol=protocol,
            version=version,
            error=tool_error
            or f"unparseable output: bits_per_second sent={sent} received={received}",
        )
    return Iperf3Result(
        protocol=protocol,
        sent_gbps=sent / 1e9 if sent is not None else None,
        received_gbps=received / 1e9 if received is not None else None,
        retransmits=int(retr) if isinstance(retr, int) else None,
        lost_percent=float(lost) if lost is not None else None,
        version=version,
        problems=tuple(problems),
        error=tool_error,
    )
