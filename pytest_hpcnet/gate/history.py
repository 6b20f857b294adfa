"""`hpcnet trends REPORTS_DIR [--cluster C] -o trends.html`, and the page a run writes at its
end when its cluster has history: the figures of `report/trends.py`, the node states of the
gate's own judgement (`gate/judge.py`), so "flapped" means what the gate acted on."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Mapping
from pathlib import Path

from pytest_hpcnet.gate.confirm import GATE_DIR
from pytest_hpcnet.gate.judge import judge
from pytest_hpcnet.gate.repair import PastRepairs, past_repairs
from pytest_hpcnet.report.evidence import CheckRecord, RunSummary, read_summary
from pytest_hpcnet.report.trends import (
    MAX_RUNS,
    History,
    RepairRow,
    Returning,
    build_history,
    digest_run,
    write_digest,
)

TRENDS_FILE = "trends.html"


def node_statuses(records: list[CheckRecord], summary: RunSummary) -> dict[str, str]:
    """Each node's gate judgement in one run: pass, fail or unjudged."""
    return {name: j.status for name, j in judge(records, summary).items()}


def history(
    reports_dir: Path,
    cluster: str | None = None,
    tolerance: float = 0.10,
    per_metric: Mapping[str, float] | None = None,
    max_runs: int = MAX_RUNS,
) -> History:
    """The cluster's history in a reports folder, nodes judged as the gate judges them, with
    the gate's repairs there."""
    found = build_history(reports_dir, cluster, tolerance, per_metric, node_statuses, max_runs)
    if found.runs:
        found.repairs, found.returning = repair_rows(repairs(reports_dir, found.cluster))
    return found


def write_run_digest(run_dir: Path, summary: RunSummary, records: list[CheckRecord]) -> None:
    """Leave the closed run's figures and node judgements in its folder for later histories."""
    write_digest(run_dir, digest_run(records, summary, node_statuses))


def has_history(reports_dir: Path, cluster: str, exclude: str) -> bool:
    """True when another closed run of this cluster is in the reports folder."""
    for run_dir in reports_dir.iterdir():
        if run_dir.name in (exclude,) or run_dir.name.startswith(".") or not run_dir.is_dir():
            continue
        try:
            summary = read_summary(run_dir)
        except (OSError, ValueError):
            continue
        if summary is not None and summary.cluster == cluster:
            return True
    return False


def add_command(sub: argparse._SubParsersAction) -> None:
    """Register `hpcnet trends`."""
    cmd = sub.add_parser("trends", help="one HTML page of a cluster's runs, night after night")
    cmd.add_argument("reports_dir", type=Path, help="the reports folder (reports/)")
    cmd.add_argument("--cluster", help="the cluster (default: the latest run's)")
    cmd.add_argument("-o", "--output", type=Path, default=Path(TRENDS_FILE), help="trends.html")
    cmd.add_argument(
        "--tolerance", type=float, default=0.10, help="regression tolerance (default 0.10)"
    )


def run(args: argparse.Namespace) -> int:
    """Write the page: 0 with no regression in the latest run, 1 with one, 2 without runs."""
    if not args.reports_dir.is_dir():
        print(f"hpcnet trends: {args.reports_dir} is not a folder")
        return 2
    found = history(args.reports_dir, args.cluster, args.tolerance)
    if not found.runs:
        which = f" of cluster {args.cluster}" if args.cluster else ""
        print(f"hpcnet trends: no closed run{which} in {args.reports_dir}")
        return 2
    from pytest_hpcnet.report.trends_page import write_trends  # Jinja2: the page only

    write_trends(found, args.output)
    latest = [s for s, i in found.regressions() if i == len(found.runs) - 1]
    print(
        f"hpcnet trends: {args.output}: cluster {found.cluster}, {len(found.runs)} runs, "
        f"{len(found.regressions())} regressed points ({len(latest)} in the latest run), "
        f"flapped: {', '.join(found.flapped) or 'none'}"
    )
    for line in repair_lines(repairs(args.reports_dir, found.cluster)):
        print(f"  repair: {line}")
    return 1 if latest else 0


def gate_entries(reports_dir: Path) -> list[dict]:
    """Every gate run's entry in `<reports>/.gate/*/gate.jsonl` (unreadable lines skipped)."""
    found: list[dict] = []
    gate_dir = reports_dir / GATE_DIR
    for path in sorted(gate_dir.glob("*/gate.jsonl")) if gate_dir.is_dir() else []:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    found.append(entry)
    return found


def repairs(reports_dir: Path, cluster: str = "") -> PastRepairs:
    """The repairs the gate did in this reports folder (of `cluster`), oldest first."""
    return past_repairs(gate_entries(reports_dir), cluster)


def repair_rows(past: PastRepairs) -> tuple[list[RepairRow], list[Returning]]:
    """The repairs done (a reset or reboot) and the nodes that keep coming back, as the
    trends page lists them (the same records as `repair_lines`)."""
    rows = [
        RepairRow(
            r.at,
            r.node,
            tuple(r.codes),
            r.action,
            r.outcome,
            r.why,
            r.reset_s,
            r.reboot_to_ssh_s,
            r.ssh_to_accepted_s,
        )
        for r in past.records
        if r.action is not None
    ]
    back = [
        Returning(
            node,
            len(records),
            records[0].at[:10],
            tuple(sorted({c for r in records for c in r.codes})),
        )
        for node, records in past.returning().items()
    ]
    return rows, back


def repair_lines(past: PastRepairs) -> list[str]:
    """Per node: its repairs (code, repair, times, outcome), and the nodes that keep
    coming back, named."""
    lines = []
    for record in past.records:
        if record.action is not None:
            lines.append(f"{record.at[:16]} {record.line().strip()}")
    for node, records in past.returning().items():
        codes = sorted({c for r in records for c in r.codes})
        lines.append(
            f"returning {node}: {len(records)} repairs since {records[0].at[:10]} "
            f"({', '.join(codes)})"
        )
    return lines
