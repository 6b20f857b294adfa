"""Judges of CPFS throughput: each node's fio bandwidth, the cluster's aggregate against the
rated figure of the file system's capacity, and fairness across nodes."""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from pytest_hpcnet.inventory.expectations import CpfsExpect, rated_aggregate_mbs
from pytest_hpcnet.probes.fio import FioResult
from pytest_hpcnet.requirements.judges import at_least
from pytest_hpcnet.requirements.verdict import Measurement, Verdict, combine, not_measured


def node_bandwidth(result: FioResult | None, rw: str) -> float | None:
    """The MB/s of one fio phase, None where it did not run or its output is not usable."""
    if result is None or not result.ok:
        return None
    value = result.write_bw_mb_s if rw == "write" else result.read_bw_mb_s
    return value if value is not None and value == value and value > 0 else None


def judge_node_throughput(
    node: str, rw: str, result: FioResult | None, error: str | None, cpfs: CpfsExpect
) -> Verdict:
    """One node's fio `rw` bandwidth at or above `expect.cpfs.min_<rw>_mbs_per_node`; fio
    failing on the node fails it; an output with no usable figure is not measured."""
    key = f"expect.cpfs.min_{rw}_mbs_per_node"
    bound = cpfs.min_write_mbs_per_node if rw == "write" else cpfs.min_read_mbs_per_node
    if error is not None or (result is not None and result.error):
        why = error or (result.error if result else "")
        return Verdict(False, reason=f"{node}: fio {rw} failed: {why}")
    value = node_bandwidth(result, rw)
    ceiling = cpfs.max_mbs_per_node
    measured = Measurement(f"{rw}_bw", value, "MB/s", bound, ">=", key, ceiling=ceiling)
    if value is None:
        return not_measured(
            f"{node}: fio {rw}: no usable bandwidth in its output"
        ).with_measurements(measured)
    verdict = at_least(
        value, bound, f"{node}: {rw} {value:.0f} MB/s < {bound} MB/s", key, ceiling=ceiling
    )
    if verdict.measured_nothing and value > ceiling:
        verdict = verdict.with_reason(
            f"{node}: fio {rw} {value:g} MB/s is implausible (above the ceiling {ceiling:g} "
            "MB/s, expect.cpfs.max_mbs_per_node)"
        )
    return verdict.with_measurements(measured)


def judge_aggregate(rw: str, values: Mapping[str, float], cpfs: CpfsExpect) -> Verdict:
    """The nodes' summed `rw` bandwidth at or above the rated figure of `capacity_tib`
    (docs/sources.md) less `aggregate_lower`; no capacity set is not measured."""
    total = sum(values.values())
    key = "expect.cpfs.capacity_tib"
    if not cpfs.capacity_tib:
        return not_measured(
            f"no bound set ({key}); aggregate {rw} {total:.0f} MB/s over {len(values)} nodes",
            measurements=(Measurement(f"{rw}_aggregate", total, "MB/s", None, None, key),),
        )
    rated = rated_aggregate_mbs(rw, cpfs.capacity_tib, len(values))
    bound = rated * (1 + cpfs.aggregate_lower)
    verdict = at_least(
        total, bound, f"aggregate {rw} {total:.0f} MB/s < {bound:.0f} MB/s (rated {rated:.0f})"
    )
    return verdict.with_measurements(
        Measurement(f"{rw}_aggregate", total, "MB/s", bound, ">=", key)
    )


def judge_fairness(rw: str, values: Mapping[str, float], cpfs: CpfsExpect) -> Verdict:
    """The slowest node at least `min_fairness` of the median node."""
    median = statistics.median(values.values())
    slowest = min(values, key=lambda n: values[n])
    fraction = values[slowest] / median if median else 0.0
    key = "expect.cpfs.min_fairness"
    measured = Measurement(f"{rw}_fairness", fraction, "of median", cpfs.min_fairness, ">=", key)
    reason = (
        f"{slowest}: {rw} {values[slowest]:.0f} MB/s is {fraction:.0%} of the median "
        f"{median:.0f} MB/s (at least {cpfs.min_fairness:.0%} expected)"
    )
    verdict = at_least(fraction, cpfs.min_fairness, reason, key).with_measurements(measured)
    return (
        verdict
        if verdict
        else Verdict(False, reason=reason, subject=slowest).with_measurements(measured)
    )


def judge_aggregate_and_fairness(
    rw: str, values: Mapping[str, float], cpfs: CpfsExpect, left_out: list[str]
) -> Verdict:
    """Aggregate and fairness together; a node left out (no mount, no result) is named, and
    so is a node whose figure is implausible (above `max_mbs_per_node`): it is no peer."""
    implausible = [n for n, v in values.items() if v > cpfs.max_mbs_per_node]
    if implausible:
        values = {n: v for n, v in values.items() if n not in implausible}
        left_out = [*left_out, *(f"{n} (implausible figure)" for n in implausible)]
        if values:
            named = ", ".join(implausible)
            kept = judge_aggregate_and_fairness(rw, values, cpfs, left_out)
            return combine([kept, not_measured(f"fio {rw}: {named}: figure above its ceiling")])
    if not values:
        why = f" ({', '.join(left_out)} left out)" if left_out else ""
        return not_measured(f"fio {rw}: no node produced a usable result{why}")
    verdict = combine([judge_aggregate(rw, values, cpfs), judge_fairness(rw, values, cpfs)])
    if left_out and not verdict.ok:
        return verdict.with_reason(
            f"{verdict.reason} (over {len(values)} nodes; left out: {', '.join(left_out)})"
        )
    return verdict
