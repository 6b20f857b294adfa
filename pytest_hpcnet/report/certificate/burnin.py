"""The certificate's burn-in lines: the duration asked, and per node pass with the duration
achieved, or the first failure with its GPU, quantity and time (the judge's measurements,
`report/burnin_summary.py`). Passing nodes that achieved the same duration share a row."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

from pytest_hpcnet.report.burnin_summary import NodeSummary, burnin_summaries
from pytest_hpcnet.report.records import CheckRecord

_ORDER = {"fail": 0, "not_measured": 1, "error": 2, "waived": 3, "pass": 4}


def burnin_overview(records: Sequence[CheckRecord], run_date: date) -> dict[str, Any] | None:
    """`{"asked", "achieved", "nodes", "rows"}` for the certificate; None without a burn-in
    record. Each row: `nodes`, `outcome`, `achieved_s`, `asked_s`, `first` (a `Failure` or
    None), `more` (failures after the first) and `message` (why it was not measured)."""
    summaries = burnin_summaries(records, run_date)
    if not summaries:
        return None
    rows: list[dict[str, Any]] = []
    passed: dict[tuple[float | None, float | None], list[NodeSummary]] = {}
    for s in sorted(summaries, key=lambda s: _ORDER.get(s.outcome, 5)):
        if s.outcome == "pass":
            passed.setdefault((s.achieved_s, s.asked_s), []).append(s)
            continue
        rows.append(
            {
                "nodes": [s.node],
                "outcome": s.outcome,
                "achieved_s": s.achieved_s,
                "asked_s": s.asked_s,
                "first": s.first,
                "more": max(0, len(s.failures) - 1),
                "message": "" if s.first else s.message,
            }
        )
    for (achieved, asked), group in sorted(passed.items(), key=lambda kv: -len(kv[1])):
        rows.append(
            {
                "nodes": [s.node for s in group],
                "outcome": "pass",
                "achieved_s": achieved,
                "asked_s": asked,
                "first": None,
                "more": 0,
                "message": "",
            }
        )
    asked = sorted({s.asked_s for s in summaries if s.asked_s is not None})
    return {
        "asked": asked,
        "achieved": sum(s.whole for s in summaries),
        "nodes": [s.node for s in summaries],
        "rows": rows,
    }
