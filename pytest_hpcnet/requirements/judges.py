"""One judge per requirement: `judge(result, expect) -> Verdict`.

The suites assert the judge's verdict; pair localization, NCCL bisection and the progress
lines call the same judge, so they cannot drift apart. A judge never raises and fails
closed: a missing measurement or bound is `not_measured`, never a pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.nccl import NcclExpected, NcclResult, rank_problems
from pytest_hpcnet.probes.perftest_parsers import LatencyResult
from pytest_hpcnet.requirements.verdict import NOT_MEASURED, Measurement, Verdict, not_measured
from pytest_hpcnet.transport.results import CommandResult

__all__ = ["Verdict", "at_least", "at_most"]


def _impossible(measured: float) -> str:
    """Why `measured` cannot be a reading of a rate, a time or a count (infinite or
    negative: the output was misread), or "" when it can."""
    if not math.isfinite(measured):
        return f"measured {measured:g}: not a finite reading (the output was misread)"
    if measured < 0:
        return f"measured {measured:g}: a negative reading (the output was misread)"
    return ""


def at_least(
    measured: float | None,
    bound: float | None,
    reason: str,
    key: str = "",
    ceiling: float | None = None,
) -> Verdict:
    """`bound <= measured <= ceiling`; `reason` says the failure. Nothing measured, no bound
    to judge against (`key` names the expectation to set), or a figure above its physical
    `ceiling` (implausible: the output was misread) is not measured: never a pass."""
    if measured is not None and ceiling is not None and measured == measured > ceiling:
        return not_measured(
            f"measured {measured:g}: implausible, above the physical ceiling {ceiling:g}",
            bound=bound,
        )
    return _bounded(measured, bound, reason, key, higher_is_better=True)


def at_most(measured: float | None, bound: float | None, reason: str, key: str = "") -> Verdict:
    """`measured <= bound`; `reason` says the failure; nothing measured or no bound is not
    measured."""
    return _bounded(measured, bound, reason, key, higher_is_better=False)


def _bounded(
    measured: float | None, bound: float | None, reason: str, key: str, higher_is_better: bool
) -> Verdict:
    if measured is None or measured != measured:  # None or NaN
        return not_measured(reason or "nothing measured", bound=bound)
    if impossible := _impossible(measured):
        return not_measured(impossible, bound=bound)
    if bound is None:
        where = f" ({key})" if key else ""
        return not_measured(f"no bound set{where}; measured {measured:g}", measured=measured)
    headroom = measured - bound if higher_is_better else bound - measured
    margin = headroom / bound if bound else None
    ok = headroom >= 0
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
    if unread := getattr(run, "not_measured", None):
        return not_measured(f"ib_write_bw: {unread}", bound=bound)
    value = run.value
    text = "no bandwidth measured" if value is None else ""
    if value is not None and bound is not None:
        text = f"BW average {value:.2f} Gbit/s < {bound:.2f} Gbit/s"
    ceiling = expect.ib_write_bw.max_gbps
    return at_least(value, bound, text, "expect.ib_write_bw.min_gbps", ceiling)


def judge_ib_write_lat(run: PerftestRun, expect: Expectations) -> Verdict:
    """A pair's t_avg and (where printed) 99th percentile within `expect.ib_write_lat`."""
    bounds = expect.ib_write_lat
    if run.error is not None:
        return Verdict(False, None, bounds.max_avg_us, None, f"ib_write_lat failed: {run.error}")
    if unread := getattr(run, "not_measured", None):
        return not_measured(f"ib_write_lat: {unread}", bound=bounds.max_avg_us)
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


UNKNOWN = "unknown"
"""A node's localization status when no measured pair clears or blames it."""
FIX_UNCLEARED = "check those nodes are reachable and their pair runs complete, then re-run"


class Localized(Protocol):
    """What pair localization found (`campaigns.localization.Localization`)."""

    suspects: Sequence[str]
    verdicts: Mapping[str, Any]
    link_problems: Sequence[Any]


