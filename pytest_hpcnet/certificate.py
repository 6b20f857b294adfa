"""The handover certificate: `certificate.json` (facts) and `certificate.html` (the page).

The page is a pure function of the facts and the bundle's evidence (`render_html`),
so `signing.verify` can re-render it and detect edits. It is self-contained: inline
CSS and inline SVG, no scripts (the facts are embedded as inert JSON data).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from pydantic import BaseModel, ConfigDict, Field

from pytest_hpcnet import __version__
from pytest_hpcnet.certificate_format import (
    format_margin,
    format_threshold,
    format_value,
    headroom,
    pair_nodes,
)
from pytest_hpcnet.evidence import (
    CheckRecord,
    Measurement,
    RunSummary,
    _write_atomic,
    count_verdicts,
    effective_verdict,
    overall_verdict,
    read_output,
    read_records,
    read_summary,
    redact_data,
    run_date_of,
    utc_now,
)
from pytest_hpcnet.heatmap import headline_metric, heatmap_svg
from pytest_hpcnet.redact import redact
from pytest_hpcnet.signing import (
    CERTIFICATE_HTML,
    CERTIFICATE_JSON,
    DIGEST_KEY,
    bundle_manifest,
    compute_digest,
)

CERTIFICATE_FORMAT = "hpcnet-certificate/1"
MAX_EVIDENCE_RECORDS = 10
MAX_EXCERPT_LINES = 30
MAX_EXCERPT_CHARS = 3000

#: The requirements a certificate lists, in order; those without records show "not run".
DEFAULT_REQUIREMENTS: tuple[tuple[str, str], ...] = (
    ("erdma", "eRDMA devices"),
    ("mtu", "Jumbo MTU"),
    ("path_mtu", "Path MTU"),
    ("security_group", "Security group"),
    ("acl", "Network ACL"),
    ("cloud_audit", "Cloud control plane"),
    ("placement", "Placement"),
    ("tuning", "Host tuning"),
    ("ib_write_bw", "RDMA write bandwidth (ib_write_bw)"),
    ("ib_write_lat", "RDMA write latency (ib_write_lat)"),
    ("nccl_busbw", "NCCL bus bandwidth"),
    ("cpfs", "CPFS"),
)

_VERDICT_ORDER = {"fail": 0, "error": 1, "waived": 2, "pass": 3, "skipped": 4, "not_run": 5}


class NodeInfo(BaseModel):
    """A node of the inventory as the certificate names it."""

    name: str
    instance_type: str = ""


class Contact(BaseModel):
    """A person who signs the handover."""

    name: str
    role: str = ""
    organisation: str = ""


class RequirementSpec(BaseModel):
    """A requirement the certificate lists: the check id and its human name."""

    check_id: str
    requirement: str


class CertificateContext(BaseModel):
    """What the certificate says about the cluster and the people, beyond the evidence."""

    model_config = ConfigDict(extra="ignore")

    cluster: str = ""
    region: str = ""
    vpc_id: str = ""
    vswitch_id: str = ""
    zone: str = ""
    nodes: list[NodeInfo] = Field(default_factory=list)
    operator: str = ""
    contacts: list[Contact] = Field(default_factory=list)
    inventory_sha256: str = ""
    expectations_sha256: str = ""
    unreachable_nodes: list[str] = Field(default_factory=list)
    title: str = "GPU cluster network acceptance"
    requirements: list[RequirementSpec] = Field(
        default_factory=lambda: [
            RequirementSpec(check_id=c, requirement=r) for c, r in DEFAULT_REQUIREMENTS
        ]
    )


class RequirementRow(BaseModel):
    """One row of the requirement table."""

    check_id: str
    requirement: str
    verdict: str
    threshold: str = ""
    threshold_source: str = ""
    measurement: str = ""
    unit: str = ""
    worst_value: float | str | None = None
    worst_subject: str = ""
    margin: float | None = Field(
        default=None, description="headroom as a fraction of the threshold; < 0 misses it"
    )
    subjects: int = 0
    subjects_failed: int = 0
    message: str = ""
    anchor: str = ""


class NodeRow(BaseModel):
    """One row of the per-node table."""

    name: str
    instance_type: str = ""
    reached: bool = True
    passed: int = 0
    failed: int = 0
    errors: int = 0
    suspect: bool = False


class WaiverRow(BaseModel):
    """One waiver of the run and whether it applied on the run date."""

    check_id: str
    subject: str
    reason: str
    by: str
    expires: str = ""
    applied: bool = True


def generator_info() -> dict[str, str]:
    """Name and version of what renders the certificate."""
    return {"name": "pytest_hpcnet", "version": __version__}


def anchor_for(check_id: str) -> str:
    """The HTML id of a requirement's evidence section: `ev-<check_id>`."""
    return "ev-" + re.sub(r"[^A-Za-z0-9_-]", "-", check_id)


