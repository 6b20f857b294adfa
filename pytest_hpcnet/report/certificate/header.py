"""What the certificate's header says: the verdict and why, the scope (handover or partial,
excluded and not measured), the profile, whether the evidence is from the lab."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_hpcnet.report.certificate.format import counted
from pytest_hpcnet.report.certificate.summary import name_list
from pytest_hpcnet.report.evidence import RunSummary
from pytest_hpcnet.report.records import RunScope

#: Worse verdicts rank higher; the certificate shows the worst of what it derives and what
#: the run's summary decided.
_RANK = {"ACCEPTED": 0, "PASSED": 1, "INCOMPLETE": 2, "REJECTED": 3}
LAB_NOTICE = (
    "LAB RUN — emulated nodes and tools (pytest_hpcnet's embedded lab). "
    "This is not a certificate of a real cluster."
)


def certified_verdict(derived: str, summary: RunSummary | None) -> str:
    """The worst of the verdict derived from the records and the summary's; a partial run
    never reads ACCEPTED, a run with anything in scope left unmeasured never passes."""
    verdict = derived
    if summary is not None and _RANK.get(summary.verdict, 2) > _RANK.get(verdict, 2):
        verdict = summary.verdict
    scope = summary.scope if summary is not None else RunScope()
    if verdict in ("ACCEPTED", "PASSED") and scope.incomplete:
        return "INCOMPLETE"
    if verdict == "ACCEPTED" and not scope.handover:
        return "PASSED"
    return verdict


def scope_line(verdict: str, scope: RunScope) -> str:
    """`handover` for a handover run; for a partial one what it covered, and that it is not
    a handover certificate."""
    if scope.handover:
        return "handover (every requirement selected)"
    label = scope.label or "partial run"
    selection = f" ({scope.selection})" if scope.selection else ""
    outcome = "passed" if verdict in ("ACCEPTED", "PASSED") else f"— {verdict}"
    return f"{label}{selection} {outcome} — not a handover certificate"


def verdict_reasons(
    counts: Mapping[str, int], unreachable: Sequence[str], interrupted: bool, scope: RunScope
) -> list[str]:
    """One line per reason the verdict is not ACCEPTED (empty when it is)."""
    reasons = []
    if interrupted:
        reasons.append("the run did not finish")
    if unreachable:
        reasons.append("unreachable: " + name_list(unreachable))
    if counts.get("not_measured"):
        reasons.append(counted(counts["not_measured"], "checks") + " not measured")
    if counts.get("error"):
        reasons.append(counted(counts["error"], "checks") + " could not be completed")
    if counts.get("fail"):
        reasons.append(counted(counts["fail"], "checks") + " failed")
    if scope.incomplete:
        names = sorted({entry.check_id for entry in scope.incomplete})
        reasons.append("in scope but not measured: " + name_list(names, noun="checks"))
    if not scope.handover:
        reasons.append("partial run: not a handover certificate")
    if not (counts.get("pass") or counts.get("fail") or counts.get("waived")):
        reasons.append("no check was judged")
    return reasons


def unsigned_inputs(summary: RunSummary | None) -> list[str]:
    """The partition runs whose evidence was merged unsigned, as the summary names them."""
    extra = (summary.model_extra or {}) if summary is not None else {}
    return [str(run) for run in extra.get("unsigned_inputs") or []]


def unsigned_evidence_line(run_ids: Sequence[str]) -> str:
    """What the certificate and `hpcnet verify` say beside a signature over evidence merged
    unsigned."""
    return (
        f"the evidence of {', '.join(run_ids)} was not signed (merged with --allow-unsigned): "
        "the signature covers the merge, not who produced that evidence"
    )


def run_facts(summary: RunSummary | None) -> dict[str, Any]:
    """The summary's profile, lab marking and scope, as certificate facts."""
    scope = summary.scope if summary is not None else RunScope()
    return {
        "profile": summary.profile if summary is not None else "",
        "profile_sources": dict(summary.profile_sources) if summary is not None else {},
        "lab": bool(summary.lab) if summary is not None else False,
        "scope": scope.model_dump(mode="json"),
        "unsigned_inputs": unsigned_inputs(summary),
        **_history(summary),
    }


def _history(summary: RunSummary | None) -> dict[str, str]:
    """The baseline `--hpcnet-baseline` chose and the trends page beside the run, if any."""
    extra = (summary.model_extra or {}) if summary is not None else {}
    trends = str(extra.get("trends") or "")
    safe = trends if trends and "/" not in trends and not trends.startswith(".") else ""
    return {"baseline_note": str(extra.get("baseline") or ""), "trends": safe}
