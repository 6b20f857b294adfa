"""Security-group / ACL reachability: a listener on the target, a connector on the source.

`listener_command` ships `listener.py` inline to the target; `connect_command` runs a
small inline Python on the source that tries every (proto, port) concurrently and
prints one line per flow: `tcp 22 open|refused|timeout|error:<msg>`. UDP counts as
open only when the listener's echo comes back; an ICMP port-unreachable is `refused`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_hpcnet.inventory.port_specs import expand_ports
from pytest_hpcnet.probes.text import strip_ansi

Proto = Literal["tcp", "udp"]
Outcome = Literal["open", "refused", "timeout", "error"]

CONNECT_WORKERS = 32

_LISTENER_SOURCE = Path(__file__).with_name("listener.py")


@dataclass(frozen=True)
class Flow:
    """One protocol/port pair to test."""

    proto: Proto
    port: int

    def __str__(self) -> str:
        return f"{self.proto} {self.port}"


@dataclass(frozen=True)
class Reachability:
    """The outcome of one flow from the source to the target."""

    proto: Proto
    port: int
    outcome: Outcome
    detail: str | None = None
    """The error message for `error`."""

    @property
    def open(self) -> bool:
        """The target answered (TCP accepted, UDP echoed)."""
        return self.outcome == "open"

    @property
    def flow(self) -> Flow:
        """The flow this result is for."""
        return Flow(self.proto, self.port)


@dataclass(frozen=True)
class ConnectResults:
    """Parsed output of `connect_command`."""

    results: tuple[Reachability, ...] = ()
    tool_missing: bool = False
    problems: tuple[str, ...] = ()

    def get(self, proto: str, port: int) -> Reachability | None:
        """The result of one flow, or None."""
        return next((r for r in self.results if r.proto == proto and r.port == port), None)


@dataclass(frozen=True)
class ListenerStatus:
    """Parsed output of the listener."""

    ready: bool = False
    tcp_bound: tuple[int, ...] = ()
    udp_bound: tuple[int, ...] = ()
    tcp_busy: tuple[int, ...] = ()
    """Already bound by another process (e.g. sshd on 22): open by an existing service."""
    udp_busy: tuple[int, ...] = ()
    failed: tuple[tuple[str, int, str], ...] = ()
    """(proto, port, why) for ports that could not be bound for another reason."""
    exit_reason: str | None = None
    served: int | None = None
    tool_missing: bool = False
    problems: tuple[str, ...] = ()

    def listening(self, proto: str, port: int) -> bool:
        """Something listens on the port: our listener or an existing service."""
        if proto == "tcp":
            return port in self.tcp_bound or port in self.tcp_busy
        return port in self.udp_bound or port in self.udp_busy


# ---------------------------------------------------------------------------
# port specs


def flows_for(
    tcp: int | str | Iterable[int | str] = (), udp: int | str | Iterable[int | str] = ()
) -> tuple[Flow, ...]:
    """Flows for TCP and UDP port specs."""
    return tuple(Flow("tcp", p) for p in expand_ports(tcp)) + tuple(
        Flow("udp", p) for p in expand_ports(udp)
    )


# ---------------------------------------------------------------------------
# command builders


def listener_source() -> str:
    """The text of `listener.py`, shipped inline to the target."""
    return _LISTENER_SOURCE.read_text()


def _python(source: str, args: list[str]) -> str:
    """Run `source` with the node's system python3 (stdlib only: isolated mode, no `site`,
    which saves a third of its start-up); a python3 found on PATH is the fallback: shims of
    pyenv or conda cost far more than the probe."""
    quoted = " ".join(shlex.quote(a) for a in args)
    return (
        "py=; for p in /usr/bin/python3 /usr/local/bin/python3; do "
        '[ -x "$p" ] && py=$p && break; done; py=${py:-$(command -v python3)}; '
        'if [ -n "$py" ]; then '
        f'"$py" -I -S -u -c {shlex.quote(source)} {quoted} 2>&1; '
        "else echo 'hpcnet: python3 not found'; fi"
    )


def listener_command(
    address: str,
    tcp_ports: Iterable[int],
    udp_ports: Iterable[int],
    lifetime_s: float = 30,
    idle_s: float = 0,
) -> str:
    """Run the listener on the target: binds, prints READY/BUSY, exits after the lifetime."""
    tcp = ",".join(str(p) for p in expand_ports(list(tcp_ports)))
    udp = ",".join(str(p) for p in expand_ports(list(udp_ports)))
    args = [
        "--address",
        address,
        "--tcp",
        tcp,
        "--udp",
        udp,
        "--lifetime",
        str(float(lifetime_s)),
        "--idle",
        str(float(idle_s)),
    ]
    return _python(listener_source(), args)


CONNECT_SOURCE = r"""
import socket, sys, time
from concurrent.futures import ThreadPoolExecutor

target, timeout = sys.argv[1], float(sys.argv[2])
flows = [(f.split(":")[0], int(f.split(":")[1])) for f in sys.argv[3:]]
family = socket.AF_INET6 if ":" in target else socket.AF_INET
PAYLOAD = b"hpcnet-probe"


def why(exc):
    return "error:" + " ".join(str(exc.strerror or exc).split())


def tcp(port):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((target, port))
        return "open"
    except socket.timeout:
        return "timeout"
    except ConnectionRefusedError:
        return "refused"
    except OSError as exc:
        return why(exc)
    finally:
        s.close()


