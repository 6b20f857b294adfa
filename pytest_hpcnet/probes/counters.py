"""RDMA device and NIC counters read before and after a benchmark phase, and their delta.

Device counters come from sysfs `/sys/class/infiniband/<dev>/ports/<p>/hw_counters/*`
(erdma's names from S12 `erdma_stats.c`: `hw_tx_bytes_cnt`, `hw_bps_limit_drop_cnt`,
`connect_failed_cnt`, ...) or, where sysfs has none, `rdma statistic show` (text or `-j`).
NIC counters come from `ip -s -j link` through `probes.links`. A check reads the delta,
never the total since boot; a counter that went backwards was reset and says so.
Parsers and `counter_delta` are pure and never raise.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

from pytest_hpcnet.probes.links import Interfaces
from pytest_hpcnet.probes.text import strip_ansi

TRAFFIC = ("hw_tx_bytes_cnt", "hw_rx_bytes_cnt")
RATE_LIMIT_DROPS = (
    "hw_bps_limit_drop_cnt",
    "hw_pps_limit_drop_cnt",
    "hw_rx_bps_limit_drop_cnt",
    "hw_rx_pps_limit_drop_cnt",
)
CONNECT_FAILURES = ("connect_failed_cnt", "connect_timeout_cnt", "verbs_create_qp_failed_cnt")
NIC_ERRORS = ("rx_errors", "tx_errors", "rx_dropped", "tx_dropped")
BAD_COUNTERS = RATE_LIMIT_DROPS + CONNECT_FAILURES + NIC_ERRORS
"""Counters whose increase during a run is a finding (bound 0 unless the caller says)."""
NO_COUNTERS_MARK = "hpcnet: no RDMA counters"


@dataclass(frozen=True)
class CounterSnapshot:
    """Counters at one moment: `erdma_0/1` or `eth0` -> counter -> value."""

    source: str
    values: dict[str, dict[str, int]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class CounterDelta:
    """After minus before, per key and counter; reset counters count from 0."""

    deltas: dict[str, dict[str, int]] = field(default_factory=dict)
    resets: tuple[str, ...] = ()
    """`erdma_0/1 hw_tx_bytes_cnt went back from 900 to 12 (counter reset)`."""
    missing: tuple[str, ...] = ()
    """Keys or counters present in one snapshot only."""
    problems: tuple[str, ...] = ()

    def get(self, key: str, counter: str) -> int | None:
        """The delta of one counter, or None when not read both times."""
        return self.deltas.get(key, {}).get(counter)


def rdma_counters_command(sysfs: str = "/sys") -> str:
    """Every hw counter file as `PATH VALUE`; `rdma statistic show` when sysfs has none."""
    glob = f"{shlex.quote(sysfs.rstrip('/') + '/class/infiniband')}/*/ports/*/hw_counters/*"
    mark = shlex.quote(NO_COUNTERS_MARK)
    return (
        f'n=0; for f in {glob}; do [ -f "$f" ] || continue; n=1; '
        'echo "$f $(cat "$f" 2>/dev/null)"; done; '
        "if [ $n = 0 ]; then if command -v rdma >/dev/null 2>&1; "
        f"then rdma statistic show 2>&1; else echo {mark}; fi; fi"
    )


_SYSFS_RE = re.compile(r"/class/infiniband/([^/\s]+)/ports/(\d+)/hw_counters/(\S+)\s+(\S*)$")
_LINK_RE = re.compile(r"^link\s+([^/\s]+)/(\d+)\s+(.*)$")


def _put(values: dict, key: str, name: str, raw: str, problems: list[str]) -> None:
    if re.fullmatch(r"\d+", raw):
        values.setdefault(key, {})[name] = int(raw)
    else:
        problems.append(f"{key} {name}: unreadable value {raw!r}")


def parse_rdma_counters(text: str) -> CounterSnapshot:
    """Read `rdma_counters_command` output: sysfs lines, `rdma statistic show` text or JSON."""
    body = strip_ansi(text).replace("\r", "").strip()
    values: dict[str, dict[str, int]] = {}
    problems: list[str] = []
    if body.startswith("["):
        try:
            entries = json.loads(body)
        except ValueError:
            return CounterSnapshot("rdma statistic", problems=("unparseable JSON (cut short?)",))
        for e in entries if isinstance(entries, list) else []:
            if not isinstance(e, dict) or "ifname" not in e:
                continue
            key = f"{e['ifname']}/{e.get('port', 1)}"
            for name, value in e.items():
                if name not in ("ifindex", "ifname", "port"):
                    _put(values, key, name, str(value), problems)
        return CounterSnapshot("rdma statistic", values, tuple(problems))
    source = "sysfs"
    for line in body.splitlines():
        line = line.strip()
        if not line:
            continue
        if line == NO_COUNTERS_MARK:
            problems.append("no RDMA counters (no sysfs hw_counters, no rdma tool)")
        elif m := _SYSFS_RE.search(line):
            _put(values, f"{m.group(1)}/{m.group(2)}", m.group(3), m.group(4), problems)
        elif m := _LINK_RE.match(line):
            source = "rdma statistic"
            tokens = m.group(3).split()
            for name, raw in zip(tokens[::2], tokens[1::2], strict=False):
                _put(values, f"{m.group(1)}/{m.group(2)}", name, raw, problems)
            if len(tokens) % 2:
                problems.append(f"{m.group(1)}/{m.group(2)}: line cut short ({tokens[-1]!r})")
        else:
            problems.append(f"unexpected line: {line[:80]}")
    if not values and not problems:
        problems.append("no counters in output")
    return CounterSnapshot(source, values, tuple(problems))


def nic_snapshot(interfaces: Interfaces) -> CounterSnapshot:
    """The `ip -s link` counters of every interface as a snapshot."""
    values: dict[str, dict[str, int]] = {}
    problems = list(interfaces.problems)
    for iface in interfaces.interfaces:
        if iface.stats is None:
            problems.append(f"{iface.name}: no counters (use `ip -s`)")
            continue
        counted = {k: v for k, v in vars(iface.stats).items() if v is not None}
        values[iface.name] = counted
    return CounterSnapshot("ip -s link", values, tuple(problems))


def counter_delta(before: CounterSnapshot, after: CounterSnapshot) -> CounterDelta:
    """Per key and counter, after minus before; a counter that went backwards was reset."""
    deltas: dict[str, dict[str, int]] = {}
    resets: list[str] = []
    missing: list[str] = []
    for key in sorted(set(before.values) | set(after.values)):
        old, new = before.values.get(key), after.values.get(key)
        if old is None or new is None:
            missing.append(f"{key} read {'after' if old is None else 'before'} only")
            continue
        for name in sorted(set(old) | set(new)):
            if name not in old or name not in new:
                missing.append(f"{key} {name} read {'after' if name not in old else 'before'} only")
                continue
            if new[name] < old[name]:
                resets.append(
                    f"{key} {name} went back from {old[name]} to {new[name]} (counter reset)"
                )
                deltas.setdefault(key, {})[name] = new[name]
            else:
                deltas.setdefault(key, {})[name] = new[name] - old[name]
    return CounterDelta(deltas, tuple(resets), tuple(missing), before.problems + after.problems)
