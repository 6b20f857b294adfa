"""The certificate of a lab run with one injected failure, rendered by a real browser."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_hpcnet.lab import faults
from tests.lab.test_static_suite import run_static

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("chromium is not installed (.ci/run installs Debian's chromium)")
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    return subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_certificate_in_a_browser(lab4, tmp_path):
    faults.inject("mtu", "node02", "1500", Path(lab4.state_dir))
    try:
        code, _ = run_static(lab4.inventory, tmp_path / "reports")
    finally:
        faults.heal("node02", Path(lab4.state_dir))
    assert code == 1
    run = next((tmp_path / "reports").iterdir())
    page = (run / "certificate.html").as_uri()

    dom = chromium(tmp_path, "--dump-dom", page).stdout
    assert "REJECTED" in dom
    row = re.search(r"<tr[^>]*>(?:(?!</tr>).)*Jumbo MTU(?:(?!</tr>).)*</tr>", dom, re.S)
    assert row is not None, "no requirement row for the MTU"
    assert "1500" in row.group(0) and "node02" in row.group(0)
    assert re.search(r"node02(?:(?!</tr>).)*suspect", dom, re.S), "node02 not marked suspect"

    pdf = tmp_path / "certificate.pdf"
    chromium(tmp_path, "--no-pdf-header-footer", f"--print-to-pdf={pdf}", page)
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF")
    assert len(re.findall(rb"/Type\s*/Page[^s]", data)) >= 1

    shot = ROOT / "reports" / "certificate-lab-mtu-fault.png"
    shot.parent.mkdir(exist_ok=True)
    chromium(tmp_path, "--window-size=1200,2000", f"--screenshot={shot}", page)
    assert shot.stat().st_size > 10_000