def judge_localization(
    tool: str, schedule: str, localization: Localized, suspect_devices: Sequence[str]
) -> Verdict:
    """The pair schedule of `tool` blames no node, no link and no device."""
    lines = [f"schedule {schedule}"]
    lines += [f"{n}: {localization.verdicts[n].reason}" for n in localization.suspects]
    lines += [
        f"link {p.a}-{p.b}: fails while both nodes pass elsewhere"
        for p in localization.link_problems
    ]
    lines += [f"suspect device {d}" for d in suspect_devices]
    source = f"{tool} pair schedule {schedule}"
    measurements = (
        Measurement("suspect_nodes", len(localization.suspects), "nodes", 0, "==", source),
        Measurement("failing_links", len(localization.link_problems), "links", 0, "==", source),
        Measurement("suspect_devices", len(suspect_devices), "devices", 0, "==", source),
    )
    if localization.suspects or localization.link_problems or suspect_devices:
        return Verdict(False, reason=f"{tool}: " + "; ".join(lines), measurements=measurements)
    uncleared = [n for n, v in localization.verdicts.items() if getattr(v, "status", "") == UNKNOWN]
    if uncleared:  # no passing pair and not blamed: the schedule says nothing of them
        found = Measurement("uncleared_nodes", len(uncleared), "nodes", 0, "==", source)
        why = f"{tool}: {', '.join(uncleared)}: no pair with them measured and passed"
        return not_measured(why, FIX_UNCLEARED, measurements=(*measurements, found))
    return Verdict(True, reason="; ".join(lines), measurements=measurements)


def judge_eri_count(node: str, found: int, wanted: int, source: str) -> Verdict:
    """The node has the ERIs the all-ERIs-at-once round needs (at least `min(wanted, 2)`)."""
    if found < min(wanted, 2):
        return Verdict(False, reason=f"{node}: {found} ERI(s), {source} {wanted}")
    return Verdict(True)


# -- NCCL (nccl_busbw) ----------------------------------------------------------------------


def is_not_measured(verdict: Verdict) -> bool:
    """The verdict measured nothing it could judge (its outcome is `not_measured`)."""
    return verdict.outcome == NOT_MEASURED


def judge_nccl_run(
    result: NcclResult,
    launch: CommandResult | None = None,
    launched: NcclExpected | None = None,
) -> Verdict:
    """all_reduce_perf ran as launched and is complete and ok (what every NCCL criterion
    starts from): the parser's `ok` (whole table, no failure line, no wrong values, JSON
    `errors[]` empty), one table of ranks 0..N-1 each once on the launched hosts
    (`launched`), and the launcher's exit status 0 (`launch`).

    A failure is what the tool or the launcher says failed (a failure line, out-of-bounds
    values, a #wrong count, a non-zero exit). An output that cannot be read, is cut, or is
    not the run launched, a launch that timed out or a node that stopped answering (named)
    is not measured: never a pass, never a failure."""
    failed: list[str] = []
    unread: list[str] = []
    if result.silent_nodes:
        nodes = ", ".join(result.silent_nodes)
        unread.append(f"{nodes} stopped answering during all_reduce_perf")
    if result.error is not None:
        (failed if result.failed else unread).append(f"all_reduce_perf failed: {result.reason}")
    elif not result.rows:
        unread.append("all_reduce_perf printed no results table")
    elif not result.ok:
        (failed if result.failed else unread).append(f"all_reduce_perf not ok: {result.reason}")
    if launched is not None:
        said = result.error or ""
        unread += [p for p in rank_problems(result.ranks, result.tables, launched) if p not in said]
    if launch is not None and launch.truncated:
        unread.append(f"launcher output cut at the transport's limit on {launch.node}")
    if launch is not None and not launch.ok:
        gone = launch.timed_out or launch.unreachable or launch.exit_status is None
        (unread if gone else failed).append(f"launcher: {launch.failure}")
    if failed and not result.silent_nodes:  # a node gone is why the rest failed: unmeasured
        return Verdict(False, reason="; ".join(failed + unread))
    unread += failed
    if unread:
        return not_measured("; ".join(unread))
    return Verdict(True)


