"""Bundle digest, Ed25519 signature and verification of a handed-over bundle."""

from __future__ import annotations

import json
import stat
from datetime import datetime, timezone

import pytest

from pytest_hpcnet.report.certificate.page import render_certificate
from pytest_hpcnet.report.evidence import CheckRecord, CommandRecord, EvidenceBundle, Measurement
from pytest_hpcnet.report.signing import (
    bundle_digest,
    generate_keypair,
    sign,
)
from pytest_hpcnet.report.verify import verify

RUN_START = datetime(2026, 11, 30, 5, 27, 50, tzinfo=timezone.utc)


def _record(subject: str, value: float, digest: str) -> CheckRecord:
    return CheckRecord(
        check_id="ib_write_bw",
        requirement="RDMA write bandwidth",
        kind="pair",
        subject=subject,
        measured=[
            Measurement(
                name="bw_avg_gbps",
                value=value,
                unit="Gb/s",
                threshold=180.0,
                comparison=">=",
                threshold_source="profile ebmgn8is",
            )
        ],
        verdict="pass" if value >= 180 else "fail",
        commands=[
            CommandRecord(
                node=subject.split("->")[0],
                command="ib_write_bw -d erdma_0",
                exit_status=0,
                duration_s=6.0,
                output_digest=digest,
            )
        ],
        started_at=RUN_START,
    )


@pytest.fixture
def bundle_dir(tmp_path):
    """A closed, rendered, unsigned bundle."""
    bundle = EvidenceBundle(tmp_path / "20261130-052750-ab12")
    digest = bundle.store_output(" 65536 5000 196.52 196.40 0.374\n")
    bundle.append(_record("gpu-a->gpu-b", 196.4, digest))
    bundle.append(_record("gpu-b->gpu-a", 150.0, digest))
    bundle.close({"cluster": "prod-gpu-01", "started_at": RUN_START})
    render_certificate(bundle.run_dir, {"cluster": "prod-gpu-01", "contacts": [{"name": "Alice"}]})
    return bundle.run_dir


@pytest.fixture
def keys(tmp_path):
    private, public = tmp_path / "signer.pem", tmp_path / "signer.pub.pem"
    generate_keypair(private, public)
    return private, public


def _flip_byte(path, offset: int = -3) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _output_file(run_dir):
    return next((run_dir / "outputs").iterdir())


def test_generate_keypair_writes_pem_and_protects_private_key(keys):
    private, public = keys
    assert private.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert public.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600


def test_unsigned_bundle_verifies_its_digest_and_says_unsigned(bundle_dir):
    result = verify(bundle_dir)
    assert result.ok, result.problems
    assert result.signed is False
    assert any("unsigned" in note for note in result.notes)
    facts = json.loads((bundle_dir / "certificate.json").read_text())
    assert result.digest == facts["evidence_digest"] == bundle_digest(bundle_dir)


def test_signed_bundle_verifies_with_its_key(bundle_dir, keys):
    private, public = keys
    sign(bundle_dir, private)
    signature = json.loads((bundle_dir / "signature.json").read_text())
    assert signature["algorithm"] == "Ed25519"
    assert signature["digest"] == bundle_digest(bundle_dir)
    assert signature["public_key_fingerprint"].startswith("sha256:")
    result = verify(bundle_dir, public)
    assert result.ok, result.problems
    assert result.signed is True
    assert result.key_fingerprint == signature["public_key_fingerprint"]


def test_wrong_key_fails(bundle_dir, keys, tmp_path):
    private, _ = keys
    sign(bundle_dir, private)
    other_private, other_public = tmp_path / "other.pem", tmp_path / "other.pub"
    generate_keypair(other_private, other_public)
    result = verify(bundle_dir, other_public)
    assert not result.ok
    assert result.signed is False
    assert any("does not verify" in p for p in result.problems)


def test_public_key_given_for_unsigned_bundle_fails(bundle_dir, keys):
    _, public = keys
    result = verify(bundle_dir, public)
    assert not result.ok
    assert any("not signed" in p for p in result.problems)


