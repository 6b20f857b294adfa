"""Confirming a failure before the gate acts on a node: its failed checks are re-run.

`PytestConfirm` runs pytest on just the test ids that failed on the nodes to act on (and,
when every one of them is a check of its node alone, against just those nodes:
`--hpcnet-nodes`), as `hpcnet gate run` starts its run, into `<reports>/.gate/<run-id>/
confirm/` (beside the run, never a night of the trends or a baseline), against the run's own
baseline, `scheduler.confirm_runs` times at most. `outcomes` judges each re-run as the gate
judges a run: a node whose check fails again is **confirmed**; one whose checks all pass is
**flaky**; one the re-run could not judge (unreachable, errored, not measured, not run) is
**unconfirmed**. The gate acts only on confirmed nodes.

A figure the first run judged against the other nodes (a bound its source calls a cluster
median, the nodes' median or the peers: `PEER_RELATIVE`) cannot be judged again on a re-run
narrowed to the failed nodes, where each is its own peer: a whole node at half speed would
pass. Such a figure of the re-run is compared with the first run's recorded bound as well
(`peer_misses`), and a figure below it confirms the failure.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pytest_hpcnet.gate.judge import NodeJudgement, judge
from pytest_hpcnet.inventory.gate_settings import SchedulerSettings
from pytest_hpcnet.report.evidence import (
    CheckRecord,
    EvidenceError,
    RunSummary,
    effective_verdict,
    read_records,
    read_summary,
    run_date_of,
)
from pytest_hpcnet.requirements.bounds import CLUSTER_MEDIAN, NODES_MEDIAN

Outcome = Literal["confirmed", "flaky", "unconfirmed"]
GATE_DIR = ".gate"
"""Under the reports folder: `.gate/<run-id>/gate.jsonl`, hook outputs and the re-runs. Kept
out of the run folder itself, whose every file is covered by its digest and signature."""
CONFIRM_DIR = "confirm"
SUITES = Path(__file__).resolve().parents[1] / "suites"
BASELINE_AUTO = re.compile(r"baseline auto: (\S+) \(")
"""How `summary.json` names the baseline `--hpcnet-baseline auto` chose."""
PASSED = ("pass", "waived")
PEER_RELATIVE = re.compile(r"cluster\b.*\bmedian|nodes' median|\bpeers?\b", re.IGNORECASE)
"""A bound's `threshold_source` that depends on the other nodes of the run (the GPU judges
spell them `0.90 x cluster median 800`, `0.90 x the nodes' median 180`)."""
PEER_BASES = (CLUSTER_MEDIAN, NODES_MEDIAN)
"""A measurement's `basis` that says its bound came from the other nodes."""
MISSES = {">=": lambda v, b: v < b, "<=": lambda v, b: v > b}


@dataclass
class Confirmation:
    """What the re-runs say about one node's failure."""

    node: str
    outcome: Outcome
    detail: str = ""
    """Which re-run(s) said so, and for `unconfirmed` why they could not judge it."""


Confirmer = Callable[[Mapping[str, NodeJudgement]], dict[str, Confirmation]]
Runner = Callable[..., Any]


def pytest_arg(nodeid: str) -> str:
    """A record's test id as a pytest argument here: as recorded when its file is in the
    current folder, else the shipped suite file of that name (a run outside the checkout
    records the shipped suites' ids relative to the suites folder)."""
    file, sep, rest = nodeid.partition("::")
    shipped = SUITES / Path(file).name
    if Path(file).exists() or not shipped.is_file():
        return nodeid
    return f"{shipped}{sep}{rest}"


def narrowed(failed: Mapping[str, NodeJudgement]) -> bool:
    """Whether the re-run is against just the failed nodes (`--hpcnet-nodes`): every failed
    record is a check of its node alone."""
    return all(j.local for j in failed.values())


