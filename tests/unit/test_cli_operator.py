"""The `hpcnet` command's answers to an operator: its version, a bundle that fails to verify
(no verdict printed as if it held), a key pair into a folder that is not there."""

from __future__ import annotations

import json

import pytest

from pytest_hpcnet import __version__
from pytest_hpcnet.cli import main
from tests.unit.test_bundle_merge import PART_A, partition


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"hpcnet {__version__}"


def test_a_bundle_that_fails_verification_prints_no_verdict_as_if_it_held(tmp_path, capsys):
    run = partition(tmp_path, "r", PART_A)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["verdict"] == "ACCEPTED"
    evidence = run / "evidence.jsonl"
    evidence.write_text(evidence.read_text().replace('"pass"', '"fail"', 1))  # tampered
    assert main(["verify", str(run)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAILED: ")
    assert "verdict: ACCEPTED" not in out
    assert "verdict: none: the bundle does not verify (summary.json claims ACCEPTED)" in out


def test_a_bundle_that_verifies_still_prints_its_verdict(tmp_path, capsys):
    assert main(["verify", str(partition(tmp_path, "r", PART_A))]) == 0
    assert "verdict: ACCEPTED" in capsys.readouterr().out


def test_keygen_into_a_missing_folder_is_one_line(tmp_path, capsys):
    private, public = tmp_path / "keys" / "sign.pem", tmp_path / "keys" / "sign.pub"
    assert main(["keygen", str(private), str(public)]) == 2
    out, err = capsys.readouterr()
    assert (out + err).strip() == f"hpcnet: {private.parent}: no such folder (create it first)"
    assert not private.parent.exists()
