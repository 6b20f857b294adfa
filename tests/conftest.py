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
