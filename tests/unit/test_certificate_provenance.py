"""What the run was, re-readable from its signed bundle: the inventory itself (secrets
redacted), a named operator (or that none was given), the tool's version and commit."""

from __future__ import annotations

import getpass
import json
import re
import socket
import subprocess
from pathlib import Path

import pytest

from pytest_hpcnet import __version__
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.redact import clear_secrets
from pytest_hpcnet.report.certificate.page import generator_info
from pytest_hpcnet.report.evidence import EvidenceBundle
from pytest_hpcnet.report.handover import finish_run, run_context
from pytest_hpcnet.report.signing import generate_keypair
from pytest_hpcnet.report.verify import verify
from tests.unit.test_certificate import RUN_START, mtu

PASSPHRASE = "hunter2-very-secret"
INVENTORY = (
    "cluster: {name: prod-gpu-01, region: cn-wulanchabu}\n"
    f"ssh: {{user: root, passphrase: {PASSPHRASE}}}\n"
    "nodes:\n  - {name: gpu-a, host: 198.18.0.1}\n"
)


@pytest.fixture(autouse=True)
def _forget_secrets():
    clear_secrets()
    yield
    clear_secrets()


def run(tmp_path: Path, inventory_text: str = INVENTORY, operator: str | None = None, key=None):
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "prod.yaml"
    path.write_text(inventory_text)
    inventory = load_inventory(path)
    bundle = EvidenceBundle(tmp_path / "run")
    bundle.append(mtu("gpu-a", 9000))
    bundle.close({"cluster": "prod-gpu-01", "started_at": RUN_START})
    context = run_context(inventory, {}, [], operator=operator)
    finish_run(bundle.run_dir, context, RUN_START.date(), sign_key=key)
    return bundle.run_dir


def facts_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "certificate.json").read_text())


def operator_cell(run_dir: Path) -> str:
    page = (run_dir / "certificate.html").read_text()
    return re.search(r"<dt>Operator</dt><dd[^>]*>(.*?)</dd>", page, re.S).group(1)


def test_the_operator_named_on_the_command_line_is_the_certificates(tmp_path):
    out = run(tmp_path, operator="Dana Ops <dana@example.com>")
    assert facts_of(out)["operator"] == "Dana Ops <dana@example.com>"
    assert "Dana Ops &lt;dana@example.com&gt;" in operator_cell(out)


def test_the_inventory_may_name_the_operator_and_the_command_line_wins(tmp_path):
    text = INVENTORY.replace("region: cn-wulanchabu}", "region: cn-wulanchabu, operator: Eve Ops}")
    assert facts_of(run(tmp_path / "a", text))["operator"] == "Eve Ops"
    assert facts_of(run(tmp_path / "b", text, operator="Dana Ops"))["operator"] == "Dana Ops"


def test_no_operator_named_says_so_and_shows_no_login_as_a_person(tmp_path):
    out = run(tmp_path)
    assert facts_of(out)["operator"] == ""
    cell = operator_cell(out)
    assert cell.startswith("none named")
    assert "--hpcnet-operator" in cell
    login = f"{getpass.getuser()}@{socket.gethostname()}"
    assert facts_of(out)["login"] == login
    assert cell.index("none named") < cell.index(login)


def test_the_inventory_itself_is_in_the_signed_bundle_with_secrets_redacted(tmp_path):
    private, public = tmp_path / "k.pem", tmp_path / "k.pub"
    generate_keypair(private, public)
    out = run(tmp_path, key=private)
    copy = (out / "inventory.yaml").read_text()
    assert PASSPHRASE not in copy and "passphrase: ***" in copy
    assert "cluster: {name: prod-gpu-01" in copy
    facts = facts_of(out)
    assert "inventory.yaml" in facts["evidence_files"]
    assert facts["inventory_copy"] == "inventory.yaml"
    assert 'href="inventory.yaml"' in (out / "certificate.html").read_text()
    assert verify(out, public).ok
    (out / "inventory.yaml").write_text(copy.replace("gpu-a", "gpu-z"))
    result = verify(out, public)
    assert not result.ok and "evidence file changed: inventory.yaml" in result.problems


def test_the_tools_version_and_commit_are_on_the_certificate(tmp_path):
    info = generator_info()
    assert info["version"] == __version__
    root = Path(__file__).resolve().parents[2]
    head = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    if not head:
        pytest.skip("not run from a git checkout: no commit to know")
    assert info["commit"] == head
    out = run(tmp_path)
    footer = re.search(r"<footer>(.*?)</footer>", (out / "certificate.html").read_text(), re.S)
    assert f"pytest_hpcnet {__version__}" in footer.group(1)
    assert f"commit {head[:12]}" in footer.group(1)


def test_the_inventorys_waivers_reach_the_certificate_even_when_they_matched_nothing(tmp_path):
    text = INVENTORY + (
        "waivers:\n"
        "  - {check: 'mtu[gpu-a]', reason: NIC swap booked, by: Ops lead, expires: 2026-12-15}\n"
    )
    (waiver,) = facts_of(run(tmp_path, text))["waivers"]
    assert waiver["check"] == "mtu[gpu-a]" and waiver["by"] == "Ops lead"
    assert waiver["note"] == "matched nothing in this run"
