"""`ping` with DF set (path MTU) and plain latency pings, and their output.

A path-MTU probe sends `mtu - 28` bytes of ICMP payload (20 IPv4 + 8 ICMP header
bytes) with fragmentation prohibited (`-M do`); a reply proves the path carries
`mtu`, a "Frag needed" or "message too long, mtu=N" names the smaller MTU.

Fail closed: output that ends before its statistics (no `--- ping statistics ---`, no
summary line, no `rtt` line after replies) or shows fewer probes sent than asked is
`incomplete`, and a lost probe is counted ("2 of 3 replies"), never a pass. So is a run
that is not the one asked (`expected_packet`, `expected_target`: another size or host,
replies of another size, fewer reply lines than the summary counts, two runs, text after
the statistics, a loss or rtt line at odds with the counts and replies, an unreadable
line). Digits are ASCII only.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from pytest_hpcnet.probes.text import ascii_number, strip_ansi

IPV4_ICMP_OVERHEAD = 28
"""IPv4 header (20) + ICMP echo header (8): payload size = MTU - 28."""
PATH_MTU_COUNT = 3
"""Probes `path_mtu_ping_command` sends by default (`-c`)."""
DEFAULT_PAYLOAD = 56
"""ping's ICMP payload without `-s` (`latency_ping_command`): an 84-byte IP packet."""
ICMP_HEADER = 8
"""A reply line counts ICMP bytes: payload + 8 (`-s 8472` -> `8480 bytes from`)."""


@dataclass(frozen=True)
class PingResult:
    """What one `ping` run printed."""

    target: str | None = None
    payload_size: int | None = None
    """ICMP payload bytes from the `PING host (ip) 1472(1500) bytes` header."""
    packet_size: int | None = None
    """IP packet bytes from the same header (payload + 28), i.e. the MTU under test."""
    transmitted: int | None = None
    """From the statistics block; None when the output has none."""
    received: int | None = None
    """From the statistics block, else the number of reply lines."""
    errors: int | None = None
    """`+N errors` from the statistics block, else the number of error lines seen."""
    loss_percent: float | None = None
    remote_mtu: int | None = None
    """Smallest `Frag needed and DF set (mtu = N)` a router reported."""
    local_mtu: int | None = None
    """Smallest `local error: message too long, mtu=N` of the sending host."""
    rtt_min_ms: float | None = None
    rtt_avg_ms: float | None = None
    rtt_max_ms: float | None = None
    rtt_mdev_ms: float | None = None
    has_statistics: bool = False
    tool_missing: bool = False
    error: str | None = None
    """The tool's own fatal error line (unknown host, network unreachable, ...)."""
    problems: tuple[str, ...] = ()
    incomplete: str | None = None
    """Why the output is not a whole run (cut before its statistics, fewer probes sent
    than asked), in one line; None when it is whole."""

    @property
    def lost(self) -> int | None:
        """Probes sent without a reply, from the statistics; None without them."""
        if self.transmitted is None or self.received is None:
            return None
        return max(0, self.transmitted - self.received)

    @property
    def path_mtu(self) -> int | None:
        """The smallest MTU any hop or the local host reported, or None."""
        values = [v for v in (self.remote_mtu, self.local_mtu) if v is not None]
        return min(values) if values else None


# ---------------------------------------------------------------------------
# command builders


def _guarded(invocation: str) -> str:
    return (
        "if command -v ping >/dev/null 2>&1; then "
        f"LC_ALL=C {invocation} 2>&1; else echo 'hpcnet: ping not found'; fi"
    )


def path_mtu_ping_command(
    host: str,
    mtu: int,
    count: int = PATH_MTU_COUNT,
    timeout_s: float = 2,
    interval_s: float = 0.2,
    interface: str | None = None,
) -> str:
    """`ping -M do -c N -s <mtu-28> -W T <host>`: does the path carry `mtu` unfragmented?"""
    if mtu <= IPV4_ICMP_OVERHEAD:
        raise ValueError(f"mtu {mtu} too small for an ICMP probe")
    args = [
        "ping",
        "-n",
        "-M",
        "do",
        "-c",
        str(int(count)),
        "-s",
        str(int(mtu) - IPV4_ICMP_OVERHEAD),
        "-W",
        _num(timeout_s),
        "-i",
        _num(interval_s),
    ]
    if interface:
        args += ["-I", shlex.quote(interface)]
    args.append(shlex.quote(host))
    return _guarded(" ".join(args))


