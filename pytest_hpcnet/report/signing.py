"""The bundle digest, its Ed25519 signature, and verification of a handed-over bundle.

The digest is the sha256 of a canonical manifest: every file of the run folder
(sorted relative paths with their sha256) except `certificate.html`,
`certificate.json` and `signature.json`, followed by the sha256 of the
certificate's facts (`certificate.json` without its own `evidence_digest`).
`certificate.html` embeds the same facts; the signature covers the digest and the
sha256 of `certificate.html`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from pytest_hpcnet.report.evidence import _write_atomic, sha256_file, utc_now

CERTIFICATE_HTML = "certificate.html"
CERTIFICATE_JSON = "certificate.json"
SIGNATURE_FILE = "signature.json"
DIGEST_KEY = "evidence_digest"
ALGORITHM = "Ed25519"
MANIFEST_HEADER = "hpcnet-bundle-manifest/1\n"
SIGNATURE_FORMAT = "hpcnet-signature/1"
_EXCLUDED = frozenset({CERTIFICATE_HTML, CERTIFICATE_JSON, SIGNATURE_FILE})
_FACTS_SCRIPT = re.compile(
    r'<script type="application/json" id="hpcnet-facts">(.*?)</script>', re.DOTALL
)

PathLike = str | os.PathLike[str]


@dataclass
class VerifyResult:
    """The outcome of `verify`: `ok` only when `problems` is empty."""

    ok: bool
    digest: str
    signed: bool
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    key_fingerprint: str | None = None


def canonical_json(data: Any) -> bytes:
    """`data` as canonical JSON bytes (sorted keys, no spaces, UTF-8)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def bundle_manifest(run_dir: PathLike) -> dict[str, str]:
    """Relative POSIX path -> sha256 of every evidence file (certificate/signature excluded)."""
    root = Path(run_dir)
    manifest: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        relative = path.relative_to(root).as_posix()
        if relative in _EXCLUDED:
            continue
        manifest[relative] = sha256_file(path)
    return dict(sorted(manifest.items()))


def facts_without_digest(facts: dict[str, Any] | None) -> dict[str, Any] | None:
    """The certificate facts the digest covers (all but the digest itself)."""
    if facts is None:
        return None
    return {key: value for key, value in facts.items() if key != DIGEST_KEY}


def compute_digest(manifest: dict[str, str], facts: dict[str, Any] | None) -> str:
    """The sha256 of the canonical manifest of `manifest` plus the certificate `facts`."""
    lines = [MANIFEST_HEADER]
    lines.extend(f"{sha}  {path}\n" for path, sha in sorted(manifest.items()))
    covered = facts_without_digest(facts)
    facts_sha = hashlib.sha256(canonical_json(covered)).hexdigest() if covered else "-"
    lines.append(f"{facts_sha}  {CERTIFICATE_JSON}#facts\n")
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def read_facts(run_dir: PathLike) -> dict[str, Any] | None:
    """The facts of `certificate.json`, or None where there is none."""
    path = Path(run_dir) / CERTIFICATE_JSON
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def bundle_digest(run_dir: PathLike) -> str:
    """The digest of the bundle as it is on disk now."""
    return compute_digest(bundle_manifest(run_dir), read_facts(run_dir))


def html_facts(html: str) -> dict[str, Any] | None:
    """The facts embedded in a certificate page (`<script id="hpcnet-facts">`), or None."""
    match = _FACTS_SCRIPT.search(html)
    if match is None:
        return None
    return json.loads(match.group(1))


def generate_keypair(
    private_path: PathLike, public_path: PathLike, passphrase: bytes | None = None
) -> str:
    """Write a new Ed25519 key pair as PEM (private file mode 0600); return its fingerprint."""
    private_key = Ed25519PrivateKey.generate()
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    private_pem = private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )
    public_pem = private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    private_file = Path(private_path)
    fd = os.open(private_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(private_pem)
    os.chmod(private_file, 0o600)
    Path(public_path).write_bytes(public_pem)
    return key_fingerprint(private_key.public_key())


def key_fingerprint(public_key: Ed25519PublicKey) -> str:
    """`sha256:<hex>` of the raw public key bytes."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def load_private_key(path: PathLike, passphrase: bytes | None = None) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PEM (PKCS8) or OpenSSH file."""
    data = Path(path).read_bytes()
    if b"OPENSSH PRIVATE KEY" in data:
        key = serialization.load_ssh_private_key(data, passphrase)
    else:
        key = serialization.load_pem_private_key(data, passphrase)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path}: not an Ed25519 private key")
    return key


def load_public_key(path: PathLike) -> Ed25519PublicKey:
    """An Ed25519 public key from a PEM or OpenSSH (`ssh-ed25519 ...`) file."""
    data = Path(path).read_bytes()
    if data.startswith(b"ssh-"):
        key = serialization.load_ssh_public_key(data)
    else:
        key = serialization.load_pem_public_key(data)
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError(f"{path}: not an Ed25519 public key")
    return key


def _signed_payload(signature_doc: dict[str, Any]) -> bytes:
    return canonical_json({k: v for k, v in signature_doc.items() if k != "signature"})


def sign(run_dir: PathLike, private_key_path: PathLike, passphrase: bytes | None = None) -> Path:
    """Sign a rendered bundle: write `signature.json` and return its path.

    Refuses (ValueError) when the bundle has no certificate or its digest does not
    match the one the certificate carries.
    """
    root = Path(run_dir)
    facts = read_facts(root)
    if facts is None or not (root / CERTIFICATE_HTML).exists():
        raise ValueError(f"{root}: render the certificate before signing")
    digest = bundle_digest(root)
    if facts.get(DIGEST_KEY) != digest:
        raise ValueError(f"{root}: bundle changed since the certificate was rendered")
    private_key = load_private_key(private_key_path, passphrase)
    public_key = private_key.public_key()
    raw_public = public_key.public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    document: dict[str, Any] = {
        "format": SIGNATURE_FORMAT,
        "algorithm": ALGORITHM,
        "digest": digest,
        "certificate_html_sha256": sha256_file(root / CERTIFICATE_HTML),
        "public_key": base64.b64encode(raw_public).decode("ascii"),
        "public_key_fingerprint": key_fingerprint(public_key),
        "signed_at": utc_now().isoformat(),
    }
    document["signature"] = base64.b64encode(
        private_key.sign(_signed_payload(document))
    ).decode("ascii")
    path = root / SIGNATURE_FILE
    _write_atomic(path, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode())
    return path


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
    from pytest_hpcnet.report import certificate  # the page is a pure function of the facts

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
    _check_signature(root, digest, public_key_path, result)
    if result.problems:
        result.signed = False
    result.ok = not result.problems
    return result
