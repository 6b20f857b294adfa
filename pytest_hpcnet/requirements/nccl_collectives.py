"""Judges of the collectives beyond all-reduce (`nccl_all_gather`, `nccl_reduce_scatter`,
`nccl_alltoall`, `nccl_sendrecv`), each judged as the all-reduce is: a complete run of the
collective launched (one table of ranks 0..N-1 on the launched hosts), every `#wrong` a
count of 0, the network NCCL chose on every node, and the average and largest-size busbw
against `expect.nccl.collectives.<collective>` (busbw by the collective's own formula,
nccl-tests doc/PERFORMANCE.md). No cloud publishes these floors for eRDMA: unset, each
busbw is measured and reported, not judged (INCOMPLETE). The ERIs' byte counters, read
before and after each collective's own launch, prove it crossed eRDMA: every ERI of every
node moved at least its share of one operation of the largest size."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.nccl import INPLACE_UNCHECKED
from pytest_hpcnet.requirements.erdma import judge_traffic, reported_first
from pytest_hpcnet.requirements.judges import at_least, judge_nccl_run
from pytest_hpcnet.requirements.nccl import judge_nccl_network_used
from pytest_hpcnet.requirements.registry import collective_code
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
FIX_WRONG = "drain the suspects the bisection names and open a ticket (data corruption)"
FIX_SLOW = (
    "check the suspect's ERIs (ib_write_bw of each) and NCCL's settings; a slow node or ERI "
    "that stays slow: a ticket"
)


def _named(verdict: Verdict, binary: str) -> Verdict:
    """The all-reduce judge's verdict, its reason naming the collective that ran."""
    if verdict.ok or "all_reduce_perf" not in verdict.reason:
        return verdict
    return Verdict(
        outcome=verdict.outcome,
        reason=verdict.reason.replace("all_reduce_perf", binary),
        subject=verdict.subject,
    )


def judge_collective_selected(selected: Sequence[str], key: str) -> Verdict:
    """The collective is one `benchmarks.nccl.collectives.run` selects; else not applicable
    (the inventory leaves it out)."""
    if key in selected:
        return passing()
    return not_applicable(f"{key} not selected (benchmarks.nccl.collectives.run)")


def judge_collective_run(run: Any) -> Verdict:
    """The collective ran as launched, complete and ok (`judge_nccl_run` held to the binary
    launched: its own header, one table of ranks 0..N-1 on the launched hosts, its exit
    status): a tool failure fails, an output that is not the run launched is not measured."""
    binary = run.collective.binary
    return _named(judge_nccl_run(run.result, run.launch, run.launched), binary)


def judge_collective_correct(run: Any) -> Verdict:
    """Every `#wrong` cell validation printed is a count of 0; the in-place cells nccl-tests
    prints N/A for alltoall and sendrecv are the only ones left unchecked."""
    binary, result = run.collective.binary, run.result
    ran = judge_collective_run(run)
    if not ran and not result.total_wrong:  # wrong values are this judge's to name
        return ran
    source = "nccl-tests validation (-c 1)"
    if result.validation == 0 or result.wrong_column != "#wrong":
        return not_measured(f"{binary} printed no #wrong counts (validation off?)")
    unchecked = result.wrong_na and binary not in INPLACE_UNCHECKED
    if not result.wrong_cells or result.wrong_na == result.wrong_cells or unchecked:
        return not_measured(
            f"#wrong N/A in {result.wrong_na} of {result.wrong_cells} cells of {binary}"
        )
    wrong = result.total_wrong
    found = Measurement("wrong", wrong, "values", 0, "==", source)
    if wrong is None:
        return not_measured(f"{binary}: a #wrong cell is not a count")
    if wrong:
        failed = Verdict(False, wrong, 0, None, f"{binary} {result.reason}", fix=FIX_WRONG)
        return reported_first(failed.with_code(collective_code(run.collective.key, "WRONG")), found)
    return reported_first(Verdict(True, 0, 0), found)


Blame = Callable[[], str]


