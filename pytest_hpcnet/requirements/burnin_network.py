"""Network traffic during the burn-in, judged per iteration: every `ib_write_bw` run of each
round's pairs on every ERI against the benchmark's pair bound (`judge_ib_write_bw`,
`expect.ib_write_bw`), and each round's cluster-wide NCCL all-reduce against the `nccl_busbw`
floors (`expect.nccl`), each a measurement of its own naming its pair and ERI (or the
all-reduce), round and time (`at t=612 s (0h10m12s)`).

A round asked but not run (the controller was down, the round before still running, the
burn-in over) and a node that stopped answering (not paired in that round) are not measured:
never a pass. A failure names its pair, ERI and time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.requirements.judges import at_least, judge_ib_write_bw
from pytest_hpcnet.requirements.verdict import (
    FAIL,
    NOT_MEASURED,
    PASS,
    Measurement,
    Verdict,
    not_applicable,
)

SECTION = "burnin_network"
"""The evidence the verdict reads: the run folder's `burnin/network.jsonl`."""
BW_CODE = "HPCNET-BURNIN-NET-BW"
NCCL_CODE = "HPCNET-BURNIN-NET-NCCL"
BW_FIX = "re-run ib_write_bw on that pair and ERI; a lasting shortfall is a ticket naming it"
NCCL_FIX = "check NCCL's settings and the pairs failing in the same round (a slow node or ERI)"
OFF = "network rounds off (burnin.network_every: off)"


@dataclass(frozen=True)
class BwRun:
    """One recorded `ib_write_bw` run of a round: client and server node and ERI, the average
    Gbit/s, and why it failed or could not be read (what `judge_ib_write_bw` reads)."""

    round: int
    t: float
    client: str
    client_eri: str
    server: str
    server_eri: str
    gbps: float | None = None
    error: str | None = None
    unread: str | None = None
    latency: None = None

    @property
    def value(self) -> float | None:
        return self.gbps

    @property
    def not_measured(self) -> str | None:
        return self.unread

    @property
    def subject(self) -> str:
        ends = f"{self.client}/{self.client_eri}-{self.server}/{self.server_eri}"
        return f"{ends} round {self.round}"


@dataclass(frozen=True)
class NcclRun:
    """One recorded all-reduce of a round: its node count, `judge_nccl_run`'s outcome and
    reason (complete, ok, the ranks launched), average and largest-size bus bandwidth."""

    round: int
    t: float
    nodes: int
    ran: str
    why: str = ""
    avg: float | None = None
    largest: float | None = None
    size: int | None = None


@dataclass(frozen=True)
class Round:
    """One round as the controller recorded it: when it started, the nodes left out
    (stopped answering), or why it did not run (`missed`)."""

    round: int
    t: float
    lost: dict[str, str] = field(default_factory=dict)
    missed: str = ""
    pairs: int = 0


@dataclass(frozen=True)
class NetworkBurnin:
    """The network rounds of one burn-in: how often they were asked, the rounds planned
    (due at `every`, 2 x `every`, ... before the end), and what each recorded."""

    every: float
    planned: int
    rounds: tuple[Round, ...] = ()
    bw: tuple[BwRun, ...] = ()
    nccl: tuple[NcclRun, ...] = ()
    unreadable: int = 0
    why_none: str = ""
    """Why no round was asked (network rounds off, a burn-in shorter than the interval)."""
    missing: str = ""
    """Why there is no evidence of the rounds at all (no burn-in ran)."""


def when(t: float) -> str:
    """`at t=612 s (0h10m12s)`: seconds since the burn-in started."""
    h, rest = divmod(int(t), 3600)
    return f"at t={t:g} s ({h}h{rest // 60:02d}m{rest % 60:02d}s)"


def _shown(value: float | None, t: float) -> str:
    return f"{'none' if value is None else f'{value:g}'} {when(t)}"


def bw_measurement(run: BwRun, expect: Expectations) -> Measurement:
    """One ERI run against the benchmark's pair bound, its reason kept for a failure."""
    verdict = judge_ib_write_bw(run, expect)
    outcome = verdict.outcome if verdict.outcome in (PASS, FAIL) else NOT_MEASURED
    return Measurement(
        "bw_avg",
        _shown(run.gbps, run.t),
        "Gbit/s",
        verdict.bound,
        ">=",
        "expect.ib_write_bw",
        subject=run.subject,
        outcome=outcome,  # type: ignore[arg-type]
        basis=verdict.reason,
        code=BW_CODE if outcome == FAIL else "",
    )


