"""The certificate's evidence: per requirement, the records behind its verdict with their
commands, an excerpt of each output and a relative link to the whole one in `outputs/`.

Failing rows show their failing records (open); passing rows show a few records, the worst
subject first (collapsed, one click away). All text is escaped by the template.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from pytest_hpcnet.probes.sections import split_sections
from pytest_hpcnet.report.certificate.rows import RequirementRow
from pytest_hpcnet.report.evidence import (
    OUTPUTS_DIR,
    CheckRecord,
    effective_verdict,
    read_output,
)

MAX_EVIDENCE_RECORDS = 10  # failing records shown per failing requirement
MAX_PASSING_RECORDS = 3  # records shown per passing requirement
MAX_COMMANDS = 3
MAX_EXCERPT_LINES = 30
MAX_EXCERPT_CHARS = 3000
BAD = ("fail", "not_measured", "error", "waived")


def excerpt(run_dir: Path, digest: str | None) -> str:
    """The last lines of a stored output (bounded), "" where it is absent."""
    text = read_output(run_dir, digest or "")
    if text is None:
        return ""
    lines = text.rstrip("\n").splitlines()[-MAX_EXCERPT_LINES:]
    shown = "\n".join(lines)
    if len(shown) > MAX_EXCERPT_CHARS:
        shown = "…" + shown[-MAX_EXCERPT_CHARS:]
    return shown


def section_excerpt(run_dir: Path, digest: str | None, names: Sequence[str]) -> str:
    """The named facts sections of a stored facts output (each bounded, cut ones marked);
    "" where the output is absent or holds none of them."""
    text = read_output(run_dir, digest or "")
    if text is None or not names:
        return ""
    found = split_sections(text)
    parts = []
    for name in names:
        section = found.get(name)
        if section is None:
            continue
        lines = section.text.splitlines()
        shown = "\n".join(lines[:MAX_EXCERPT_LINES])
        if len(lines) > MAX_EXCERPT_LINES:
            shown += f"\n… {len(lines) - MAX_EXCERPT_LINES} more line(s)"
        if len(shown) > MAX_EXCERPT_CHARS:
            shown = shown[:MAX_EXCERPT_CHARS] + "…"
        status = "cut short" if section.status is None else f"exit {section.status}"
        parts.append(f"[{name}] ({status})\n{shown}")
    return "\n\n".join(parts)


def output_link(run_dir: Path, digest: str | None) -> str:
    """`outputs/<digest>.txt`, relative to the certificate, where that file exists."""
    if not digest or read_output(run_dir, digest) is None:
        return ""
    return f"{OUTPUTS_DIR}/{digest}.txt"


def _shown(
    row: RequirementRow, records: Sequence[CheckRecord], run_date: date
) -> tuple[list[CheckRecord], int]:
    mine = [r for r in records if r.check_id == row.check_id]
    if row.verdict in BAD:
        bad = [r for r in mine if effective_verdict(r, run_date) in BAD]
        return bad[:MAX_EVIDENCE_RECORDS], max(0, len(bad) - MAX_EVIDENCE_RECORDS)
    judged = [r for r in mine if effective_verdict(r, run_date) != "skipped"]
    worst_first = sorted(judged, key=lambda r: r.subject != row.worst_subject)
    return worst_first[:MAX_PASSING_RECORDS], max(0, len(judged) - MAX_PASSING_RECORDS)


def evidence_sections(
    run_dir: Path, records: Sequence[CheckRecord], rows: Sequence[RequirementRow], run_date: date
) -> list[dict[str, Any]]:
    """One section per requirement that judged anything: `open` when it did not pass."""
    sections = []
    for row in rows:
        if row.verdict in ("skipped", "not_run"):
            continue
        shown, more = _shown(row, records, run_date)
        if not shown:
            continue
        items = [
            {
                "record": record,
                "verdict": effective_verdict(record, run_date),
                "commands": [
                    {
                        "command": c,
                        "excerpt": section_excerpt(run_dir, c.output_digest, record.sections)
                        or excerpt(run_dir, c.output_digest),
                        "link": output_link(run_dir, c.output_digest),
                    }
                    for c in record.commands[:MAX_COMMANDS]
                ],
                "more_commands": max(0, len(record.commands) - MAX_COMMANDS),
            }
            for record in shown
        ]
        sections.append({"row": row, "items": items, "more": more, "open": row.verdict in BAD})
    return sections