def rerun_argv(
    inventory: Path, reports_dir: Path, failed: Mapping[str, NodeJudgement], baseline: Path | None
) -> list[str]:
    """The pytest command line re-running the failed checks of `failed`'s nodes."""
    nodeids = dict.fromkeys(nid for j in failed.values() for nid in j.nodeids)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    argv += ["--hpcnet-inventory", str(inventory), "--hpcnet-reports-dir", str(reports_dir)]
    if narrowed(failed):
        argv += ["--hpcnet-nodes", ",".join(sorted(failed))]
    if baseline is not None:
        argv += ["--hpcnet-baseline", str(baseline)]
    return argv + [pytest_arg(nid) for nid in nodeids]


def _concerns(record: CheckRecord, node: str) -> bool:
    ends = record.subject.split("->") if record.kind == "pair" else [record.subject]
    return node in ends or node in record.suspect_nodes


def _peer_bounds(first: Sequence[CheckRecord], node: str, checks: Sequence[str]) -> dict:
    """The first run's peer-relative bounds of `node`'s failed checks, by (check, record
    subject, measurement name, measurement subject): (bound, comparison, source)."""
    found = {}
    for record in first:
        if record.check_id not in checks or record.kind != "node" or record.subject != node:
            continue
        for m in record.measured:
            if (
                isinstance(m.threshold, int | float)
                and m.comparison in MISSES
                and (m.basis in PEER_BASES or PEER_RELATIVE.search(m.threshold_source))
            ):
                key = (record.check_id, record.subject, m.name, m.subject)
                found[key] = (float(m.threshold), m.comparison, m.threshold_source)
    return found


def peer_misses(
    first: Sequence[CheckRecord], records: Sequence[CheckRecord], node: str, checks: Sequence[str]
) -> list[str]:
    """Each figure of `node`'s re-run records that misses the bound the first run judged it
    against when that bound came from the other nodes (`PEER_RELATIVE`), one line each."""
    bounds = _peer_bounds(first, node, checks)
    out = []
    for record in records:
        for m in record.measured:
            key = (record.check_id, record.subject, m.name, m.subject)
            if key not in bounds or not isinstance(m.value, int | float):
                continue
            bound, comparison, source = bounds[key]
            if MISSES[comparison](float(m.value), bound):
                what = " ".join(x for x in (record.check_id, m.subject, m.name) if x)
                unit = f" {m.unit}" if m.unit else ""
                side = "below" if comparison == ">=" else "above"
                out.append(f"{what} {m.value:g}{unit} {side} the first run's {source} ({bound:g})")
    return out


def outcomes(
    failed: Mapping[str, NodeJudgement],
    records: list[CheckRecord],
    summary: RunSummary,
    first: Sequence[CheckRecord] = (),
) -> dict[str, Confirmation]:
    """Each failed node's outcome in one re-run (its records and summary); on a re-run
    narrowed to the failed nodes, a figure below the peer-relative bound `first` (the first
    run's records) judged it against confirms the failure too."""
    run = f"re-run {summary.run_id}"
    on = run_date_of(summary, records)
    rejudged = judge(records, summary, failed)
    carried = first if narrowed(failed) else ()
    found: dict[str, Confirmation] = {}
    for name, before in failed.items():
        again = [c for c in rejudged[name].checks if c in before.checks]
        mine = [r for r in records if r.check_id in before.checks and _concerns(r, name)]
        below = peer_misses(carried, mine, name, before.checks)
        bad = [f"{r.check_id} {v}" for r in mine if (v := effective_verdict(r, on)) not in PASSED]
        missing = [c for c in before.checks if not any(r.check_id == c for r in mine)]
        if name in summary.unreachable_nodes:
            found[name] = Confirmation(name, "unconfirmed", f"{run}: {name} unreachable")
        elif again:
            found[name] = Confirmation(name, "confirmed", run)
        elif below:
            found[name] = Confirmation(name, "confirmed", f"{run}: {'; '.join(below)}")
        elif bad:
            found[name] = Confirmation(
                name, "unconfirmed", f"{run}: {', '.join(dict.fromkeys(bad))}"
            )
        elif missing:
            found[name] = Confirmation(
                name, "unconfirmed", f"{run}: {', '.join(missing)} did not run"
            )
        else:
            found[name] = Confirmation(name, "flaky", run)
    return found


