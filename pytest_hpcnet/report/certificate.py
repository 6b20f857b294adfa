"""The handover certificate: `certificate.json` (facts) and `certificate.html` (the page).

The page is a pure function of the facts and the bundle's evidence (`render_html`),
so `verify.verify` can re-render it and detect edits. It is self-contained: inline
CSS and inline SVG, no scripts (the facts are embedded as inert JSON data).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping
from datetime import date, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment
from markupsafe import Markup
from pydantic import BaseModel, ConfigDict, Field

from pytest_hpcnet import __version__
from pytest_hpcnet.redact import redact
from pytest_hpcnet.report.certificate_evidence import evidence_sections
from pytest_hpcnet.report.certificate_format import (
    format_margin,
    format_value,
)
from pytest_hpcnet.report.certificate_gpu import gpu_load_section, gpu_section
from pytest_hpcnet.report.certificate_header import (
    LAB_NOTICE,
    certified_verdict,
    run_facts,
    scope_line,
    verdict_reasons,
)
from pytest_hpcnet.report.certificate_node_facts import FACT_TITLES, node_facts
from pytest_hpcnet.report.certificate_rows import (  # noqa: F401 - re-exported
    DEFAULT_REQUIREMENTS,
    NodeInfo,
    NodeRow,
    RequirementRow,
    RequirementSpec,
    WaiverRow,
    anchor_for,
    fill_threshold_sources,
    node_rows,
    requirement_rows,
    waiver_rows,
)
from pytest_hpcnet.report.certificate_versions import (
    ToolVersions,
    describe_nodes,
    version_rows,
    versions_table,
)
from pytest_hpcnet.report.evidence import (
    RunSummary,
    _write_atomic,
    count_verdicts,
    overall_verdict,
    read_records,
    read_summary,
    redact_data,
    run_date_of,
    utc_now,
)
from pytest_hpcnet.report.heatmap import headline_metric, heatmap_svg, legend_html
from pytest_hpcnet.report.records import RunScope
from pytest_hpcnet.report.signing import (
    CERTIFICATE_HTML,
    CERTIFICATE_JSON,
    DIGEST_KEY,
    bundle_manifest,
    compute_digest,
)
from pytest_hpcnet.report.templates import page_environment

CERTIFICATE_FORMAT = "hpcnet-certificate/1"


class Contact(BaseModel):
    """A person who signs the handover."""

    name: str
    role: str = ""
    organisation: str = ""


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
    signer: dict[str, str] | None = None  # `signing.signer_display` of the key to sign with
    requirements: list[RequirementSpec] = Field(
        default_factory=lambda: [
            RequirementSpec(check_id=c, requirement=r) for c, r in DEFAULT_REQUIREMENTS
        ]
    )


def generator_info() -> dict[str, str]:
    """Name and version of what renders the certificate."""
    return {"name": "pytest_hpcnet", "version": __version__}


def _as_context(context: CertificateContext | Mapping[str, Any] | None) -> CertificateContext:
    if isinstance(context, CertificateContext):
        return context
    return CertificateContext.model_validate(dict(context or {}))


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
    header = run_facts(summary)
    threshold_sources = fill_threshold_sources(rows, header["profile_sources"])
    nodes = node_rows(records, ctx.nodes, unreachable, run_date)
    names = [n.name for n in nodes]
    scope = summary.scope if summary is not None else RunScope()
    verdict = certified_verdict(
        overall_verdict(records, unreachable, run_date, interrupted, summary and summary.scope),
        summary,
    )
    facts: dict[str, Any] = {
        "format": CERTIFICATE_FORMAT,
        "generator": generator_info(),
        "run_id": (summary.run_id if summary else root.name),
        "generated_at": utc_now().isoformat(),
        "verdict": verdict,
        "verdict_reasons": verdict_reasons(counts, unreachable, interrupted, scope),
        "scope_line": scope_line(verdict, scope),
        **header,
        "threshold_sources": threshold_sources,
        "signer": ctx.signer,
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
        "versions": [t.model_dump(mode="json") for t in versions_table(records, names)],
        "node_facts": [
            f.model_dump(mode="json")
            for f in node_facts(records, names, {n.name: n.instance_type for n in ctx.nodes})
        ],
        "waivers": [w.model_dump(mode="json") for w in waiver_rows(records, run_date)],
        "contacts": [c.model_dump(mode="json") for c in ctx.contacts],
    }
    return json.loads(json.dumps(redact_data(facts)))


def _environment() -> Environment:
    return page_environment(
        {
            "value": format_value,
            "margin": format_margin,
            "when": _format_when,
            "nodes": describe_nodes,
        },
        {"fact_titles": FACT_TITLES, "lab_notice": LAB_NOTICE},
    )


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
        sections=evidence_sections(root, records, rows, run_date),
        facts_json=_facts_script(facts),
        legend=legend_html(),
        version_rows=version_rows(
            [ToolVersions.model_validate(t) for t in facts.get("versions", [])]
        ),
        digest=facts.get(DIGEST_KEY, ""),
        gpu=gpu_section(records),
        gpu_load=gpu_load_section(records),
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
