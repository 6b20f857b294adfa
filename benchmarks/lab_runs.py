"""What the lab benchmark scripts share: the host-wide lab lock and one timed pytest run."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = "/run/hpcnet-lab.lock"


@contextmanager
def lab_lock() -> Iterator[None]:
    """Hold the host-wide lab lock (the lab tests take it too) for the block."""
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def timed_pytest(marker: str, inventory: Path, reports: Path, *extra: str) -> tuple[float, str]:
    """Wall seconds of one `pytest -m <marker> --inventory ...` run, as a user runs it, and
    pytest's summary line."""
    start = time.monotonic()
    options = ["-m", marker, "-q", "-p", "no:cacheprovider", "--inventory", str(inventory)]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *options, "--reports-dir", str(reports), *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
    )
    wall = time.monotonic() - start
    lines = [ln for ln in proc.stdout.splitlines() if " in " in ln and ("passed" in ln)]
    return wall, (lines[-1].strip("= ") if lines else f"exit {proc.returncode}")