def udp(port):
    s = socket.socket(family, socket.SOCK_DGRAM)
    try:
        s.connect((target, port))
        deadline = time.monotonic() + timeout
        for attempt in range(2):
            s.send(PAYLOAD)
            until = deadline if attempt else time.monotonic() + timeout / 2
            while True:
                left = until - time.monotonic()
                if left <= 0:
                    break
                s.settimeout(left)
                try:
                    if s.recv(65535) == PAYLOAD:
                        return "open"
                except socket.timeout:
                    break
        return "timeout"
    except ConnectionRefusedError:
        return "refused"
    except OSError as exc:
        return why(exc)
    finally:
        s.close()


def run(flow):
    return (tcp if flow[0] == "tcp" else udp)(flow[1])


with ThreadPoolExecutor(max_workers=max(1, min(WORKERS, len(flows)))) as pool:
    for (proto, port), outcome in zip(flows, pool.map(run, flows)):
        print(proto, port, outcome, flush=True)
print("DONE", len(flows), flush=True)
"""


def connect_command(
    target_address: str, flows: Iterable[Flow | tuple[str, int]], timeout_s: float = 2
) -> str:
    """Run on the source: try every flow to `target_address` concurrently.

    Total time is about `timeout_s * ceil(len(flows) / 32)`.
    """
    items = [f if isinstance(f, Flow) else Flow(f[0], int(f[1])) for f in flows]
    for f in items:
        if f.proto not in ("tcp", "udp") or not 1 <= f.port <= 65535:
            raise ValueError(f"invalid flow {f}")
    source = CONNECT_SOURCE.replace("WORKERS", str(CONNECT_WORKERS))
    args = [target_address, str(float(timeout_s))] + [f"{f.proto}:{f.port}" for f in items]
    return _python(source, args)


# ---------------------------------------------------------------------------
# parsers

_MISSING_RE = re.compile(r"hpcnet: python3 not found|\bpython3: (?:command )?not found")
_RESULT_RE = re.compile(r"^(?P<proto>tcp|udp)\s+(?P<port>\d+)\s+(?P<outcome>\S.*)$", re.I)


def parse_connect(text: str) -> ConnectResults:
    """Parse `connect_command` output: one `proto port outcome` line per flow."""
    text = strip_ansi(text)
    if _MISSING_RE.search(text or ""):
        return ConnectResults(tool_missing=True, problems=("python3 not installed on source",))
    results: list[Reachability] = []
    problems: list[str] = []
    done = False
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        if re.match(r"^DONE\s+\d+$", line):
            done = True
            continue
        m = _RESULT_RE.match(line)
        if not m:
            problems.append(f"unreadable line: {line[:120]!r}")
            continue
        proto = m.group("proto").lower()
        port = int(m.group("port"))
        word = m.group("outcome").strip()
        if word in ("open", "refused", "timeout"):
            results.append(Reachability(proto, port, word))
        elif word.startswith("error"):
            detail = word.partition(":")[2].strip() or None
            results.append(Reachability(proto, port, "error", detail))
        else:
            problems.append(f"unknown outcome {word!r} for {proto} {port}")
    if not results:
        problems.append("no flow results in output")
    elif not done:
        problems.append("output ends before DONE: results may be incomplete")
    return ConnectResults(results=tuple(results), problems=tuple(problems))


def parse_listener(text: str) -> ListenerStatus:
    """Parse the listener's READY / BUSY / FAILED / EXIT lines."""
    text = strip_ansi(text)
    if _MISSING_RE.search(text or ""):
        return ListenerStatus(tool_missing=True, problems=("python3 not installed on target",))
    ready = False
    bound: dict[str, tuple[int, ...]] = {"tcp": (), "udp": ()}
    busy: dict[str, list[int]] = {"tcp": [], "udp": []}
    failed: list[tuple[str, int, str]] = []
    exit_reason: str | None = None
    served: int | None = None
    problems: list[str] = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        m = re.match(r"^READY\s+tcp:(?P<tcp>[\d,]*)\s+udp:(?P<udp>[\d,]*)$", line)
        if m:
            ready = True
            for proto in ("tcp", "udp"):
                bound[proto] = tuple(int(p) for p in m.group(proto).split(",") if p)
            continue
        m = re.match(r"^BUSY\s+(tcp|udp):(\d+)$", line)
        if m:
            busy[m.group(1)].append(int(m.group(2)))
            continue
        m = re.match(r"^FAILED\s+(tcp|udp):(\d+)\s*(.*)$", line)
        if m:
            failed.append((m.group(1), int(m.group(2)), m.group(3) or "unknown"))
            continue
        m = re.match(r"^EXIT\s+(\S+)(?:\s+served=(\d+))?$", line)
        if m:
            exit_reason = m.group(1)
            served = int(m.group(2)) if m.group(2) else None
            continue
        problems.append(line[:200])
    if not ready:
        problems.append("listener never printed READY")
    return ListenerStatus(
        ready=ready,
        tcp_bound=bound["tcp"],
        udp_bound=bound["udp"],
        tcp_busy=tuple(busy["tcp"]),
        udp_busy=tuple(busy["udp"]),
        failed=tuple(failed),
        exit_reason=exit_reason,
        served=served,
        problems=tuple(problems),
    )
