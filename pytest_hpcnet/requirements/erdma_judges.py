"""Pure judges of the eRDMA checks: each returns a `Verdict` whose subject names the node
and device.

Figures come from the caller (the profile, with its source), never from the port `rate`
file (nominal "100 Gb/sec (4X EDR)"). A node's devices run at once are judged against the
per-instance figure (on ebmgn7ex 160
Gbit/s with the two ERIs on different NIC indexes, 100 when they share one: docs/sources.md
section 2, S1; 160 when the indexes are unknown). NCCL must be on the expected network on
every node (a socket fallback names the nodes), the GID index used must be the IPv4 one, bad
counters must not move.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase

from pytest_hpcnet.probes.counters import BAD_COUNTERS, TRAFFIC, CounterDelta
from pytest_hpcnet.probes.erdma import GidTables
from pytest_hpcnet.probes.nccl_debug import NcclNetLog
from pytest_hpcnet.requirements.verdict import NOT_MEASURED, Measurement, Verdict


def finding(ok: bool, reason: str, node: str, device: str | None = None) -> Verdict:
    """One judged fact about a node (and device) as a `Verdict` whose subject names them
    (`node07 erdma_1`)."""
    return Verdict(ok, reason=reason, subject=f"{node} {device}" if device else node)


def _f(ok: bool, node: str, device: str | None, why: str) -> Verdict:
    where = f"{node} {device}" if device else node
    return finding(ok, f"{where}: {why}", node, device)


def instance_figure(
    rated_gbps: float,
    nic_indexes: Sequence[int] | None = None,
    same_index_gbps: float | None = None,
) -> tuple[float, str]:
    """(per-instance figure, why): `same_index_gbps` when every ERI is known to sit on one NIC
    index; the rated figure otherwise, unknown indexes included (the lower figure there would
    pass a node running at the cap on a family rated higher)."""
    shared = nic_indexes is not None and len(nic_indexes) > 1 and len(set(nic_indexes)) == 1
    if same_index_gbps is not None and shared:
        return same_index_gbps, f"{same_index_gbps:g} (all ERIs on NIC index {nic_indexes[0]})"
    if same_index_gbps is not None and nic_indexes is None:
        return rated_gbps, f"{rated_gbps:g} per instance (NIC indexes unknown)"
    return rated_gbps, f"{rated_gbps:g} per instance"


def judge_instance_bandwidth(
    node: str,
    per_device_gbps: Mapping[str, float | None],
    devices: Sequence[str],
    figure_gbps: float,
    fraction: float,
    figure_note: str = "",
) -> Verdict:
    """All of a node's ERIs run at once: their sum at least `fraction` of the instance figure."""
    missing = [d for d in devices if per_device_gbps.get(d) is None]
    if missing:  # a device whose run was not measured is no failure of the node
        why = f"{node}: no concurrent result from {', '.join(missing)}"
        return Verdict(outcome=NOT_MEASURED, reason=why, subject=node)
    total = sum(per_device_gbps[d] or 0.0 for d in devices)
    floor = figure_gbps * fraction
    parts = " + ".join(f"{d} {per_device_gbps[d]:.1f}" for d in devices)
    note = figure_note or f"{figure_gbps:g} per instance"
    verdict = "at least" if total >= floor else "below"
    return _f(
        total >= floor,
        node,
        None,
        f"{parts} = {total:.1f} Gbit/s, {verdict} {floor:.1f} ({fraction:.0%} of {note})",
    )


def judge_nccl_transport(
    log: NcclNetLog,
    nodes: Sequence[str],
    network: str = "IB",
    device_glob: str | None = None,
    expect_gdr: bool | None = None,
) -> list[Verdict]:
    """Per node: NCCL used `network` (a Socket fallback fails), devices match, GDR as expected."""
    out: list[Verdict] = []
    for node in nodes:
        h = log.host(node)
        if h is None:
            why = log.problems[0] if log.problems else "no NCCL INFO line from this node"
            out.append(_f(False, node, None, f"transport unknown: {why}"))
            continue
        if h.on_socket or (network not in h.networks):
            seen = "/".join(h.networks) or "no `Using network` line"
            extra = " (NET/IB : No device found)" if h.ib_missing else ""
            out.append(_f(False, node, None, f"NCCL used {seen}{extra}, {network} expected"))
            continue
        names = [d.name for d in h.ib_devices]
        if network == "IB" and not names:
            out.append(_f(False, node, None, "NCCL on IB but lists no device"))
            continue
        if device_glob and any(not fnmatchcase(n, device_glob) for n in names):
            out.append(
                _f(False, node, None, f"NCCL used {', '.join(names)}, {device_glob} expected")
            )
            continue
        if expect_gdr and h.gdr is not True:
            state = "off" if h.gdr is False else "not shown"
            out.append(_f(False, node, None, f"GPUDirect RDMA {state}, expected on"))
            continue
        gdr = {True: "GDRDMA on", False: "GDRDMA off", None: "GDRDMA not shown"}[h.gdr]
        out.append(_f(True, node, None, f"NCCL on {network} via {', '.join(names)}; {gdr}"))
    return out


