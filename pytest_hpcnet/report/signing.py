"""The bundle digest and its Ed25519 signature (verification is in `report.verify`).

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
from pathlib import Path
from typing import Any

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
    raw_public = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    document: dict[str, Any] = {
        "format": SIGNATURE_FORMAT,
        "algorithm": ALGORITHM,
        "digest": digest,
        "certificate_html_sha256": sha256_file(root / CERTIFICATE_HTML),
        "public_key": base64.b64encode(raw_public).decode("ascii"),
        "public_key_fingerprint": key_fingerprint(public_key),
        "signed_at": utc_now().isoformat(),
    }
    document["signature"] = base64.b64encode(private_key.sign(_signed_payload(document))).decode(
        "ascii"
    )
    path = root / SIGNATURE_FILE
    _write_atomic(path, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode())
    return path


def ssh_fingerprint(public_key: Ed25519PublicKey) -> str:
    """The key's fingerprint as `ssh-keygen -l` prints it: `256 SHA256:<base64> (ED25519)`."""
    line = public_key.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    blob = base64.b64decode(line.split()[1])
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")
    return f"256 SHA256:{digest} (ED25519)"


def signer_display(private_key_path: PathLike, passphrase: bytes | None = None) -> dict[str, str]:
    """What the certificate shows about the key that will sign its bundle."""
    public_key = load_private_key(private_key_path, passphrase).public_key()
    return {
        "algorithm": ALGORITHM,
        "fingerprint": key_fingerprint(public_key),
        "ssh_fingerprint": ssh_fingerprint(public_key),
    }
