"""Judges of host tuning and NIC health: sysctls, interface error counters, ICMP latency.

Each takes a probe's typed result and the expectations and returns a `Verdict` whose
measurements are the values judged, with their bounds and the expectation key each bound
comes from. What could not be read (a key the node would not show, an interface absent from
`ip -s link`, a ping output cut short) is not measured; the reason does not repeat the node
or pair, which the suite gives as the check's context.
"""

from __future__ import annotations

import re

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.links import LINKS, Interfaces
from pytest_hpcnet.probes.ping import PingResult
from pytest_hpcnet.probes.sysctl import SYSCTL, SysctlValues
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    combine,
    failing,
    not_measured,
    passing,
)

COMPARISON = {"equal": "==", "min": ">=", "one_of": "in"}
"""How each `expect.sysctl` mode is shown as a comparison."""
UNREADABLE_KEY = re.compile(r"permission denied|error reading|operation not permitted", re.I)
"""A sysctl key the node has but would not show: not measured (an unknown key is a fault)."""
FIX_SYSCTL = "set the keys in /etc/sysctl.d/ (e.g. 90-hpcnet.conf) and run `sysctl --system`"


def _ints(value: str) -> list[int] | None:
    fields = value.split()
    if fields and all(re.fullmatch(r"-?\d+", f) for f in fields):
        return [int(f) for f in fields]
    return None


def sysctl_problem(key: str, found: str, expected: str, mode: str) -> str | None:
    """Why `found` does not meet the expectation (`equal`, `min`, `one_of`), or None.

    `min` is numeric "at least": one integer against one, a triple (`tcp_rmem`) field by
    field against a triple, and its last field (the maximum) against a single integer;
    values are compared whitespace-normalised."""
    norm_found = " ".join(found.split())
    norm_exp = " ".join(expected.split())
    if mode == "equal":
        return None if norm_found == norm_exp else f"{key} is {norm_found!r}, expected {norm_exp!r}"
    if mode == "one_of":
        allowed = [" ".join(v.split()) for v in expected.split(",")]
        if norm_found in allowed:
            return None
        return f"{key} is {norm_found!r}, expected one of {', '.join(allowed)}"
    have, want = _ints(norm_found), _ints(norm_exp)
    if have is None or want is None:
        return f"{key}: cannot compare {norm_found!r} with {norm_exp!r} as numbers"
    if len(want) == 1:
        if have[-1] >= want[0]:
            return None
        which = "maximum " if len(have) > 1 else ""
        return f"{key} {which}{have[-1]} is below {want[0]}"
    if len(have) != len(want):
        return f"{key} has {len(have)} fields ({norm_found!r}), expected {len(want)}"
    low = [
        f"field {i + 1}: {h} < {w}"
        for i, (h, w) in enumerate(zip(have, want, strict=True))
        if h < w
    ]
    return f"{key} {norm_found!r} below {norm_exp!r} ({'; '.join(low)})" if low else None


def judge_sysctl(values: SysctlValues, expect: Expectations) -> Verdict:
    """Every `expect.sysctl` key as expected; each key measured with its bound. A key the
    kernel does not have fails; one it would not show, or that the output lacks, is not
    measured."""
    missing = dict(values.missing)
    verdicts = []
    for key, want in expect.sysctl.items():
        found = values.get(key)
        measured = Measurement(
            key, found, "", str(want.value), COMPARISON[want.mode], f"expect.sysctl.{key}"
        )
        kw = {"measurements": (measured,), "sections": (SYSCTL.name,)}
        why = missing.get(key.strip().replace("/", "."))
        if found is None and why is not None and not UNREADABLE_KEY.search(why):
            verdicts.append(failing(f"{key} is not a key of this kernel ({why})", FIX_SYSCTL, **kw))
        elif found is None:
            shown = why or "not in the output"
            verdicts.append(not_measured(f"{key} not read ({shown})", "re-run as root", **kw))
        elif problem := sysctl_problem(key, found, str(want.value), want.mode):
            verdicts.append(failing(problem, FIX_SYSCTL, **kw))
        else:
            verdicts.append(passing(**kw))
    if not verdicts:
        return not_measured("no sysctl expectations (expect.sysctl is empty)")
    return combine(verdicts)


COUNTERS = ("rx_errors", "tx_errors", "rx_dropped", "tx_dropped")


