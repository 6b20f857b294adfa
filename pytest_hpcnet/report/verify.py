"""`hpcnet verify`: recompute a bundle's digest and check it against the certificate
(facts, page, re-rendering) and the signature."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from pytest_hpcnet.report.certificate import (
    page as certificate,  # the page is a pure function of the facts
)
from pytest_hpcnet.report.certificate.header import unsigned_evidence_line, unsigned_inputs
from pytest_hpcnet.report.evidence import (
    EvidenceError,
    read_records,
    read_summary,
    run_date_of,
    sha256_file,
)
from pytest_hpcnet.report.records import RunSummary
from pytest_hpcnet.report.signing import (
    ALGORITHM,
    CERTIFICATE_HTML,
    DIGEST_KEY,
    SIGNATURE_FILE,
    PathLike,
    _signed_payload,
    bundle_digest,
    bundle_manifest,
    compute_digest,
    html_facts,
    key_fingerprint,
    load_public_key,
    read_facts,
)
from pytest_hpcnet.report.verdict import LAB_EVIDENCE, overall_verdict, scope_of, verdict_line


@dataclass
class VerifyResult:
    """The outcome of `verify`: `ok` only when `problems` is empty."""

    ok: bool
    digest: str
    signed: bool
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    key_fingerprint: str | None = None
    summary: RunSummary | None = None  # summary.json, its verdict recomputed from the evidence

    @property
    def unsigned_inputs(self) -> list[str]:
        """The runs a merged bundle took in unsigned (`hpcnet merge --allow-unsigned`)."""
        return unsigned_inputs(self.summary)

    @property
    def state(self) -> str:
        """`signed`, `unsigned`, or `signed; merged from unsigned evidence: <runs>`."""
        if not self.signed:
            return "unsigned"
        unsigned = self.unsigned_inputs
        if not unsigned:
            return "signed"
        return f"signed; merged from unsigned evidence: {', '.join(unsigned)}"


def _check_certificate(root: Path, digest: str, result: VerifyResult) -> dict[str, Any] | None:
    facts: dict[str, Any] | None = None
    try:
        facts = read_facts(root)
    except ValueError as exc:
        result.problems.append(f"certificate.json is unreadable: {exc}")
    else:
        if facts is None:
            result.problems.append("certificate.json is missing")
    if facts is not None and facts.get(DIGEST_KEY) != digest:
        result.problems.append(
            f"digest mismatch: certificate.json carries {facts.get(DIGEST_KEY)}, "
            f"bundle is {digest} (evidence or certificate facts changed)"
        )
        _explain_changes(root, facts, result)
    html_path = root / CERTIFICATE_HTML
    if not html_path.exists():
        result.problems.append("certificate.html is missing")
        return facts
    html = html_path.read_text(encoding="utf-8", errors="replace")
    try:
        embedded = html_facts(html)
    except ValueError:
        embedded = None
    if embedded is None:
        result.problems.append("certificate.html carries no readable facts")
    elif facts is not None and embedded != facts:
        result.problems.append("certificate.html facts differ from certificate.json")
    if digest not in html:
        result.problems.append("certificate.html does not show the bundle digest")
    if facts is not None and embedded == facts:
        _check_rendering(root, facts, html, result)
    return facts


def _explain_changes(root: Path, facts: dict[str, Any], result: VerifyResult) -> None:
    recorded = facts.get("evidence_files")
    if not isinstance(recorded, dict):
        return
    current = bundle_manifest(root)
    for path in sorted(set(recorded) | set(current)):
        if path not in current:
            result.problems.append(f"evidence file missing: {path}")
        elif path not in recorded:
            result.problems.append(f"evidence file added: {path}")
        elif recorded[path] != current[path]:
            result.problems.append(f"evidence file changed: {path}")


def _check_rendering(root: Path, facts: dict[str, Any], html: str, result: VerifyResult) -> None:
    generator = facts.get("generator", {})
    if generator.get("version") != certificate.generator_info()["version"]:
        result.notes.append(
            "certificate.html was rendered by another pytest_hpcnet version; "
            "its wording was not re-checked"
        )
        return
    try:
        expected = certificate.render_html(root, facts)
    except Exception as exc:  # a damaged bundle must give a problem, not a crash
        result.problems.append(f"certificate.html could not be re-rendered: {exc}")
        return
    if expected != html:
        result.problems.append("certificate.html was edited after rendering")


def _check_verdict(root: Path, result: VerifyResult) -> None:
    """Recompute the run's verdict and scope from its evidence with the one decision
    (`report.verdict`); summary.json must say the same."""
    try:
        summary = read_summary(root)
        records = read_records(root)
    except (EvidenceError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        result.problems.append(f"summary.json or evidence.jsonl is unreadable: {first}")
        return
    if summary is None:
        result.problems.append("summary.json is missing: the run never closed")
        return
    on = run_date_of(summary, records)
    scope = scope_of(records, summary.scope, on)
    verdict = overall_verdict(
        records, summary.unreachable_nodes, on, summary.interrupted, summary.scope
    )
    if verdict != summary.verdict:
        result.problems.append(
            f"verdict mismatch: summary.json says {summary.verdict}, the evidence gives {verdict}"
        )
    elif scope.incomplete != summary.scope.incomplete:
        result.problems.append("summary.json lists other unmeasured checks than the evidence")
    result.summary = summary.model_copy(update={"verdict": verdict, "scope": scope})


def verdict_lines(summary: RunSummary) -> list[str]:
    """What `hpcnet verify` prints about the verdict: the line, what was not measured, lab."""
    lines = [f"verdict: {verdict_line(summary)}"]
    lines += [f"  not measured: {e.check_id}: {e.reason}" for e in summary.scope.incomplete]
    lines += [f"  not in scope: {e.check_id}: {e.reason}" for e in summary.scope.excluded]
    unsigned = unsigned_inputs(summary)
    if unsigned:
        lines.append(f"  {unsigned_evidence_line(unsigned)}")
    if summary.lab:
        lines.append(LAB_EVIDENCE)
    return lines


def _check_signature(
    root: Path, digest: str, public_key_path: PathLike | None, result: VerifyResult
) -> None:
    path = root / SIGNATURE_FILE
    if not path.exists():
        if public_key_path is not None:
            result.problems.append("bundle is not signed, but a public key was given")
        else:
            result.notes.append("bundle is unsigned: its digest was checked, not its origin")
        return
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        signature = base64.b64decode(document["signature"], validate=True)
        embedded_key = Ed25519PublicKey.from_public_bytes(
            base64.b64decode(document["public_key"], validate=True)
        )
    except (ValueError, KeyError, TypeError) as exc:
        result.problems.append(f"signature.json is unreadable: {exc}")
        return
    if document.get("algorithm") != ALGORITHM:
        result.problems.append(f"unsupported signature algorithm {document.get('algorithm')!r}")
        return
    if document.get("digest") != digest:
        result.problems.append(
            f"digest mismatch: signature.json covers {document.get('digest')}, bundle is {digest}"
        )
    html_path = root / CERTIFICATE_HTML
    if html_path.exists() and document.get("certificate_html_sha256") != sha256_file(html_path):
        result.problems.append("certificate.html changed after signing")
    if public_key_path is not None:
        key = load_public_key(public_key_path)
    else:
        key = embedded_key
        result.notes.append(
            "signature checked against the key embedded in the bundle; "
            "give the signer's public key to pin it"
        )
    result.key_fingerprint = key_fingerprint(key)
    if document.get("public_key_fingerprint") != result.key_fingerprint:
        result.problems.append(
            f"signed by key {document.get('public_key_fingerprint')}, "
            f"expected {result.key_fingerprint}"
        )
    try:
        key.verify(signature, _signed_payload(document))
    except InvalidSignature:
        result.problems.append("signature does not verify with the given key")
        return
    result.signed = True


def verify(run_dir: PathLike, public_key_path: PathLike | None = None) -> VerifyResult:
    """Recompute the digest and check it against certificate.json, certificate.html and
    signature.json; check the signature (against `public_key_path` when given)."""
    root = Path(run_dir)
    try:
        digest = bundle_digest(root)
    except ValueError:  # unreadable certificate.json: reported by _check_certificate
        digest = compute_digest(bundle_manifest(root), None)
    result = VerifyResult(ok=False, digest=digest, signed=False)
    _check_certificate(root, digest, result)
    _check_verdict(root, result)
    _check_signature(root, digest, public_key_path, result)
    if result.problems:
        result.signed = False
    result.ok = not result.problems
    return result