def _row_verdict(verdicts: Iterable[str]) -> str:
    seen = set(verdicts)
    for verdict in ("fail", "error", "waived", "pass"):
        if verdict in seen:
            return verdict
    return "skipped"


def _worst(records: Sequence[CheckRecord], run_date: date) -> tuple[Measurement, str] | None:
    """The measurement (and its subject) with the least headroom; for `==`/`in` checks
    the first measurement of a failing record, else the first one."""
    numeric: list[tuple[float, int, Measurement, str]] = []
    other: list[tuple[int, Measurement, str]] = []
    order = 0
    for record in records:
        failing = effective_verdict(record, run_date) in ("fail", "waived")
        for measurement in record.measured:
            order += 1
            margin = headroom(measurement)
            if margin is not None:
                numeric.append((margin, order, measurement, record.subject))
            elif measurement.comparison is not None:
                other.append((0 if failing else 1, order, measurement, record.subject))
    if numeric:
        _, _, measurement, subject = min(numeric, key=lambda item: (item[0], item[1]))
        return measurement, subject
    if other:
        _, _, measurement, subject = min(other, key=lambda item: (item[0], item[1]))
        return measurement, subject
    return None


def requirement_rows(
    records: Iterable[CheckRecord],
    run_date: date | None = None,
    requirements: Sequence[RequirementSpec] | None = None,
) -> list[RequirementRow]:
    """One row per requirement: failing rows first, requirements that did not run last.

    The worst value is the one with the least headroom (min for `>=`, max for `<=`);
    margin is that headroom as a fraction of the threshold.
    """
    run_date = run_date or utc_now().date()
    specs = (
        list(requirements)
        if requirements is not None
        else [RequirementSpec(check_id=c, requirement=r) for c, r in DEFAULT_REQUIREMENTS]
    )
    by_check: dict[str, list[CheckRecord]] = {}
    for record in records:
        by_check.setdefault(record.check_id, []).append(record)
    catalog_order = {spec.check_id: index for index, spec in enumerate(specs)}
    rows: list[RequirementRow] = []
    for check_id, group in by_check.items():
        verdicts = [effective_verdict(r, run_date) for r in group]
        verdict = _row_verdict(verdicts)
        failing = [r for r, v in zip(group, verdicts, strict=True) if v in ("fail", "error")]
        judged = [r for r, v in zip(group, verdicts, strict=True) if v != "skipped"]
        worst = _worst(judged or group, run_date)
        name = group[0].requirement or next(
            (s.requirement for s in specs if s.check_id == check_id), check_id
        )
        row = RequirementRow(
            check_id=check_id,
            requirement=name,
            verdict=verdict,
            subjects=len(group),
            subjects_failed=sum(v in ("fail", "error") for v in verdicts),
            message=(failing[0].message if failing else ""),
            anchor=anchor_for(check_id),
        )
        if worst is not None:
            measurement, subject = worst
            row.threshold = format_threshold(measurement)
            row.threshold_source = measurement.threshold_source
            row.measurement = measurement.name
            row.unit = measurement.unit
            row.worst_value = measurement.value
            row.worst_subject = subject
            row.margin = headroom(measurement)
        rows.append(row)
    ran = set(by_check)
    rows.extend(
        RequirementRow(check_id=s.check_id, requirement=s.requirement, verdict="not_run")
        for s in specs
        if s.check_id not in ran
    )
    return sorted(
        rows,
        key=lambda r: (
            _VERDICT_ORDER.get(r.verdict, 9),
            catalog_order.get(r.check_id, len(catalog_order)),
            r.check_id,
        ),
    )


def _record_nodes(record: CheckRecord) -> tuple[str, ...]:
    pair = pair_nodes(record.subject) if record.kind == "pair" else None
    if pair is not None:
        return pair
    return (record.subject,) if record.kind == "node" else ()


