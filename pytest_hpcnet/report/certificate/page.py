"""The handover certificate: `certificate.json` (facts) and `certificate.html` (the page).

The page is a pure function of the facts and the bundle's evidence (`render_html`),
so `verify.verify` can re-render it and detect edits. It is self-contained: inline
CSS and inline SVG, no scripts (the facts are embedded as inert JSON data).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment
from markupsafe import Markup
from pydantic import BaseModel, ConfigDict, Field

from pytest_hpcnet import __version__
from pytest_hpcnet.inventory.models import Waiver
from pytest_hpcnet.redact import redact
from pytest_hpcnet.report.burnin_summary import clock as burnin_clock
from pytest_hpcnet.report.certificate.burnin import burnin_overview
from pytest_hpcnet.report.certificate.burnin_timeline import burnin_section
from pytest_hpcnet.report.certificate.evidence import evidence_sections
from pytest_hpcnet.report.certificate.format import (
    counted,
    format_margin,
    format_threshold,
    format_value,
    pair_nodes,
)
from pytest_hpcnet.report.certificate.gpu import gpu_load_section, gpu_section
from pytest_hpcnet.report.certificate.header import (
    LAB_NOTICE,
    certified_verdict,
    run_facts,
    scope_line,
    unsigned_evidence_line,
    verdict_reasons,
)
from pytest_hpcnet.report.certificate.node_facts import (
    FACT_TITLES,
    NODE_TITLES,
    node_facts,
    node_groups,
)
from pytest_hpcnet.report.certificate.rows import (  # noqa: F401 - re-exported
    DEFAULT_REQUIREMENTS,
    UNGOOD,
    NodeInfo,
    NodeRow,
    RequirementRow,
    RequirementSpec,
    WaiverRow,
    anchor_for,
    fill_planned_bounds,
    fill_threshold_sources,
    node_rows,
    requirement_rows,
    waiver_rows,
)
from pytest_hpcnet.report.certificate.summary import (
    ScopeGroup,
    excluded_groups,
    failing_pairs,
    findings,
    name_list,
    scope_groups,
    where,
)
from pytest_hpcnet.report.certificate.versions import (
    ToolVersions,
    describe_nodes,
    manifest,
    tool_commit,
    version_rows,
    versions_table,
)
from pytest_hpcnet.report.evidence import (
    INVENTORY_COPY,
    RunSummary,
    _write_atomic,
    count_verdicts,
    overall_verdict,
    read_records,
    read_summary,
    redact_data,
    run_date_of,
    utc_now,
    write_inventory_copy,
)
from pytest_hpcnet.report.heatmap import (
    MAX_HEATMAP_NODES,
    headline_metric,
    heatmap_svg,
    legend_html,
    worst_pairs,
)
from pytest_hpcnet.report.records import CheckRecord, RunScope, ScopeEntry
from pytest_hpcnet.report.signing import (
    CERTIFICATE_HTML,
    CERTIFICATE_JSON,
    DIGEST_KEY,
    bundle_manifest,
    compute_digest,
)
from pytest_hpcnet.report.templates import page_environment

CERTIFICATE_FORMAT = "hpcnet-certificate/1"
EVIDENCE_HTML = "evidence.html"
"""The evidence appendix: a file of the bundle, so the digest (and the signature) cover it."""
#: The rows each list of the first two A4 pages shows at most, and at least while rows are
#: cut to fit the page's budget: `PAGE_ROWS` less the requirement table's rows, never below
#: `ROW_BUDGET`; the rest is in the appendix, counted.
ROW_CAPS: dict[str, tuple[int, int]] = {
    "found": (10, 3),
    "pairs": (4, 2),
    "incomplete": (6, 1),
    "excluded": (5, 1),
    "versions": (4, 1),
    "node_groups": (3, 1),
    "burnin": (6, 1),
}
#: The failures a waiver covered that the signed pages name (the rest: counted, in the appendix).
WAIVER_COVERED_SHOWN = 2
ROW_BUDGET = 10
PAGE_ROWS = 38
#: The requirement rows that failed (or were not measured) the signed pages show one by one;
#: past it the rest are named on one line (each with its own row in the appendix), so a run
#: that failed nearly everything still prints on two pages.
FAILING_ROWS_SHOWN = 30


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
    operator: str = ""  # the person who ran it ("" when none was named)
    login: str = ""  # the controller's user@host: where it ran, not who answers for it
    inventory_copy: str = ""  # the inventory's text, put in the bundle redacted
    waivers: list[Waiver] = Field(default_factory=list)  # the inventory's, each listed once
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
    """Name, version and (where known) git commit of what renders the certificate."""
    return {"name": "pytest_hpcnet", "version": __version__, "commit": tool_commit()}


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
    inventory_names = [n.name for n in ctx.nodes]
    for row in rows:
        row.where = where(records, row, run_date, inventory_names)
    header = run_facts(summary)
    fill_planned_bounds(rows, getattr(summary, "bounds", None) or {})
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
        "login": ctx.login,
        "inventory_copy": INVENTORY_COPY if (root / INVENTORY_COPY).is_file() else "",
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
        "manifest": manifest(records).model_dump(mode="json"),
        "node_facts": [
            f.model_dump(mode="json")
            for f in node_facts(records, names, {n.name: n.instance_type for n in ctx.nodes})
        ],
        "waivers": [w.model_dump(mode="json") for w in waiver_rows(records, run_date, ctx.waivers)],
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
            "names": name_list,
            "threshold": format_threshold,
            "count": counted,
            "unsigned_evidence": unsigned_evidence_line,
            "burnin_seconds": _format_seconds,
        },
        {"fact_titles": FACT_TITLES, "lab_notice": LAB_NOTICE, "node_titles": NODE_TITLES},
    )


def _format_seconds(value: float | None) -> str:
    """`86400 s` as `86400 s (24h00m00s)`; "—" for None."""
    return "—" if value is None else f"{value:g} s ({burnin_clock(value)})"


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


def fold_failing_rows(
    rows: Sequence[RequirementRow], shown: int
) -> tuple[list[RequirementRow], list[RequirementRow]]:
    """The requirement rows the page lists one by one, and the failed or unmeasured ones past
    the first `shown` of them (named together on one line; none when they all fit)."""
    ungood = [r for r in rows if r.verdict in UNGOOD]
    if len(ungood) <= shown:
        return list(rows), []
    folded = {id(r) for r in ungood[shown:]}
    return [r for r in rows if id(r) not in folded], ungood[shown:]


def fit_rows(lists: Mapping[str, Sequence[Any]], budget: int = ROW_BUDGET) -> dict[str, Any]:
    """Each list as `{"shown", "more"}`: at most its cap (`ROW_CAPS`), and while the rows
    shown exceed `budget`, one fewer for the longest list still above its floor."""
    limits = {name: min(len(items), ROW_CAPS[name][0]) for name, items in lists.items()}
    while sum(limits.values()) > budget:
        above = [name for name in limits if limits[name] > ROW_CAPS[name][1]]
        if not above:
            break
        longest = max(above, key=lambda name: (limits[name], name))
        limits[longest] -= 1
    return {
        name: {"shown": list(items[: limits[name]]), "more": len(items) - limits[name]}
        for name, items in lists.items()
    }


LEGACY_WAIVER = {"check": "", "check_id": "", "expired": False, "covered": [], "note": ""}


def waiver_groups(waivers: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The waivers as the signed pages list them: each once, those granted by the same
    person for the same reason until the same day sharing a row (their checks listed,
    what each covered named by its check)."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for found in waivers:
        waiver = {**LEGACY_WAIVER, **found}  # a bundle rendered before `covered` was recorded
        waiver["check"] = waiver["check"] or waiver["check_id"]
        key = (waiver["reason"], waiver["by"], waiver["expires"], waiver["expired"])
        group = groups.setdefault(
            key,
            {
                "checks": [],
                "reason": waiver["reason"],
                "by": waiver["by"],
                "expires": waiver["expires"],
                "expired": waiver["expired"],
                "covered": [],
                "waived": 0,
                "notes": [],
            },
        )
        group["checks"].append(waiver["check"])
        group["waived"] += len(waiver["covered"]) if waiver["applied"] else 0
        group["covered"].append((waiver["check"], waiver["covered"]))
        if waiver["note"] and not waiver["expired"] and waiver["note"] not in group["notes"]:
            group["notes"].append(waiver["note"])
    for group in groups.values():
        alone = len(group["checks"]) == 1
        group["covered"] = [
            item if alone else f"{check.split('[', 1)[0]} {item}"
            for check, items in group["covered"]
            for item in items
        ]
    return list(groups.values())


def _scope_entries(facts: Mapping[str, Any], key: str) -> list[ScopeGroup]:
    return scope_groups(ScopeEntry.model_validate(e) for e in facts["scope"].get(key, []))


def _needed(facts: Mapping[str, Any], incomplete: Sequence[ScopeGroup]) -> list[str]:
    """What a run that is not ACCEPTED needs before anyone can accept the cluster."""
    steps = []
    if not facts["scope"].get("handover", True):
        steps.append("run the whole suite (no -m, -k or test selection): a handover run")
    if facts["counts"].get("fail"):
        steps.append(
            "fix what failed (listed above, by node, device and GPU) and run again; or, for a "
            "known exception, add a waiver with its reason, grantor and expiry to the inventory"
        )
    if facts["unreachable_nodes"]:
        steps.append("reach " + name_list(facts["unreachable_nodes"]) + " over SSH and run again")
    keys = sorted({g.key for g in incomplete if g.key})
    if keys:
        steps.append("set " + ", ".join(keys) + " in the inventory (no bound: nothing to judge)")
    if incomplete or facts["counts"].get("not_measured") or facts["counts"].get("error"):
        steps.append(
            "measure what was not measured (listed under Scope; no waiver covers it) and run again"
        )
    if not steps:
        steps.append("run the whole suite again to completion")
    return steps


def _matrices(
    records: Sequence[CheckRecord], node_order: Sequence[str], suspects: Sequence[str], on: date
) -> list[dict[str, Any]]:
    """Per pair check: the heat map where it is legible, else its worst pairs."""
    found = []
    for check_id in sorted({r.check_id for r in records if r.kind == "pair"}):
        pairs = [r for r in records if r.check_id == check_id and r.kind == "pair"]
        metric = headline_metric(pairs)
        if metric is None:
            continue
        unit = next((m.unit for r in pairs for m in r.measured if m.name == metric), "")
        nodes = {n for r in pairs for n in (pair_nodes(r.subject) or ())}
        entry: dict[str, Any] = {
            "check_id": check_id,
            "metric": metric,
            "unit": unit,
            "nodes": len(nodes),
            "svg": None,
            "worst": [],
        }
        if len(nodes) <= MAX_HEATMAP_NODES:
            entry["svg"] = heatmap_svg(check_id, records, node_order, suspects, on)
        else:
            entry["worst"] = worst_pairs(pairs, metric, on)
        if entry["svg"] is not None or entry["worst"]:
            found.append(entry)
    return found


def _page_context(root: Path, facts: Mapping[str, Any]) -> dict[str, Any]:
    records = read_records(root)
    on = date.fromisoformat(facts["run_date"])
    rows = [RequirementRow.model_validate(r) for r in facts["requirements"]]
    order = [r.check_id for r in rows]
    incomplete = _scope_entries(facts, "incomplete")
    return {
        "records": records,
        "run_date": on,
        "facts": facts,
        "rows": rows,
        "found": findings(records, on, order),
        "pairs": failing_pairs(records, on),
        "incomplete": incomplete,
        "excluded": excluded_groups(
            ScopeEntry.model_validate(e) for e in facts["scope"].get("excluded", [])
        ),
        "version_rows": version_rows(
            [ToolVersions.model_validate(t) for t in facts.get("versions", [])]
        ),
        "needed": _needed(facts, incomplete),
        "appendix": EVIDENCE_HTML,
        "all_nodes": [n["name"] for n in facts["nodes"]],
        "burnin": burnin_overview(records, on),
    }


def render_evidence(run_dir: str | os.PathLike[str], facts: Mapping[str, Any]) -> str:
    """The evidence appendix (`evidence.html`) for these facts (deterministic); rendered
    before the bundle's digest, which covers it."""
    root = Path(run_dir)
    page = _page_context(root, facts)
    records, on = page["records"], page["run_date"]
    node_order = [n["name"] for n in facts["nodes"]]
    suspects = [n["name"] for n in facts["nodes"] if n["suspect"]]
    html = (
        _environment()
        .get_template("evidence.html.j2")
        .render(
            **{k: v for k, v in page.items() if k not in ("records", "run_date", "burnin")},
            matrices=_matrices(records, node_order, suspects, on),
            sections=evidence_sections(root, records, page["rows"], on),
            legend=legend_html(),
            gpu=gpu_section(records),
            gpu_load=gpu_load_section(records),
            burnin=burnin_section(root, records, on),
        )
    )
    return redact(html)


