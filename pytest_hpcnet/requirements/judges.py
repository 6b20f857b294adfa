"""One judge per requirement: `judge(result, expect) -> Verdict`.

The suites assert the judge's verdict; pair localization, NCCL bisection and the progress
lines call the same judge, so they cannot drift apart. A judge never raises and fails
closed: a missing measurement or bound is `not_measured`, never a pass.
"""

from __future__ import annotations

from typing import Protocol

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.nccl import NcclResult
from pytest_hpcnet.probes.perftest_parsers import LatencyResult
from pytest_hpcnet.requirements.verdict import Verdict, not_measured

__all__ = ["Verdict", "at_least", "at_most"]


def at_least(measured: float | None, bound: float | None, reason: str, key: str = "") -> Verdict:
    """`measured >= bound`; `reason` says the failure. Nothing measured, or no bound to
    judge against (`key` names the expectation to set), is not measured: never a pass."""
    if measured is None or measured != measured:  # None or NaN
        return not_measured(reason or "nothing measured", bound=bound)
    if bound is None:
        where = f" ({key})" if key else ""
        return not_measured(f"no bound set{where}; measured {measured:g}", measured=measured)
    margin = (measured - bound) / bound if bound else None
    ok = measured >= bound
    return Verdict(ok, measured, bound, margin, "" if ok else reason)


def at_most(measured: float | None, bound: float | None, reason: str, key: str = "") -> Verdict:
    """`measured <= bound`; `reason` says the failure; nothing measured or no bound is not
    measured."""
    if measured is None or measured != measured:
        return not_measured(reason or "nothing measured", bound=bound)
    if bound is None:
        where = f" ({key})" if key else ""
        return not_measured(f"no bound set{where}; measured {measured:g}", measured=measured)
    margin = (bound - measured) / bound if bound else None
    ok = measured <= bound
    return Verdict(ok, measured, bound, margin, "" if ok else reason)


# -- perftest (ib_write_bw, ib_write_lat) -------------------------------------------------


class PerftestRun(Protocol):
    """One pair's perftest run as the judges read it (`campaigns.perftest_rounds.PairRun`)."""

    error: str | None
    latency: LatencyResult | None

    @property
    def value(self) -> float | None: ...


def judge_ib_write_bw(run: PerftestRun, expect: Expectations) -> Verdict:
    """A pair's average write bandwidth at or above `expect.ib_write_bw`."""
    bound = expect.ib_write_bw.bound_gbps
    if run.error is not None:
        return Verdict(False, None, bound, None, f"ib_write_bw failed: {run.error}")
    value = run.value
    text = "no bandwidth measured" if value is None else ""
    if value is not None and bound is not None:
        text = f"BW average {value:.2f} Gbit/s < {bound:.2f} Gbit/s"
    return at_least(value, bound, text, "expect.ib_write_bw.min_gbps")


def judge_ib_write_lat(run: PerftestRun, expect: Expectations) -> Verdict:
    """A pair's t_avg and (where printed) 99th percentile within `expect.ib_write_lat`."""
    bounds = expect.ib_write_lat
    if run.error is not None:
        return Verdict(False, None, bounds.max_avg_us, None, f"ib_write_lat failed: {run.error}")
    lat = run.latency
    avg = lat.t_avg_us if lat is not None else None
    verdict = at_most(
        avg,
        bounds.max_avg_us,
        "no t_avg measured" if avg is None else f"t_avg {avg:.2f} usec > {bounds.max_avg_us} usec",
    )
    if not verdict or lat is None or lat.p99_us is None:
        return verdict
    p99 = at_most(
        lat.p99_us, bounds.max_p99_us, f"99% {lat.p99_us:.2f} usec > {bounds.max_p99_us} usec"
    )
    return verdict if p99 else p99


def judge_perftest(tool: str, run: PerftestRun, expect: Expectations) -> Verdict:
    """The judge of a perftest tool (`ib_write_bw` or `ib_write_lat`)."""
    judge = judge_ib_write_lat if tool.endswith("_lat") else judge_ib_write_bw
    return judge(run, expect)


# -- NCCL (nccl_busbw) ----------------------------------------------------------------------


def judge_nccl_run(result: NcclResult) -> Verdict:
    """all_reduce_perf ran and printed its table (what every NCCL criterion needs)."""
    if result.error is not None:
        return Verdict(False, reason=f"all_reduce_perf failed: {result.error}")
    if not result.rows:
        return Verdict(False, reason="all_reduce_perf printed no results table")
    return Verdict(True)


def judge_nccl_avg_busbw(result: NcclResult, expect: Expectations) -> Verdict:
    """Average bus bandwidth at or above `expect.nccl.min_avg_busbw_gbs`."""
    ran = judge_nccl_run(result)
    if not ran:
        return ran
    avg, bound = result.avg_busbw_gbs, expect.nccl.min_avg_busbw_gbs
    return at_least(
        avg,
        bound,
        f"average bus bandwidth {avg} GB/s < {bound} GB/s",
        "expect.nccl.min_avg_busbw_gbs",
    )


def judge_nccl_largest_busbw(result: NcclResult, expect: Expectations) -> Verdict:
    """Bus bandwidth at the largest size at or above `expect.nccl.min_busbw_largest_gbs`."""
    ran = judge_nccl_run(result)
    if not ran:
        return ran
    value, bound = result.busbw_at_max_size_gbs, expect.nccl.min_busbw_largest_gbs
    return at_least(
        value,
        bound,
        f"bus bandwidth at {result.max_size_bytes} bytes is {value} GB/s < {bound} GB/s",
        "expect.nccl.min_busbw_largest_gbs",
    )


def judge_nccl(result: NcclResult, expect: Expectations) -> Verdict:
    """A complete, correct all_reduce_perf run meeting every NCCL bandwidth bound (what
    bisection asks): cut short, wrong values or other ranks than launched fail it; a bound
    the inventory leaves unset is not compared (the suite's own test is not measured then)."""
    if not result.ok:
        return Verdict(False, reason=f"all_reduce_perf not ok: {result.reason}")
    bounds = expect.nccl
    for bound, judge in (
        (bounds.min_avg_busbw_gbs, judge_nccl_avg_busbw),
        (bounds.min_busbw_largest_gbs, judge_nccl_largest_busbw),
    ):
        verdict = judge(result, expect) if bound is not None else Verdict(True)
        if not verdict:
            return verdict
    return Verdict(True)
