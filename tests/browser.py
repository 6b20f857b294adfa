"""Headless Chromium for the tests that print or render the certificate (Debian's chromium,
which `.ci/run` installs; a test skips where it is missing)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def chromium(tmp_path: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run Chromium headless with `args`, in a fresh profile under `tmp_path`."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("chromium is not installed (.ci/run installs Debian's chromium)")
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    return subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