def latency_ping_command(
    host: str, count: int = 10, interval_s: float = 0.2, timeout_s: float = 2
) -> str:
    """`ping -c N -i I -W T <host>` for round-trip times (default payload)."""
    args = [
        "ping",
        "-n",
        "-c",
        str(int(count)),
        "-i",
        _num(interval_s),
        "-W",
        _num(timeout_s),
        shlex.quote(host),
    ]
    return _guarded(" ".join(args))


def _num(value: float) -> str:
    """`2` rather than `2.0`; `0.2` as is."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


# ---------------------------------------------------------------------------
# parser

_A = re.ASCII  # `\d` is 0-9 only: digits of other scripts are no number here
_HEADER_RE = re.compile(
    r"^PING\s+(?P<target>\S+)(?:\s+\((?P<ip>[^)]*)\))?"
    r"(?:\s+from\s+[^\s:]+(?:\s+[^\s:]+)?:)?"  # iputils with -I: `from 10.0.0.1 eth1:`
    r"\s+(?P<payload>\d+)"
    r"(?:\((?P<packet>\d+)\))?\s+bytes of data",
    _A,
)
_BUSYBOX_HEADER_RE = re.compile(
    r"^PING\s+(?P<target>\S+)\s+\((?P<ip>[^)]*)\):\s+(?P<payload>\d+)\s+data", _A
)
_REPLY_RE = re.compile(
    r"^(?P<size>\d+)\s+bytes from\s+(?P<source>[^\s:]+?):?\s.*?\btime[=<]\s*(?P<time>\S+?)\s*ms",
    _A,
)
_REPLY_LIKE_RE = re.compile(r"\bbytes from\b", re.I)
_FRAG_RE = re.compile(r"Frag(?:mentation)? needed and DF set \(mtu\s*=\s*(?P<mtu>\d+)\)", re.I | _A)
_LOCAL_RE = re.compile(r"local error:\s*message too long,\s*mtu\s*=\s*(?P<mtu>\d+)", re.I | _A)
_SUMMARY_RE = re.compile(
    r"^(?P<tx>\d+)\s+packets transmitted,\s+(?P<rx>\d+)\s+(?:packets\s+)?received"
    r"(?P<rest>.*)$",
    _A,
)
_SUMMARY_LIKE_RE = re.compile(r"packets transmitted", re.I)
_RTT_RE = re.compile(
    r"^(?:rtt|round-trip)\s+min/avg/max(?:/(?:mdev|stddev))?\s*=\s*"
    r"(?P<min>[^/\s]+)/(?P<avg>[^/\s]+)/(?P<max>[^/\s]+)(?:/(?P<mdev>[^/\s]+))?\s*ms",
    _A,
)
_RTT_LIKE_RE = re.compile(r"^(?:rtt|round-trip)\b", re.I)
_FATAL_RE = re.compile(
    r"(?:unknown host|Name or service not known|Temporary failure in name resolution|"
    r"Network is unreachable|No route to host|Operation not permitted|invalid argument|"
    r"usage error|bad address|cannot resolve)",
    re.I,
)
_ERROR_LINE_RE = re.compile(
    r"(?:Destination (?:Host|Net|Port) Unreachable|Frag(?:mentation)? needed|local error|"
    r"Time to live exceeded|sendmsg:|Packet filtered)",
    re.I,
)


_STATS_HEADER_RE = re.compile(r"^---\s+\S+\s+ping statistics\s+---$")
_PING_HEADER_LIKE_RE = re.compile(r"^PING\s")


def _not_the_run_asked(
    header: re.Match[str] | None,
    runs: int,
    reply_sizes: list[int],
    reply_sources: list[str],
    unread: list[str],
    after: list[str],
    summary: re.Match[str] | None,
    expected_packet: int | None,
    expected_target: str | None,
) -> str | None:
    """Why a ping output is not the one run asked (its figures are then not measured)."""
    why: list[str] = []
    if runs > 1:
        why.append(f"{runs} ping runs in one output (one asked)")
    if unread:
        why.append(f"unreadable line: {unread[0][:80]}")
    packet = None
    if header is not None:
        payload = int(header.group("payload"))
        packet_text = header.groupdict().get("packet")
        packet = int(packet_text) if packet_text else payload + IPV4_ICMP_OVERHEAD
    if header is not None and int(header.group("payload")) + IPV4_ICMP_OVERHEAD != packet:
        why.append(f"header {header.group('payload')}({packet}) bytes: not payload + 28")
    if header is None and (expected_packet is not None or expected_target is not None):
        why.append("no readable PING header line (which run is it?)")
    if after:
        why.append(f"text after the statistics: {after[0][:80]}")
    if expected_packet is not None and packet is not None and packet != expected_packet:
        why.append(f"ping of {packet}-byte packets, {expected_packet} asked")
    size = packet if packet is not None else expected_packet
    want = size - IPV4_ICMP_OVERHEAD + ICMP_HEADER if size is not None else None
    wrong = sorted({s for s in reply_sizes if want is not None and s != want})
    if wrong:
        shown = ", ".join(map(str, wrong))
        why.append(f"replies of {shown} bytes, {want} expected ({size}-byte packets)")
    # ping prints the name it was given
    if header is not None and expected_target not in (None, header.group("target")):
        why.append(f"a ping of {header.group('target')}, {expected_target} asked")
    if header is not None:
        ip = (header.group("ip") or header.group("target")).strip()
        strangers = sorted({s for s in reply_sources if s not in (ip, header.group("target"))})
        if strangers:
            why.append(f"replies from {', '.join(strangers)}, a ping of {ip}")
    if summary is not None:
        sent, received = int(summary.group("tx")), int(summary.group("rx"))
        if received > sent:
            why.append(f"{received} received of {sent} sent")
        if received > len(reply_sizes):
            why.append(f"the summary says {received} received, {len(reply_sizes)} reply lines")
    return "; ".join(why) if why else None


def _incomplete(
    lines_seen: bool,
    stats_header: bool,
    summary: re.Match[str] | None,
    rtt: re.Match[str] | None,
    expected_count: int | None,
) -> str | None:
    """Why the output is not a whole ping run, or None."""
    if not lines_seen and summary is None:
        return "no ping run in the output (empty, or nothing ping prints)"
    if summary is None:
        if stats_header:
            return "statistics cut short: no summary line (output truncated?)"
        return "no statistics block (ping interrupted or output cut short)"
    received = int(summary.group("rx"))
    if received and rtt is None:
        return "statistics cut short: no rtt line (output truncated?)"
    sent = int(summary.group("tx"))
    if expected_count is not None and sent < expected_count:
        return f"{sent} of {expected_count} probes sent (ping interrupted?)"
    return None


def parse_ping(
    text: str,
    expected_count: int | None = None,
    expected_packet: int | None = None,
    expected_target: str | None = None,
) -> PingResult:
    """Parse iputils/busybox `ping` output, with or without the statistics block.

    `expected_count` is the `-c` the caller asked; fewer probes sent is `incomplete`.
    `expected_packet` is the IP packet size asked (`-s` + 28: the MTU under test, or
    `DEFAULT_PAYLOAD` + 28), `expected_target` the host: a run of another size or host,
    replies of another size or from another host, fewer reply lines than the summary
    counts, two runs in one output, or a reply, summary or rtt line it cannot read (cut
    mid-number: `rtt` lines end in `ms`) is `incomplete` too (not measured). Never raises.
    """
    text = strip_ansi(text if isinstance(text, str) else "")
    if re.search(r"hpcnet: ping not found|\bping: (?:command )?not found", text or ""):
        return PingResult(tool_missing=True, problems=("ping not installed",))
    target = payload = packet = None
    replies: list[float] = []
    error_lines = 0
    remote: list[int] = []
    local: list[int] = []
    summary: re.Match[str] | None = None
    rtt: re.Match[str] | None = None
    fatal: str | None = None
    stats_header = False
    header: re.Match[str] | None = None
    runs = 0
    reply_sizes: list[int] = []
    reply_sources: list[str] = []
    unread: list[str] = []  # a reply, summary or rtt line it cannot read
    after: list[str] = []  # lines after the statistics: another run's, or an error's
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        if rtt is not None or (summary is not None and not _RTT_LIKE_RE.match(line)):
            after.append(line)
        if _STATS_HEADER_RE.match(line):
            stats_header = True
            continue
        if _PING_HEADER_LIKE_RE.match(line):
            runs += 1
        m = _HEADER_RE.match(line) or _BUSYBOX_HEADER_RE.match(line)
        if m and target is None:
            header = m
            target = m.group("target")
            payload = int(m.group("payload"))
            packet_text = m.groupdict().get("packet")
            packet = int(packet_text) if packet_text else payload + IPV4_ICMP_OVERHEAD
            continue
        m = _REPLY_RE.match(line)
        time = ascii_number(m.group("time")) if m else None
        if m and time is not None and time >= 0:
            replies.append(time)
            reply_sizes.append(int(m.group("size")))
            reply_sources.append(m.group("source"))
            continue
        if m or (_REPLY_LIKE_RE.search(line) and line[:1].isdigit()):
            unread.append(line)
            continue
        m = _SUMMARY_RE.match(line)
        if m:
            summary = m
            continue
        if _SUMMARY_LIKE_RE.search(line):
            unread.append(line)
            continue
        m = _RTT_RE.match(line)
        if m and all(
            (v := ascii_number(m.group(k))) is not None and v >= 0
            for k in ("min", "avg", "max", "mdev")
            if m.group(k) is not None
        ):
            rtt = m
            continue
        if m or _RTT_LIKE_RE.match(line):
            unread.append(line)
            continue
        m = _FRAG_RE.search(line)
        if m:
            remote.append(int(m.group("mtu")))
        m = _LOCAL_RE.search(line)
        if m:
            local.append(int(m.group("mtu")))
        if _ERROR_LINE_RE.search(line):
            error_lines += 1
        elif fatal is None and _FATAL_RE.search(line):
            fatal = line
    problems: list[str] = []
    transmitted = received = errors = None
    loss = None
    if summary is not None:
        transmitted = int(summary.group("tx"))
        received = int(summary.group("rx"))
        rest = summary.group("rest")
        m = re.search(r"\+(\d+)\s+errors?", rest, re.ASCII)
        errors = int(m.group(1)) if m else 0
        m = re.search(r"(\S+)%\s+packet loss", rest)
        loss = ascii_number(m.group(1)) if m else None
    else:
        received = len(replies)
        errors = error_lines
        if target is None and fatal is None:
            problems.append("no ping header, replies or statistics in output")
        elif not replies and not error_lines and fatal is None:
            problems.append("no replies and no statistics block")
    rtt_values: tuple[float | None, ...]
    if rtt is not None:
        rtt_values = (
            ascii_number(rtt.group("min")),
            ascii_number(rtt.group("avg")),
            ascii_number(rtt.group("max")),
            ascii_number(rtt.group("mdev")) if rtt.group("mdev") else None,
        )
    elif replies:
        rtt_values = (min(replies), sum(replies) / len(replies), max(replies), None)
    else:
        rtt_values = (None, None, None, None)
    return PingResult(
        target=target,
        payload_size=payload,
        packet_size=packet,
        transmitted=transmitted,
        received=received,
        errors=errors,
        loss_percent=loss,
        remote_mtu=min(remote) if remote else None,
        local_mtu=min(local) if local else None,
        rtt_min_ms=rtt_values[0],
        rtt_avg_ms=rtt_values[1],
        rtt_max_ms=rtt_values[2],
        rtt_mdev_ms=rtt_values[3],
        has_statistics=summary is not None,
        error=fatal,
        problems=tuple(problems),
        incomplete=None
        if fatal
        else _incomplete(
            target is not None or bool(replies) or bool(error_lines),
            stats_header,
            summary,
            rtt,
            expected_count,
        )
        or _not_the_run_asked(
            header,
            runs,
            reply_sizes,
            reply_sources,
            unread,
            after,
            summary,
            expected_packet,
            expected_target,
        )
        or _figures_disagree(summary, loss, rtt_values if rtt is not None else None, replies),
    )


MAX_RTT_MS = 1e6
"""No reply comes later than this (ping's `-W` is seconds): a bigger round trip is a misread."""


def _figures_disagree(
    summary: re.Match[str] | None,
    loss: float | None,
    rtt: tuple[float | None, ...] | None,
    replies: list[float],
) -> str | None:
    """Why the statistics cannot be the run's own (a loss that is not what the counts say,
    an rtt line out of order, non-positive or at odds with the reply lines), or None."""
    if summary is not None:
        sent, received = int(summary.group("tx")), int(summary.group("rx"))
        if loss is None or not 0 <= loss <= 100:
            return f"unreadable packet loss in: {summary.group(0)[:80]}"
        if sent and abs(loss - 100 * (sent - received) / sent) > 1:
            return f"{loss:g}% loss is not {received} of {sent} received"
    if rtt is None:
        return None
    low, avg, high = rtt[0], rtt[1], rtt[2]
    if low is None or avg is None or high is None:
        return "unreadable rtt line"
    if not 0 < low <= avg <= high <= MAX_RTT_MS:
        return f"rtt min/avg/max {low:g}/{avg:g}/{high:g} ms: not a run's round trips"
    if replies:
        slack = 0.002 + 0.01 * high
        if abs(min(replies) - low) > slack or abs(max(replies) - high) > slack:
            return "the rtt line disagrees with the reply lines"
    return None