def node_rows(
    records: Sequence[CheckRecord],
    nodes: Sequence[NodeInfo],
    unreachable: Iterable[str],
    run_date: date,
) -> list[NodeRow]:
    """One row per node (inventory order, then any other node the evidence names)."""
    unreachable_set = set(unreachable)
    suspects = {node for record in records for node in record.suspect_nodes}
    rows = {n.name: NodeRow(name=n.name, instance_type=n.instance_type) for n in nodes}
    extra: set[str] = set(unreachable_set) | suspects
    for record in records:
        extra.update(_record_nodes(record))
    for name in sorted(extra - set(rows)):
        rows[name] = NodeRow(name=name)
    for record in records:
        verdict = effective_verdict(record, run_date)
        for name in _record_nodes(record):
            row = rows[name]
            if verdict in ("pass", "waived"):
                row.passed += 1
            elif verdict == "fail":
                row.failed += 1
            elif verdict == "error":
                row.errors += 1
    for row in rows.values():
        row.reached = row.name not in unreachable_set
        row.suspect = row.name in suspects
    return list(rows.values())


def waiver_rows(records: Iterable[CheckRecord], run_date: date) -> list[WaiverRow]:
    """Every waiver the evidence carries; expired ones are marked as not applied."""
    return [
        WaiverRow(
            check_id=r.check_id,
            subject=r.subject,
            reason=r.waiver.reason,
            by=r.waiver.by,
            expires=r.waiver.expires.isoformat() if r.waiver.expires else "",
            applied=r.waiver.applies_on(run_date),
        )
        for r in records
        if r.waiver is not None
    ]


def _excerpt(run_dir: Path, digest: str | None) -> str:
    text = read_output(run_dir, digest or "")
    if text is None:
        return ""
    lines = text.rstrip("\n").splitlines()[-MAX_EXCERPT_LINES:]
    excerpt = "\n".join(lines)
    if len(excerpt) > MAX_EXCERPT_CHARS:
        excerpt = "…" + excerpt[-MAX_EXCERPT_CHARS:]
    return excerpt


def _evidence_sections(
    run_dir: Path, records: Sequence[CheckRecord], rows: Sequence[RequirementRow], run_date: date
) -> list[dict[str, Any]]:
    sections = []
    for row in rows:
        if row.verdict not in ("fail", "error", "waived"):
            continue
        shown = [
            r
            for r in records
            if r.check_id == row.check_id
            and effective_verdict(r, run_date) in ("fail", "error", "waived")
        ]
        items = []
        for record in shown[:MAX_EVIDENCE_RECORDS]:
            items.append(
                {
                    "record": record,
                    "verdict": effective_verdict(record, run_date),
                    "commands": [
                        {"command": c, "excerpt": _excerpt(run_dir, c.output_digest)}
                        for c in record.commands[:3]
                    ],
                }
            )
        sections.append(
            {"row": row, "items": items, "more": max(0, len(shown) - MAX_EVIDENCE_RECORDS)}
        )
    return sections


def _as_context(context: CertificateContext | Mapping[str, Any] | None) -> CertificateContext:
    if isinstance(context, CertificateContext):
        return context
    return CertificateContext.model_validate(dict(context or {}))


def _verdict_reasons(
    counts: Mapping[str, int], unreachable: Sequence[str], interrupted: bool
) -> list[str]:
    reasons = []
    if interrupted:
        reasons.append("the run did not finish")
    if unreachable:
        reasons.append("unreachable: " + ", ".join(unreachable))
    if counts.get("error"):
        reasons.append(f"{counts['error']} check(s) could not be completed")
    if counts.get("fail"):
        reasons.append(f"{counts['fail']} check(s) failed")
    if not (counts.get("pass") or counts.get("fail") or counts.get("waived")):
        reasons.append("no check was judged")
    return reasons