def judge_gid_index(
    node: str, device: str, tables: GidTables, used: int | None, address: str | None = None
) -> Verdict:
    """The GID index NCCL/perftest use on `device` is its IPv4 one (`used` None: report it)."""
    choice = tables.choose(device, address)
    if choice.index is None:
        return _f(False, node, device, choice.reason.partition(": ")[2])
    if used is None or used == choice.index:
        return _f(True, node, device, choice.reason.partition(": ")[2])
    gids = tables.tables.get(device, ())
    at = next((g.gid for g in gids if g.index == used), "no entry")
    return _f(
        False,
        node,
        device,
        f"GID index {used} is {at}; the IPv4 GID {choice.ipv4 or ''} is at index {choice.index}",
    )


def judge_counters(
    node: str, delta: CounterDelta, bounds: Mapping[str, int] | None = None
) -> list[Verdict]:
    """Per device/interface: bad counters (drops, errors, connect failures) within bounds.

    A reset counter is not ok when its value since the reset is above the bound, or when
    the bound is 0 (the delta over the run is then unknown). A device or counter read before
    and not after the run (device gone, counter file empty) is not ok: its delta is unknown.
    """
    bounds = bounds or {}
    out: list[Verdict] = []
    for key in sorted(delta.deltas):
        over = []
        for name, value in sorted(delta.deltas[key].items()):
            if name not in BAD_COUNTERS and name not in bounds:
                continue
            limit = bounds.get(name, 0)
            if value > limit:
                over.append(f"{name} +{value} (bound {limit})")
        reset = [r.split(" ", 1)[1] for r in delta.resets if r.startswith(f"{key} ")]
        reset = [r for r in reset if r.split()[0] in BAD_COUNTERS or r.split()[0] in bounds]
        device = key.split("/")[0]
        moved = Measurement(
            "counters_over_bound", len(over) + len(reset), "", 0, "==", f"bounds over {key}", device
        )
        if over or reset:
            out.append(_f(False, node, device, "; ".join(over + reset)).with_measurements(moved))
        else:
            why = "no error, drop or rate-limit counter moved"
            out.append(_f(True, node, device, why).with_measurements(moved))
    for gone in delta.missing:
        if " read before only" in gone:  # a device or counter that vanished during the run
            key = gone.split(" ", 1)[0]
            what = gone.replace(" read before only", "")
            out.append(
                _f(False, node, key.split("/")[0], f"{what} not readable after the benchmark")
            )
    for problem in delta.problems:
        if "unreadable value" in problem:
            out.append(_f(False, node, problem.split("/")[0], f"{problem} (counter not read)"))
    if not delta.deltas:
        why = delta.problems[0] if delta.problems else "no counter read before and after"
        out.append(_f(False, node, None, why))
    return out


def judge_rdma_traffic(
    node: str, delta: CounterDelta, devices: Sequence[str], min_bytes: int
) -> list[Verdict]:
    """Each device moved at least `min_bytes` (tx + rx): traffic really went over RDMA."""
    out = []
    for device in devices:
        values = [delta.get(f"{device}/1", c) for c in TRAFFIC]
        if any(v is None for v in values):
            out.append(_f(False, node, device, "byte counters not read before and after"))
            continue
        moved = sum(v or 0 for v in values)
        ok = moved >= min_bytes
        verdict = "at least" if ok else "below"
        out.append(_f(ok, node, device, f"{moved} bytes over RDMA, {verdict} {min_bytes}"))
    return out
