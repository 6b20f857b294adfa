"""The profiles cite their sources by a stable key (S15, NF-BUSBW) that the package ships
(profiles/sources.yaml) and docs/sources.md lists: no note points at a file the wheel lacks."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from pytest_hpcnet.inventory.citations import cited_keys, load_sources, with_sources
from pytest_hpcnet.inventory.expectations import load_profile_sources, profile_names

ROOT = Path(__file__).resolve().parents[2]
PROFILES = resources.files("pytest_hpcnet") / "profiles"


def every_source_string(name: str) -> list[str]:
    """Each `source:` string of a profile: its notes and the expect-level `source:` fields."""
    text = (PROFILES / f"{name}.yaml").read_text()
    return [" ".join(m.split()) for m in re.findall(r"source: *(?:>-\n)?(.*(?:\n {6,}.*)*)", text)]


def test_sources_yaml_is_not_a_profile():
    assert "sources" not in profile_names()
    assert set(profile_names()) >= {"ebmgn7ex", "ebmgn8is", "ebmgn8v", "gn9gc", "lab"}


@pytest.mark.parametrize("name", ["ebmgn7ex", "ebmgn8is", "ebmgn8v", "gn9gc", "lab"])
def test_profiles_cite_keys_the_package_ships(name):
    text = (PROFILES / f"{name}.yaml").read_text()
    assert "docs/sources.md" not in text and "ECS docs '" not in text
    known = load_sources()
    for note in [*load_profile_sources(name).values(), *every_source_string(name)]:
        for key in re.findall(r"\bS\d{1,2}\b|\b[A-Z]{2,5}-[A-Z]+\b", note):
            assert key in known, f"{name}: {key} in {note[:80]!r}"


def test_each_key_has_a_title_and_docs_list_it():
    docs = (ROOT / "docs" / "sources.md").read_text()
    for key, source in load_sources().items():
        assert source.title and source.kind, key
        assert f"| {key} |" in docs, key
        if source.url:
            assert source.url in docs, key


def test_a_note_is_shown_with_the_title_and_address_it_cites():
    note = "NCCL 2.28.7 is known bad on eRDMA (S15); see S13 and S13 again."
    assert cited_keys(note) == ["S15", "S13"]
    shown = with_sources(note)
    assert shown.startswith(note)
    assert "S15: Ray Direct Transport (RDT) on eRDMA" in shown
    assert "https://github.com/AliyunContainerService/alibabacloud-erdma-controller" in shown
    assert with_sources("a project choice") == "a project choice"


def test_the_certificate_notes_carry_the_sources():
    notes = load_profile_sources("ebmgn7ex")
    assert "S1: 弹性裸金属服务器实例规格族" in notes["ib_write_bw"]
    assert "NF-BUSBW: Not found" in notes["nccl"]


def test_the_wheel_ships_the_sources():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"profiles/*.yaml"' in pyproject
    assert (PROFILES / "sources.yaml").is_file()