def build_facts(
    run_dir: str | os.PathLike[str], context: CertificateContext | Mapping[str, Any] | None
) -> dict[str, Any]:
    """The certificate's machine-readable facts (without the digest), redacted."""
    root = Path(run_dir)
    ctx = _as_context(context)
    records = read_records(root)
    summary: RunSummary | None = read_summary(root)
    interrupted = summary is None or summary.interrupted
    run_date = run_date_of(summary, records)
    unreachable = sorted(
        set(ctx.unreachable_nodes) | set(summary.unreachable_nodes if summary else [])
    )
    counts = count_verdicts(records, run_date)
    starts = [r.started_at for r in records if r.started_at]
    ends = [r.ended_at for r in records if r.ended_at]
    started = (summary.started_at if summary else None) or (min(starts) if starts else None)
    ended = (summary.ended_at if summary else None) or (max(ends) if ends else None)
    rows = requirement_rows(records, run_date, ctx.requirements)
    nodes = node_rows(records, ctx.nodes, unreachable, run_date)
    facts: dict[str, Any] = {
        "format": CERTIFICATE_FORMAT,
        "generator": generator_info(),
        "run_id": (summary.run_id if summary else root.name),
        "generated_at": utc_now().isoformat(),
        "verdict": overall_verdict(records, unreachable, run_date, interrupted),
        "verdict_reasons": _verdict_reasons(counts, unreachable, interrupted),
        "title": ctx.title,
        "cluster": {
            "name": ctx.cluster or (summary.cluster if summary else ""),
            "region": ctx.region,
            "vpc_id": ctx.vpc_id,
            "vswitch_id": ctx.vswitch_id,
            "zone": ctx.zone,
        },
        "node_count": len(nodes),
        "instance_types": dict(
            sorted(Counter(n.instance_type for n in ctx.nodes if n.instance_type).items())
        ),
        "operator": ctx.operator,
        "started_at": started.isoformat() if isinstance(started, datetime) else None,
        "ended_at": ended.isoformat() if isinstance(ended, datetime) else None,
        "run_date": run_date.isoformat(),
        "inventory_sha256": ctx.inventory_sha256 or (summary.inventory_sha256 if summary else ""),
        "expectations_sha256": ctx.expectations_sha256
        or (summary.expectations_sha256 if summary else ""),
        "counts": counts,
        "unreachable_nodes": unreachable,
        "requirements": [r.model_dump(mode="json") for r in rows],
        "nodes": [n.model_dump(mode="json") for n in nodes],
        "waivers": [w.model_dump(mode="json") for w in waiver_rows(records, run_date)],
        "contacts": [c.model_dump(mode="json") for c in ctx.contacts],
    }
    return json.loads(json.dumps(redact_data(facts)))


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("pytest_hpcnet", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["value"] = format_value
    env.filters["margin"] = format_margin
    env.filters["when"] = _format_when
    return env


def _format_when(value: Any) -> str:
    if not value:
        return "—"
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    return f"{moment:%Y-%m-%d %H:%M:%S %Z}".strip()


def _facts_script(facts: Mapping[str, Any]) -> Markup:
    text = json.dumps(facts, sort_keys=True, ensure_ascii=False, indent=1)
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return Markup(text)


def render_html(run_dir: str | os.PathLike[str], facts: Mapping[str, Any]) -> str:
    """The certificate page for these facts and the bundle's evidence (deterministic)."""
    root = Path(run_dir)
    records = read_records(root)
    run_date = date.fromisoformat(facts["run_date"])
    rows = [RequirementRow.model_validate(r) for r in facts["requirements"]]
    node_order = [n["name"] for n in facts["nodes"]]
    suspects = [n["name"] for n in facts["nodes"] if n["suspect"]]
    pair_checks = sorted({r.check_id for r in records if r.kind == "pair"})
    heatmaps = []
    for check_id in pair_checks:
        svg = heatmap_svg(check_id, records, node_order, suspects, run_date)
        if svg is not None:
            metric = headline_metric(
                [r for r in records if r.check_id == check_id and r.kind == "pair"]
            )
            heatmaps.append({"check_id": check_id, "metric": metric, "svg": svg})
    template = _environment().get_template("certificate.html.j2")
    html = template.render(
        facts=facts,
        rows=rows,
        heatmaps=heatmaps,
        sections=_evidence_sections(root, records, rows, run_date),
        facts_json=_facts_script(facts),
        digest=facts.get(DIGEST_KEY, ""),
    )
    return redact(html)


def render_certificate(
    run_dir: str | os.PathLike[str], context: CertificateContext | Mapping[str, Any] | None = None
) -> Path:
    """Write `certificate.json` and `certificate.html` for a closed (or interrupted) run;
    return the page's path. Sign afterwards; any later change to the bundle breaks it."""
    root = Path(run_dir)
    facts = build_facts(root, context)
    facts["evidence_files"] = bundle_manifest(root)
    facts[DIGEST_KEY] = compute_digest(facts["evidence_files"], facts)
    json_text = json.dumps(facts, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    _write_atomic(root / CERTIFICATE_JSON, json_text.encode("utf-8"))
    facts = json.loads(json_text)  # render from exactly what verify will read back
    page = root / CERTIFICATE_HTML
    _write_atomic(page, render_html(root, facts).encode("utf-8"))
    return page
