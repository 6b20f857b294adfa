"""Judges of the MTU requirements: each interface's MTU as expected, the eRDMA MTU rule for
NCCL LL128 (source S12), and the full MTU across each node pair's path."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pytest_hpcnet.probes.eri_address import PlannedEri
from pytest_hpcnet.probes.links import Interface, Interfaces
from pytest_hpcnet.probes.ping import PingResult
from pytest_hpcnet.requirements.verdict import (
    FAIL,
    NOT_MEASURED,
    Measurement,
    Verdict,
    combine,
    failing,
    not_measured,
    passing,
)

ERDMA_JUMBO_MTU = 8500
"""MTU required for eRDMA + NCCL LL128 when the instance uses jumbo frames."""
ERDMA_MAX_STANDARD_MTU = 1400
"""Largest MTU allowed for eRDMA + NCCL LL128 without jumbo frames."""


def mtu_matches(expected: int, iface: Interface) -> Verdict:
    """The interface MTU equals `expected`."""
    if iface.mtu is None:
        return not_measured(f"{iface.name}: MTU unknown (expected {expected})")
    if iface.mtu == expected:
        return passing(f"{iface.name}: MTU {iface.mtu} as expected")
    return failing(f"{iface.name}: MTU {iface.mtu}, expected {expected}")


def erdma_mtu_verdict(mtu: int | None, jumbo_frames: bool) -> Verdict:
    """Alibaba eRDMA + NCCL LL128 rule: jumbo frames -> MTU 8500; otherwise MTU <= 1400.

    MTU 1500 on an eRDMA interface is called out as a data-consistency risk for LL128.
    """
    if mtu is None:
        return not_measured("MTU unknown")
    if jumbo_frames:
        if mtu == ERDMA_JUMBO_MTU:
            return passing(f"MTU {mtu} with jumbo frames, as required for eRDMA")
        return failing(
            f"MTU {mtu} with jumbo frames; eRDMA with NCCL LL128 requires {ERDMA_JUMBO_MTU}",
        )
    if mtu == 1500:
        return failing(
            f"MTU 1500 without jumbo frames: data-consistency risk for eRDMA with NCCL LL128 "
            f"(must be at most {ERDMA_MAX_STANDARD_MTU})",
        )
    if mtu <= ERDMA_MAX_STANDARD_MTU:
        return passing(f"MTU {mtu} without jumbo frames, within {ERDMA_MAX_STANDARD_MTU}")
    return failing(
        f"MTU {mtu} without jumbo frames; eRDMA with NCCL LL128 requires at most "
        f"{ERDMA_MAX_STANDARD_MTU}",
    )


def path_mtu_ok(result: PingResult, mtu: int | None = None) -> Verdict:
    """The path carried `mtu` (default: the packet size in the ping header) unfragmented."""
    tested = mtu if mtu is not None else result.packet_size
    label = f"MTU {tested}" if tested is not None else "the tested size"
    if result.tool_missing:
        return not_measured("ping not installed")
    if result.error:
        return failing(f"ping failed: {result.error}")
    if result.remote_mtu is not None and (tested is None or result.remote_mtu < tested):
        return failing(
            f"a router reported path MTU {result.remote_mtu} (Frag needed and DF set), "
            f"below {label}",
        )
    if result.local_mtu is not None and (tested is None or result.local_mtu < tested):
        return failing(
            f"the local interface MTU is {result.local_mtu} (message too long), below {label}",
        )
    if result.path_mtu is not None and not result.received:
        return failing(f"path MTU reported as {result.path_mtu}; no reply at {label}")
    if result.incomplete:
        return not_measured(f"{result.incomplete}; {result.received or 0} replies at {label}")
    if not result.received:
        loss = f"{result.loss_percent:g}% loss" if result.loss_percent is not None else "no reply"
        return failing(f"no reply at {label} with DF set ({loss})")
    counted = f"{result.received} of {result.transmitted} replies at {label} with DF set"
    if result.lost:
        return failing(f"{counted} ({result.lost} lost)")
    if result.errors:
        return failing(f"{result.errors} errors at {label}")
    return passing(counted)


def judge_each_interface(
    node: str,
    primary: Interface | None,
    primary_name: str,
    eris: list[tuple[str, Interface | None]],
    judge: Callable[[Interface], Verdict],
    unmeasured: Sequence[tuple[str, str]] = (),
) -> Verdict:
    """`judge` on the data-plane interface and on every ERI's own interface (`eth1
    (erdma_1)`): one verdict naming each interface that is off; an interface missing from
    `ip link` fails (the node lacks it). Each `(label, why)` in `unmeasured` is an ERI
    the node should have whose interface is unknown (netdev unknown, listing cut, not
    listed): not measured, named. A failure beside one not measured fails and names both."""
    verdicts = []
    if primary is None:
        verdicts.append(failing(f"data-plane interface {primary_name!r} not found"))
    else:
        verdicts.append(judge(primary))
    for label, iface in eris:
        if iface is None:
            verdicts.append(failing(f"{label}: interface not in ip link"))
            continue
        verdict = judge(iface)
        verdicts.append(
            verdict.with_reason(f"{label}: {verdict.reason.removeprefix(f'{iface.name}: ')}")
        )
    verdicts += [not_measured(f"{label}: {why}") for label, why in unmeasured]
    found = combine(verdicts)
    return found if found.ok else found.with_reason(f"{node}: {off_reasons(verdicts)}")


def off_reasons(verdicts: Sequence[Verdict]) -> str:
    """The reasons of the verdicts that did not pass: the failures, then (after `not
    measured:` where there are failures too) those not measured."""
    bad = [v.reason for v in verdicts if v.outcome == FAIL]
    missing = [v.reason for v in verdicts if v.outcome == NOT_MEASURED]
    if bad and missing:
        return "; ".join(bad) + "; not measured: " + "; ".join(missing)
    return "; ".join(bad or missing)


def judge_interface_mtu(expected: int, iface: Interface, label: str = "") -> Verdict:
    """The interface's MTU equals `expect.mtu`, carried as a measurement."""
    name = f"{label} mtu" if label else "mtu"
    measured = Measurement(name, iface.mtu, "bytes", expected, "==", "expect.mtu")
    return mtu_matches(expected, iface).with_measurements(measured)


def judge_erdma_mtu_rule(iface: Interface, jumbo_frames: bool) -> Verdict:
    """The eRDMA MTU rule on one interface, its reason naming the interface."""
    verdict = erdma_mtu_verdict(iface.mtu, jumbo_frames)
    if jumbo_frames:
        rule = Measurement(
            "erdma_mtu", iface.mtu, "bytes", ERDMA_JUMBO_MTU, "==", "eRDMA + NCCL LL128", iface.name
        )
    else:
        rule = Measurement(
            "erdma_mtu",
            iface.mtu,
            "bytes",
            ERDMA_MAX_STANDARD_MTU,
            "<=",
            "eRDMA + NCCL LL128 (1500 is a data-consistency risk)",
            iface.name,
            outcome=None if iface.mtu is None else verdict.outcome,
        )
    return verdict.with_measurements(rule).with_reason(f"{iface.name}: {verdict.reason}")


def judge_mtu_same(mtus: Mapping[str, int | None], expected: int) -> Verdict:
    """Every node reports one MTU on its data-plane interface; the nodes off the expected
    one are the verdict's suspects (`extra["suspects"]`)."""
    groups: dict[int | None, list[str]] = {}
    for name, mtu in mtus.items():
        groups.setdefault(mtu, []).append(name)
    if not groups:
        return not_measured("no node's MTU was read")
    listing = "; ".join(f"MTU {m}: {', '.join(n)}" for m, n in sorted(groups.items(), key=str))
    measured = Measurement("distinct_mtus", len(groups), "", 1, "==", "all nodes agree")
    if len(groups) == 1:
        return passing(listing, measurements=(measured,))
    suspects = [n for m, names in groups.items() if m != expected for n in names]
    return failing(
        f"nodes disagree on the MTU: {listing}",
        measurements=(measured,),
        extra={"suspects": suspects},
    )


def judge_path_mtu(result: PingResult, mtu: int, label: str = "") -> Verdict:
    """The full MTU crossed the path unfragmented (`path_mtu_ok`), with the path MTU seen
    as a measurement (the tested MTU where the reply proves it)."""
    verdict = path_mtu_ok(result, mtu)
    seen = result.path_mtu or (mtu if verdict.ok else None)
    name = f"{label} path_mtu" if label else "path_mtu"
    measured = Measurement(name, seen, "bytes", mtu, ">=", "expect.mtu")
    return verdict.with_measurements(measured)


def path_not_measured(label: str, why: str, mtu: int) -> Verdict:
    """A planned ERI path that could not be probed (`why` names it): not measured, its
    path MTU carried as an unmeasured value."""
    measured = Measurement(f"{label} path_mtu", None, "bytes", mtu, ">=", "expect.mtu")
    return not_measured(why, measurements=(measured,))


def own_interfaces(
    interfaces: Interfaces, primary_name: str, planned: Iterable[PlannedEri]
) -> tuple[list[tuple[str, Interface | None]], list[tuple[str, str]]]:
    """([(label, interface)], [(ERI, why)]): each planned ERI's own netdev other than the
    data-plane one (`eth1 (erdma_1)` on a two-ERI node), once each, and each planned ERI
    whose netdev is unknown (netdev not named, listing cut, not listed)."""
    eris, unmeasured, seen = [], [], {primary_name}
    for eri in planned:
        if eri.unknown:
            unmeasured.append((eri.device, eri.unknown))
        elif eri.netdev not in seen:
            seen.add(eri.netdev)
            eris.append((f"{eri.netdev} ({eri.device})", interfaces.get(eri.netdev)))
    return eris, unmeasured


def judge_node_mtu(
    node: str,
    primary_name: str,
    interfaces: Interfaces,
    planned: Iterable[PlannedEri],
    expected: int,
) -> Verdict:
    """The data-plane interface and every planned ERI's own interface at `expected`; an ERI
    whose interface is unknown is named not measured."""
    eris, unmeasured = own_interfaces(interfaces, primary_name, planned)
    labels = {iface.name: label for label, iface in eris if iface is not None}
    primary = interfaces.get(primary_name)
    return judge_each_interface(
        node,
        primary,
        primary_name,
        eris,
        lambda iface: judge_interface_mtu(expected, iface, labels.get(iface.name, "")),
        unmeasured,
    )


def judge_node_ll128_rule(
    node: str,
    primary_name: str,
    interfaces: Interfaces,
    planned: Iterable[PlannedEri],
    jumbo_frames: bool,
) -> Verdict:
    """The eRDMA MTU rule for NCCL LL128 on the data-plane interface and every planned ERI's
    own interface."""
    eris, unmeasured = own_interfaces(interfaces, primary_name, planned)
    primary = interfaces.get(primary_name)
    return judge_each_interface(
        node,
        primary,
        primary_name,
        eris,
        lambda i: judge_erdma_mtu_rule(i, jumbo_frames),
        unmeasured,
    )


def judge_same_interface_mtu(interfaces: Mapping[str, Interface | None], expected: int) -> Verdict:
    """`judge_mtu_same` on each node's data-plane interface (None: not in `ip link`)."""
    return judge_mtu_same({n: i.mtu if i else None for n, i in interfaces.items()}, expected)


def judge_pair_path_mtu(path_mtu: PingResult, eri_paths: Iterable[Any], expected: int) -> Verdict:
    """The full MTU across the pair's data-plane path and over each planned ERI's own
    interface (`campaigns.eri_paths.EriPathMtu`); an ERI path not probed is named not
    measured, never left out."""
    verdicts = [judge_path_mtu(path_mtu, expected)]
    for eri in eri_paths:
        label = f"{eri.path.device} ({eri.path.netdev})" if eri.path.netdev else eri.path.device
        if eri.path.unmeasured:
            why = f"{eri.path.device}: {eri.path.unmeasured}"
            verdicts.append(path_not_measured(label, why, expected))
            continue
        own = judge_path_mtu(eri.result, expected, label)
        verdicts.append(own.with_reason(f"{label} to {eri.path.target_address}: {own.reason}"))
    found = combine(verdicts)
    return found if found.ok else found.with_reason(off_reasons(verdicts))