def judge_nccl_avg_busbw(
    result: NcclResult,
    expect: Expectations,
    launch: CommandResult | None = None,
    launched: NcclExpected | None = None,
) -> Verdict:
    """A complete, ok run (`judge_nccl_run`) whose average bus bandwidth is at or above
    `expect.nccl.min_avg_busbw_gbs`."""
    avg, bound = result.avg_busbw_gbs, expect.nccl.min_avg_busbw_gbs
    ran = judge_nccl_run(result, launch, launched)
    if not ran:
        return replace(ran, bound=bound)
    return at_least(
        avg,
        bound,
        f"average bus bandwidth {avg} GB/s < {bound} GB/s",
        "expect.nccl.min_avg_busbw_gbs",
        expect.nccl.max_busbw_gbs,
    )


def judge_nccl_largest_busbw(
    result: NcclResult,
    expect: Expectations,
    launch: CommandResult | None = None,
    launched: NcclExpected | None = None,
) -> Verdict:
    """A complete, ok run (`judge_nccl_run`) whose bus bandwidth at the largest size is at or
    above `expect.nccl.min_busbw_largest_gbs`."""
    value, bound = result.busbw_at_max_size_gbs, expect.nccl.min_busbw_largest_gbs
    ran = judge_nccl_run(result, launch, launched)
    if not ran:
        return replace(ran, bound=bound)
    return at_least(
        value,
        bound,
        f"bus bandwidth at {result.max_size_bytes} bytes is {value} GB/s < {bound} GB/s",
        "expect.nccl.min_busbw_largest_gbs",
        expect.nccl.max_busbw_gbs,
    )


def judge_nccl_correct(
    result: NcclResult,
    launch: CommandResult | None = None,
    launched: NcclExpected | None = None,
) -> Verdict:
    """A complete, ok run (`judge_nccl_run`) whose every #wrong cell is a count of 0; not
    measured when all_reduce_perf did not check its results (`-c 0`, N/A cells, an old
    `error` column). A positive count fails, naming its size and op."""
    ran = judge_nccl_run(result, launch, launched)
    if not ran:
        wrong = result.total_wrong if result.wrong_found else None
        return replace(ran, measured=wrong, bound=0)
    if result.validation == 0:
        return not_measured("validation off (-c 0): all_reduce_perf printed no #wrong counts")
    if result.wrong_column != "#wrong":
        return not_measured("all_reduce_perf printed no #wrong column (old `error` layout)")
    if not result.wrong_cells or result.wrong_na == result.wrong_cells:
        return not_measured("#wrong is N/A in every cell: all_reduce_perf checked no result")
    if result.wrong_na or result.total_wrong is None:
        return not_measured(
            f"#wrong N/A in {result.wrong_na} of {result.wrong_cells} cells: "
            "not every result was checked"
        )
    if result.total_wrong:
        return Verdict(False, result.total_wrong, 0, None, f"all_reduce_perf {result.reason}")
    return Verdict(True, 0, 0, None)


def judge_nccl(
    result: NcclResult,
    expect: Expectations,
    launch: CommandResult | None = None,
    launched: NcclExpected | None = None,
) -> Verdict:
    """A complete, correct all_reduce_perf run meeting every NCCL bandwidth bound the
    inventory sets (what bisection asks): cut short, wrong values, other ranks than launched
    or a launcher that failed fail it; an unset bound is not compared (the suite's own test
    is not measured then)."""
    ran = judge_nccl_run(result, launch, launched)
    if not ran:
        return ran
    bounds = expect.nccl
    for bound, judge in (
        (bounds.min_avg_busbw_gbs, judge_nccl_avg_busbw),
        (bounds.min_busbw_largest_gbs, judge_nccl_largest_busbw),
    ):
        verdict = judge(result, expect, launch, launched) if bound is not None else Verdict(True)
        if not verdict:
            return verdict
    return Verdict(True)
