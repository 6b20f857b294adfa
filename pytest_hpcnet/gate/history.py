"""`hpcnet trends REPORTS_DIR [--cluster C] -o trends.html`, and the page a run writes at its
end when its cluster has history: the figures of `report/trends.py`, the node states of the
gate's own judgement (`gate/judge.py`), so "flapped" means what the gate acted on."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from pytest_hpcnet.gate.judge import judge
from pytest_hpcnet.report.evidence import CheckRecord, RunSummary, read_summary
from pytest_hpcnet.report.trends import MAX_RUNS, History, build_history, digest_run, write_digest

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
    """The cluster's history in a reports folder, nodes judged as the gate judges them."""
    return build_history(reports_dir, cluster, tolerance, per_metric, node_statuses, max_runs)


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
    return 1 if latest else 0