def judge_nic_counters(interfaces: Interfaces, interface: str, expect: Expectations) -> Verdict:
    """The data-plane interface's error counters at most `expect.nic_max_errors` and its
    drop counters at most `expect.nic_max_dropped` (each counter measured). An interface
    `ip -s link` does not show, or shows without counters, is not measured."""
    sections = (LINKS.name,)
    if interfaces.tool_missing:
        why = "; ".join(interfaces.problems) or "ip not installed"
        return not_measured(why, "install iproute2", sections=sections)
    iface = interfaces.get(interface)
    if iface is None:
        shown = ", ".join(interfaces.names()) or "none"
        return not_measured(
            f"interface {interface!r} not found (interfaces: {shown})",
            "check the node's `interface` in the inventory",
            sections=sections,
        )
    if iface.stats is None:
        return not_measured(
            f"no counters for {interface} (ip -s link)", "re-run", sections=sections
        )
    measurements, over, unknown = [], [], []
    for counter in COUNTERS:
        value = getattr(iface.stats, counter)
        errors = counter.endswith("errors")
        limit = expect.nic_max_errors if errors else expect.nic_max_dropped
        key = "expect.nic_max_errors" if errors else "expect.nic_max_dropped"
        measurements.append(Measurement(counter, value, "packets", limit, "<=", key, interface))
        if value is None:
            unknown.append(counter)
        elif value > limit:
            over.append(f"{counter} {value} > {limit}")
    kw = {"measurements": tuple(measurements), "sections": sections}
    if over:
        kw["code"] = "HPCNET-NIC-ERRORS"
        return failing(
            f"{interface}: counters above threshold: " + ", ".join(over),
            "check the cable/ENI and the driver (`ethtool -S`), then clear the counters by "
            "recreating the interface or rebooting",
            **kw,
        )
    if unknown:
        return not_measured(f"{interface}: counters not shown: " + ", ".join(unknown), "", **kw)
    return passing(**kw)


def judge_icmp_latency(ping: PingResult, expect: Expectations) -> Verdict:
    """Every probe sent and answered, average RTT at most `expect.ping.max_avg_ms` and the
    largest at most `expect.ping.max_ms`. An output cut short, a missing `ping` or replies
    without round-trip times are not measured; no reply, lost replies and slow ones fail."""
    bounds = expect.ping
    kw = {
        "measurements": (
            Measurement(
                "rtt_avg", ping.rtt_avg_ms, "ms", bounds.max_avg_ms, "<=", "expect.ping.max_avg_ms"
            ),
            Measurement(
                "rtt_max", ping.rtt_max_ms, "ms", bounds.max_ms, "<=", "expect.ping.max_ms"
            ),
            Measurement("lost", ping.lost, "replies", 0, "<=", "every probe answered"),
        ),
    }
    fix = "check the path between the nodes (security group, routes, a busy host)"
    kw["code"] = "HPCNET-ICMP-LATENCY"  # a failure's code; a pass or gap ignores it
    if ping.tool_missing:
        return not_measured("ping not installed", "install iputils-ping", **kw)
    if ping.error:
        return failing(f"ping failed: {ping.error}", fix, **kw)
    if ping.incomplete:
        return not_measured(f"{ping.incomplete}; {ping.received or 0} replies", "re-run", **kw)
    if not ping.received:
        loss = f"{ping.loss_percent:g}% loss" if ping.loss_percent is not None else "no reply"
        return failing(f"no ICMP reply ({loss})", fix, **kw)
    counted = f"{ping.received} of {ping.transmitted} replies"
    if ping.lost:
        return failing(f"{counted} ({ping.lost} lost)", fix, **kw)
    if ping.rtt_avg_ms is None or ping.rtt_max_ms is None:
        return not_measured(f"{counted} without round-trip times", "re-run", **kw)
    slow = []
    if ping.rtt_avg_ms > bounds.max_avg_ms:
        slow.append(f"average RTT {ping.rtt_avg_ms:.3f} ms > {bounds.max_avg_ms} ms")
    if ping.rtt_max_ms > bounds.max_ms:
        slow.append(f"max RTT {ping.rtt_max_ms:.3f} ms > {bounds.max_ms} ms")
    if slow:
        return failing("; ".join(slow), fix, **kw)
    return passing(counted, **kw)
