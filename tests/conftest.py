"""Shared fixtures of the project's own tests."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixture_text():
    """Read a hand-written fixture: `fixture_text("rdma", "two-devices.txt")`."""

    def read(area: str, name: str) -> str:
        return (FIXTURES / area / name).read_text()

    return read


SSH_HOME_FILES = (".ssh/id_ed25519", ".ssh/gpu_ed25519", ".ssh/known_hosts")


def make_ssh_home(home: Path) -> Path:
    """The key and known_hosts files the example inventories name, under `home`."""
    for name in SSH_HOME_FILES:
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text("placeholder: never used to connect\n")
    return home


@pytest.fixture
def ssh_home(tmp_path_factory, monkeypatch) -> Path:
    """A HOME holding the files the example inventories name (they are checked at load)."""
    home = make_ssh_home(tmp_path_factory.mktemp("home"))
    monkeypatch.setenv("HOME", str(home))
    return home
