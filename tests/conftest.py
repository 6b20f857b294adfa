"""Shared fixtures of the project's own tests."""

from __future__ import annotations

import signal
import subprocess
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


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def popen_interruptible(argv: list[str], **kwargs) -> subprocess.Popen:
    """Start a process that Ctrl-C (SIGINT) reaches, as it does a user's pytest.

    A process started with SIGINT ignored (a background job of a non-interactive shell, as
    CI runners start them) passes that on: Python then keeps ignoring SIGINT, and a test of
    what Ctrl-C does would see nothing happen. The child gets the default disposition."""
    return subprocess.Popen(argv, preexec_fn=_default_sigint, **kwargs)
