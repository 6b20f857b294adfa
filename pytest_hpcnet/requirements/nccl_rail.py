"""Judge of each ERI's rail (`nccl_rail`): all_reduce_perf across every node on one ERI alone
(`NCCL_IB_HCA==erdma_i`, the GPUs nearest it), one run per ERI, each complete and ok and its
average and largest-size busbw (all-reduce: algbw x 2(n-1)/n, nccl-tests doc/PERFORMANCE.md)
against `expect.nccl.rail`. No cloud publishes a per-ERI NCCL floor for eRDMA: unset, each
rail's busbw is measured and reported, not judged (INCOMPLETE). A slow rail names the node
its bisection (or the `ib_write_bw` pairs) leaves with the ERI: `node07 erdma_1`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.requirements.erdma import reported_first
from pytest_hpcnet.requirements.judges import at_least, judge_nccl_run
from pytest_hpcnet.requirements.verdict import (
    FAIL,
    Measurement,
    Verdict,
    combine,
    not_applicable,
    not_measured,
    passing,
)

PERFORMANCE_MD = "nccl-tests doc/PERFORMANCE.md"
FIX_SLOW = (
    "check that ERI on the suspect node (ib_write_bw on it, its port, its PCIe link); a rail "
    "that stays slow: a ticket naming the node and the ERI"
)
CODE = "HPCNET-NCCL-RAIL"

Suspects = Callable[[str], Sequence[str]]
"""The nodes a slow rail comes from (asked only on a failure; may bisect)."""


def judge_rails_present(devices: Sequence[str]) -> Verdict:
    """Rail runs need two ERIs on every node (with one, the all-reduce is the rail run)."""
    if len(devices) < 2:
        return not_applicable("fewer than two ERIs NCCL uses on every node: no rail of its own")
    return passing()


def judge_pinned_run(run: Any) -> Verdict:
    """A pinned run (a rail, the network alone) ran, complete and ok, named by its path."""
    if run.problem:
        return not_measured(f"{run.path} not run: {run.problem}", subject=run.path)
    verdict = judge_nccl_run(run.result, run.launch, run.launched)
    if verdict.ok:
        return verdict
    where = "the network alone" if run.path == "network_only" else f"{run.path} alone"
    said = verdict.reason.replace("all_reduce_perf", f"all_reduce_perf on {where}")
    return Verdict(outcome=verdict.outcome, reason=said, subject=run.path)


def _busbw(run: Any, value: float | None, key: str, name: str, expect: Expectations) -> Verdict:
    bound = getattr(expect.nccl.rail, key)
    source = f"expect.nccl.rail.{key}"
    basis = f"all-reduce busbw = algbw x 2(n-1)/n ({PERFORMANCE_MD}), one ERI"
    found = Measurement(name, value, "GB/s", bound, ">=", source, subject=run.path, basis=basis)
    what = "average bus bandwidth" if name == "rail_avg_busbw" else "bus bandwidth, largest size"
    if bound is None:
        shown = f"{value:g} GB/s" if value is not None else "nothing"
        verdict = not_measured(f"rail {run.path} {what} {shown}: no bound ({source} unset)")
    else:
        verdict = at_least(
            value,
            bound,
            f"rail {run.path} {what} {value} GB/s < {bound} GB/s",
            source,
            expect.nccl.max_busbw_gbs,
        )
    return reported_first(verdict, found)


def judge_rail(run: Any, expect: Expectations, suspects: Suspects) -> Verdict:
    """One rail: complete and ok, its busbw against `expect.nccl.rail`; a failure names the
    suspect node with the ERI (`node07 erdma_1`)."""
    ran = judge_pinned_run(run)
    if not ran:
        return ran
    result = run.result
    verdict = combine(
        [
            _busbw(run, result.avg_busbw_gbs, "min_avg_busbw_gbs", "rail_avg_busbw", expect),
            _busbw(
                run, result.busbw_at_max_size_gbs, "min_busbw_largest_gbs", "rail_busbw_largest",
                expect,
            ),
        ]
    )  # fmt: skip
    if verdict.outcome != FAIL:
        return verdict
    nodes = tuple(suspects(run.path))
    where = ", ".join(f"{n} {run.path}" for n in nodes) or f"no suspect node on {run.path}"
    subject = f"{nodes[0]} {run.path}" if len(nodes) == 1 else run.path
    return Verdict(
        outcome=FAIL,
        reason=f"{where}: {verdict.reason} over {len(result.hosts)} nodes",
        fix=FIX_SLOW,
        measurements=verdict.measurements,
        subject=subject,
        code=CODE,
    )


def judge_nccl_rails(runs: Mapping[str, Any], expect: Expectations, suspects: Suspects) -> Verdict:
    """Every rail judged (`judge_rail`); one slow rail fails, named, whatever the others."""
    if not runs:
        return not_measured("no rail was run")
    verdicts = [judge_rail(r, expect, suspects) for r in runs.values()]
    verdict = combine(verdicts)
    named = {v.subject for v in verdicts if v.outcome == verdict.outcome and v.subject}
    return replace(verdict, subject=named.pop()) if len(named) == 1 else verdict


def rail_passes(run: Any, expect: Expectations) -> bool:
    """A rail run is complete, ok and meets every rail bound set (what its bisection asks of
    a half); an unset bound is not compared."""
    if not judge_pinned_run(run):
        return False
    result = run.result
    for value, bound in (
        (result.avg_busbw_gbs, expect.nccl.rail.min_avg_busbw_gbs),
        (result.busbw_at_max_size_gbs, expect.nccl.rail.min_busbw_largest_gbs),
    ):
        if bound is not None and (value is None or value < bound):
            return False
    return True