def nccl_measurements(run: NcclRun, expect: Expectations) -> list[Measurement]:
    """The all-reduce's average and largest-size bus bandwidth against the `nccl_busbw`
    floors; a run that did not complete fails (or is not measured) both."""
    subject = f"all_reduce {run.nodes} nodes round {run.round}"
    bounds = expect.nccl
    out = []
    for name, value, bound, key in (
        ("avg_busbw", run.avg, bounds.min_avg_busbw_gbs, "expect.nccl.min_avg_busbw_gbs"),
        ("busbw_largest", run.largest, bounds.min_busbw_largest_gbs,
         "expect.nccl.min_busbw_largest_gbs"),
    ):  # fmt: skip
        if run.ran != PASS:
            outcome, reason = (FAIL if run.ran == FAIL else NOT_MEASURED), run.why
        else:
            verdict = at_least(value, bound, f"{name} {value} GB/s < {bound} GB/s", key,
                               bounds.max_busbw_gbs)  # fmt: skip
            outcome = verdict.outcome if verdict.outcome in (PASS, FAIL) else NOT_MEASURED
            reason = verdict.reason
        out.append(
            Measurement(
                name,
                _shown(value, run.t),
                "GB/s",
                bound,
                ">=",
                key,
                subject=subject,
                outcome=outcome,  # type: ignore[arg-type]
                basis=reason,
                code=NCCL_CODE if outcome == FAIL else "",
            )
        )
    return out


def missing_measurements(found: NetworkBurnin) -> list[Measurement]:
    """Not measured: each planned round that did not run, each node left out of one."""
    out = []
    by_round = {r.round: r for r in found.rounds}
    for k in range(1, found.planned + 1):
        done = by_round.get(k)
        due = k * found.every
        if done is None or done.missed:
            why = done.missed if done is not None else "no controller ran it"
            value = f"not run ({why}), due {when(due)}"
            out.append(Measurement("round", value, subject=f"round {k}", outcome=NOT_MEASURED))
            continue
        ran_bw = any(r.round == k for r in found.bw)
        ran_nccl = any(r.round == k for r in found.nccl)
        if done.pairs and not (ran_bw and ran_nccl):
            value = f"incomplete: {'no all-reduce' if ran_bw else 'no ib_write_bw run'} recorded"
            value += f" (the round stopped), started {when(done.t)}"
            out.append(Measurement("round", value, subject=f"round {k}", outcome=NOT_MEASURED))
        for node, why in sorted(done.lost.items()):
            value = f"not paired: stopped answering ({why}) {when(done.t)}"
            subject = f"{node} round {k}"
            out.append(Measurement("round", value, subject=subject, outcome=NOT_MEASURED))
    return out


def judge_burnin_network(found: NetworkBurnin, expect: Expectations) -> Verdict:
    """Every iteration of the burn-in's network rounds within the benchmark bounds: the first
    failure named with its pair, ERI and time; a round or node not run is not measured."""
    if found.missing:
        return Verdict(reason=found.missing, outcome=NOT_MEASURED, sections=(SECTION,))
    if found.why_none:
        return not_applicable(found.why_none)
    measured = [bw_measurement(r, expect) for r in found.bw]
    measured += [m for r in found.nccl for m in nccl_measurements(r, expect)]
    missing = missing_measurements(found)
    measured += missing
    failed = [m for m in measured if m.outcome == FAIL]
    unread = [m for m in measured if m.outcome == NOT_MEASURED]
    if failed:
        first = min(failed, key=_at)
        reason = f"{first.subject}: {first.basis} {when(_at(first))}"
        if len(failed) > 1:
            reason += f" (and {len(failed) - 1} more)"
        nccl = first.code == NCCL_CODE
        return Verdict(
            reason=reason,
            fix=NCCL_FIX if nccl else BW_FIX,
            code=first.code,
            outcome=FAIL,
            measurements=tuple(measured),
            sections=(SECTION,),
        )
    ran = len({r.round for r in found.rounds if not r.missed})
    said = f"{ran} of {found.planned} rounds: {len(found.bw)} ib_write_bw runs, "
    said += f"{len(found.nccl)} all-reduces"
    if found.unreadable:
        said += f"; {found.unreadable} unreadable evidence lines"
    if unread or found.unreadable or not measured:
        first = unread[0] if unread else None
        why = f"{first.subject}: {first.value}" if first else "nothing measured"
        return Verdict(
            reason=f"{why}; {said}",
            outcome=NOT_MEASURED,
            measurements=tuple(measured),
            sections=(SECTION,),
        )
    return Verdict(
        reason=f"{said} within bounds",
        outcome=PASS,
        measurements=tuple(measured),
        sections=(SECTION,),
    )


def _at(m: Measurement) -> float:
    _, _, after = str(m.value).partition(" at t=")
    try:
        return float(after.split(" ", 1)[0])
    except ValueError:
        return float("inf")