def _busbw(
    value: float | None, bound: float | None, name: str, key: str, expect: Expectations, run: Any
) -> Verdict:
    c = run.collective
    basis = f"busbw = algbw x {c.factor} ({PERFORMANCE_MD})"
    source = f"expect.nccl.collectives.{c.key}.{key}"
    found = Measurement(name, value, "GB/s", bound, ">=", source, basis=basis)
    what = "average bus bandwidth" if name == "avg_busbw" else "bus bandwidth at the largest size"
    if bound is None:
        shown = f"{value:g} GB/s" if value is not None else "nothing"
        verdict = not_measured(
            f"{c.binary} {what} {shown}: no bound ({source} unset; none published)"
        )
    else:
        verdict = at_least(
            value,
            bound,
            f"{c.binary} {what} {value} GB/s < {bound} GB/s",
            source,
            expect.nccl.max_busbw_gbs,
        )
    return reported_first(verdict, found)


def judge_collective_busbw(run: Any, expect: Expectations, blame: Blame) -> Verdict:
    """Average and largest-size busbw against `expect.nccl.collectives.<collective>`; a
    failure names the suspect (`blame`, asked only then). Unset bounds: measured, not
    judged."""
    ran = judge_collective_run(run)
    if not ran:
        return ran
    bounds = getattr(expect.nccl.collectives, run.collective.key)
    result = run.result
    verdict = combine(
        [
            _busbw(
                result.avg_busbw_gbs,
                bounds.min_avg_busbw_gbs,
                "avg_busbw",
                "min_avg_busbw_gbs",
                expect,
                run,
            ),
            _busbw(
                result.busbw_at_max_size_gbs,
                bounds.min_busbw_largest_gbs,
                "busbw_largest",
                "min_busbw_largest_gbs",
                expect,
                run,
            ),
        ]
    )
    if verdict.outcome == FAIL:
        over = len(result.hosts)
        slow = verdict.with_reason(f"{verdict.reason} over {over} nodes; {blame()}")
        return replace(slow, fix=slow.fix or FIX_SLOW)
    return verdict


def judge_collective_transport(
    run: Any, hostnames: Mapping[str, str | None], expect: Expectations
) -> Verdict:
    """NCCL chose `expect.erdma.nccl_network` (`Using network IB`, GDRDMA where expected) on
    every node in this collective's own launch; a node on sockets fails, named."""
    if expect.erdma.nccl_network is None:
        return not_applicable("no NCCL network expected (expect.erdma.nccl_network is null)")
    ran = judge_collective_run(run)
    if not ran:
        return ran
    verdict = judge_nccl_network_used(run.log, hostnames, expect)
    return verdict.with_code(collective_code(run.collective.key, "SOCKET"))


def collective_passes(run: Any, expect: Expectations) -> bool:
    """One collective's run is complete, correct and meets every busbw bound set (what the
    bisection asks of a half); an unset bound is not compared."""
    if not judge_collective_run(run):
        return False
    bounds = getattr(expect.nccl.collectives, run.collective.key)
    result = run.result
    for value, bound in (
        (result.avg_busbw_gbs, bounds.min_avg_busbw_gbs),
        (result.busbw_at_max_size_gbs, bounds.min_busbw_largest_gbs),
    ):
        if bound is not None and (value is None or value < bound):
            return False
    return True


def share_per_eri(run: Any, devices: Mapping[str, Sequence[str]]) -> int:
    """The bytes each ERI moves at least in one operation of the largest size S over n nodes:
    the collective's share (`S(n-1)/n`, sendrecv `S`) split over a node's ERIs; at least 1."""
    size = run.launched.max_bytes or run.result.max_bytes_asked or 0
    n = max(len(devices), 2)
    share = size if run.collective.share == "S" else size * (n - 1) // n
    most = max((len(d) for d in devices.values()), default=1)
    return max(1, share // max(most, 1))


def judge_collective_traffic(run: Any, devices: Mapping[str, Sequence[str]]) -> Verdict:
    """Every node's ERIs (`devices`, the ones NCCL was told to use) moved at least the
    collective's share between the counter reads around its own launch: a run that reports
    busbw while an ERI moved nothing fails naming the node and the ERI; counters not read
    around the launch are not measured."""
    c = run.collective
    if run.traffic is None:
        return not_measured(f"{c.binary}: the ERIs' byte counters were not read around its launch")
    least = share_per_eri(run, devices)
    source = f"{c.binary} share {c.share} of the largest size per node, over its ERIs"
    found = Measurement("min_bytes_per_eri", least, "bytes", least, ">=", source)
    verdict = judge_traffic(run.traffic, devices, least)
    if not verdict.ok and verdict.outcome == FAIL:
        verdict = verdict.with_code(collective_code(c.key, "TRAFFIC"))
    return reported_first(verdict, found)