def render_html(run_dir: str | os.PathLike[str], facts: Mapping[str, Any]) -> str:
    """The certificate page for these facts and the bundle's evidence (deterministic): the
    document a person signs, on at most two A4 pages whatever the cluster size."""
    root = Path(run_dir)
    page = _page_context(root, facts)
    pair_suspects = sorted({n for p in page["pairs"] for n in p.suspects})
    rows, folded = fold_failing_rows(page["rows"], FAILING_ROWS_SHOWN)
    judged = sum(r.verdict not in ("skipped", "not_run") for r in rows) + bool(folded)
    waivers = waiver_groups(facts.get("waivers", []))
    html = (
        _environment()
        .get_template("certificate.html.j2")
        .render(
            facts=facts,
            rows=rows,
            folded_rows=folded,
            **fit_rows(
                {
                    "found": page["found"],
                    "pairs": page["pairs"],
                    "incomplete": page["incomplete"],
                    "excluded": page["excluded"],
                    "versions": page["version_rows"],
                    "node_groups": node_groups(facts.get("node_facts", [])),
                    "burnin": (page["burnin"] or {}).get("rows", []),
                },
                max(ROW_BUDGET, PAGE_ROWS - judged) - len(waivers),
            ),
            burnin_run=page["burnin"],
            waivers=waivers,
            covered_shown=WAIVER_COVERED_SHOWN,
            pair_suspects=pair_suspects,
            needed=page["needed"],
            appendix=EVIDENCE_HTML,
            all_nodes=page["all_nodes"],
            appendix_sha=facts.get("evidence_files", {}).get(EVIDENCE_HTML, ""),
            facts_json=_facts_script(facts),
            digest=facts.get(DIGEST_KEY, ""),
        )
    )
    return redact(html)


def render_certificate(
    run_dir: str | os.PathLike[str], context: CertificateContext | Mapping[str, Any] | None = None
) -> Path:
    """Write `evidence.html` (the appendix, covered by the digest), `certificate.json` and
    `certificate.html` for a closed (or interrupted) run; return the page's path. Sign
    afterwards; any later change to the bundle breaks it."""
    root = Path(run_dir)
    ctx = _as_context(context)
    if ctx.inventory_copy:
        write_inventory_copy(root, ctx.inventory_copy)
    facts = build_facts(root, ctx)
    _write_atomic(root / EVIDENCE_HTML, render_evidence(root, facts).encode("utf-8"))
    facts["evidence_files"] = bundle_manifest(root)
    facts[DIGEST_KEY] = compute_digest(facts["evidence_files"], facts)
    json_text = json.dumps(facts, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    _write_atomic(root / CERTIFICATE_JSON, json_text.encode("utf-8"))
    facts = json.loads(json_text)  # render from exactly what verify will read back
    page = root / CERTIFICATE_HTML
    _write_atomic(page, render_html(root, facts).encode("utf-8"))
    return page