@pytest.mark.parametrize("target", ["evidence.jsonl", "summary.json", "output"])
def test_any_changed_evidence_byte_changes_the_digest_and_fails(bundle_dir, keys, target):
    private, public = keys
    sign(bundle_dir, private)
    before = bundle_digest(bundle_dir)
    path = _output_file(bundle_dir) if target == "output" else bundle_dir / target
    _flip_byte(path)
    assert bundle_digest(bundle_dir) != before
    for key in (public, None):
        result = verify(bundle_dir, key)
        assert not result.ok
        assert any("digest mismatch" in p for p in result.problems)
        relative = path.relative_to(bundle_dir).as_posix()
        assert f"evidence file changed: {relative}" in result.problems


def test_added_or_removed_file_fails(bundle_dir):
    (bundle_dir / "outputs" / "extra.txt").write_text("planted\n")
    assert "evidence file added: outputs/extra.txt" in verify(bundle_dir).problems
    (bundle_dir / "outputs" / "extra.txt").unlink()
    assert verify(bundle_dir).ok
    _output_file(bundle_dir).unlink()
    result = verify(bundle_dir)
    assert not result.ok
    assert any(p.startswith("evidence file missing: outputs/") for p in result.problems)


def test_changed_certificate_json_fails(bundle_dir, keys):
    private, public = keys
    sign(bundle_dir, private)
    path = bundle_dir / "certificate.json"
    facts = json.loads(path.read_text())
    assert facts["verdict"] == "REJECTED"
    facts["verdict"] = "ACCEPTED"
    path.write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")
    for key in (public, None):
        result = verify(bundle_dir, key)
        assert not result.ok
        assert any("digest mismatch" in p for p in result.problems)


def test_edited_certificate_html_fails_signed_or_not(bundle_dir, keys):
    private, public = keys
    page = bundle_dir / "certificate.html"
    original = page.read_text()
    page.write_text(original.replace('class="big">REJECTED<', 'class="big">ACCEPTED<'))
    unsigned = verify(bundle_dir)
    assert not unsigned.ok
    assert "certificate.html was edited after rendering" in unsigned.problems
    page.write_text(original)
    sign(bundle_dir, private)
    page.write_text(original.replace("prod-gpu-01", "prod-gpu-02"))
    signed = verify(bundle_dir, public)
    assert not signed.ok
    assert "certificate.html changed after signing" in signed.problems


def test_tampered_signature_document_fails(bundle_dir, keys):
    private, public = keys
    sign(bundle_dir, private)
    path = bundle_dir / "signature.json"
    document = json.loads(path.read_text())
    document["signed_at"] = "2030-01-01T00:00:00+00:00"
    path.write_text(json.dumps(document))
    assert not verify(bundle_dir, public).ok


def test_sign_refuses_a_bundle_changed_after_rendering(bundle_dir, keys):
    private, _ = keys
    _flip_byte(bundle_dir / "evidence.jsonl")
    with pytest.raises(ValueError, match="changed since"):
        sign(bundle_dir, private)


def test_sign_refuses_an_unrendered_bundle(tmp_path, keys):
    private, _ = keys
    bundle = EvidenceBundle(tmp_path / "run")
    bundle.close({})
    with pytest.raises(ValueError, match="render the certificate"):
        sign(bundle.run_dir, private)


def test_digest_ignores_certificate_and_signature_files_only(bundle_dir, keys):
    private, _ = keys
    before = bundle_digest(bundle_dir)
    sign(bundle_dir, private)
    (bundle_dir / "certificate.html").write_text("changed")
    assert bundle_digest(bundle_dir) == before  # the page is guarded by re-rendering/signature
    (bundle_dir / "notes.txt").write_text("x")
    assert bundle_digest(bundle_dir) != before


def test_damaged_or_missing_certificate_json_is_a_problem_not_a_crash(bundle_dir):
    path = bundle_dir / "certificate.json"
    path.write_text(path.read_text()[:-40])
    result = verify(bundle_dir)
    assert not result.ok
    assert any("certificate.json is unreadable" in p for p in result.problems)
    path.unlink()
    result = verify(bundle_dir)
    assert not result.ok
    assert "certificate.json is missing" in result.problems