def _runs(reports: Path) -> set[str]:
    return {p.name for p in reports.iterdir() if p.is_dir() and not p.name.startswith(".")}


@dataclass
class PytestConfirm:
    """Re-runs with pytest (`runner`: `subprocess.run` or a fake)."""

    inventory: Path
    run_dir: Path
    runs: int = 1
    baseline: Path | None = None
    runner: Runner = subprocess.run
    lines: list[str] = field(default_factory=list)
    """The pytest command lines run, in order."""
    first: list[CheckRecord] | None = None
    """The run's own records (read on first use): the peer references of its failures."""

    @property
    def reports_dir(self) -> Path:
        return self.run_dir.parent / GATE_DIR / self.run_dir.name / CONFIRM_DIR

    def __call__(self, failed: Mapping[str, NodeJudgement]) -> dict[str, Confirmation]:
        pending = {n: j for n, j in failed.items() if j.nodeids}
        found = {
            n: Confirmation(n, "unconfirmed", "no test id to re-run")
            for n in failed
            if n not in pending
        }
        seen: dict[str, list[str]] = {n: [] for n in pending}
        for _ in range(self.runs):
            if not pending:
                break
            for name, outcome in self._once(pending).items():
                if outcome.outcome == "confirmed":
                    seen[name].append(outcome.detail.removeprefix("re-run "))
                    continue
                found[name] = outcome
                del pending[name]
        for name in pending:
            runs = seen[name]
            label = f"re-run {runs[0]}" if len(runs) == 1 else f"re-runs {', '.join(runs)}"
            found[name] = Confirmation(name, "confirmed", label)
        return found

    def _once(self, failed: Mapping[str, NodeJudgement]) -> dict[str, Confirmation]:
        reports = self.reports_dir
        reports.mkdir(parents=True, exist_ok=True)
        before = _runs(reports)
        argv = rerun_argv(self.inventory, reports, failed, self.baseline)
        self.lines.append(" ".join(argv[3:]))
        proc = self.runner(argv, check=False, capture_output=True, text=True)
        new = sorted(_runs(reports) - before)

        def unconfirmed(why: str) -> dict[str, Confirmation]:
            return {n: Confirmation(n, "unconfirmed", why) for n in failed}

        if not new:
            said = (getattr(proc, "stderr", "") or "").strip().splitlines()[-1:]
            why = f": {said[0]}" if said else ""
            return unconfirmed(f"the re-run wrote no run (pytest exited {proc.returncode}{why})")
        try:
            records = read_records(reports / new[-1])
            summary = read_summary(reports / new[-1])
        except (EvidenceError, ValueError) as exc:
            return unconfirmed(f"re-run {new[-1]}: {exc}")
        if summary is None or summary.interrupted:
            return unconfirmed(f"re-run {new[-1]} did not finish")
        return outcomes(failed, records, summary, self._first())

    def _first(self) -> list[CheckRecord]:
        if self.first is None:
            self.first = first_records(self.run_dir)
        return self.first


def first_records(run_dir: Path) -> list[CheckRecord]:
    """The first run's records (what a re-run is judged against); none where unreadable."""
    try:
        return read_records(run_dir)
    except (EvidenceError, ValueError, OSError):
        return []


def _baseline(run_dir: Path) -> Path | None:
    """The baseline the run was compared with, when `auto` chose one (the re-run uses it too,
    so a regression is confirmed against the same reference)."""
    try:
        summary = read_summary(run_dir)
    except (EvidenceError, ValueError, OSError):
        return None
    line = str((summary.model_extra or {}).get("baseline", "")) if summary else ""
    found = BASELINE_AUTO.match(line)
    candidate = run_dir.parent / found.group(1) if found else None
    return candidate if candidate is not None and candidate.is_dir() else None


def for_run(
    inventory: Path, scheduler: SchedulerSettings, run_dir: Path, runner: Runner = subprocess.run
) -> PytestConfirm | None:
    """The confirmer for a run folder, or None when `scheduler.confirm_runs` is 0."""
    if scheduler.confirm_runs == 0:
        return None
    return PytestConfirm(inventory, run_dir, scheduler.confirm_runs, _baseline(run_dir), runner)
