"""The certificate of a lab run with one injected failure, rendered by a real browser."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_hpcnet.lab import faults
from pytest_hpcnet.report.certificate.page import render_certificate
from pytest_hpcnet.report.evidence import CheckRecord, CommandRecord, EvidenceBundle, Measurement
from pytest_hpcnet.report.records import RunScope, RunSummary, ScopeEntry
from pytest_hpcnet.report.signing import generate_keypair, signer_display
from tests.browser import chromium
from tests.certificate_bundle import write_bundle, write_crowded_bundle
from tests.lab.test_static_suite import run_static

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
HOSTILE_NODE = "<img src=x onerror=\"document.title='PWNED'\">"
HOSTILE = "<script>document.title='PWNED'</script><img src=x onerror=\"document.title='PWNED'\">\n"


def print_pages(tmp_path: Path, page: Path) -> int:
    """How many A4 pages Chromium prints `page` on."""
    pdf = tmp_path / f"{page.parent.name}-{page.stem}.pdf"
    chromium(tmp_path, "--no-pdf-header-footer", f"--print-to-pdf={pdf}", page.as_uri())
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF")
    return len(re.findall(rb"/Type\s*/Page[^s]", data))


def section(dom: str, ident: str) -> str:
    return dom.split(f'id="{ident}"', 1)[1].split("</section>", 1)[0]


def test_certificate_in_a_browser(lab4, tmp_path):
    key, pub = tmp_path / "sign.pem", tmp_path / "sign.pub"
    generate_keypair(key, pub)
    faults.inject("mtu", "node02", "1500", Path(lab4.state_dir))
    try:
        code, _ = run_static(lab4.inventory, tmp_path / "reports", "--hpcnet-sign-key", str(key))
    finally:
        faults.heal("node02", Path(lab4.state_dir))
    assert code == 1
    run = next((tmp_path / "reports").iterdir())
    page = (run / "certificate.html").as_uri()

    dom = chromium(tmp_path, "--dump-dom", page).stdout
    assert "REJECTED" in dom and "Nothing to accept: this run is REJECTED" in dom
    # sign-off evidence: versions and node facts on the page, per node in the appendix
    versions = section(dom, "versions")
    assert "kernel" in versions and "all 4 nodes" in versions
    appendix = (run / "evidence.html").as_uri()
    assert 'href="evidence.html"' in dom
    dom = chromium(tmp_path, "--dump-dom", appendix).stdout
    facts = dom.split('id="node-facts"', 1)[1].split("</table>", 1)[0]
    assert re.search(r"node01</td>.*?ecs\.[a-z0-9-]+\.[a-z0-9]+", facts, re.S)
    assert "i-lab00001" in facts  # the instance id, measured by the reachability check
    assert re.search(r'<details class="evidence" id="ev-mtu" open="?"?>', dom)
    assert re.search(r'<details class="evidence" id="ev-reachability">', dom)
    links = re.findall(r'href="(outputs/[0-9a-f]{64}\.txt)"', dom)
    assert links and all((run / link).is_file() for link in links)
    assert 'class="legend"' in dom
    assert re.search(r"node02(?:(?!</tr>).)*suspect", dom, re.S), "node02 not marked suspect"
    dom = chromium(tmp_path, "--dump-dom", page).stdout
    assert signer_display(key)["ssh_fingerprint"] in dom
    row = re.search(r"<tr[^>]*>(?:(?!</tr>).)*Jumbo MTU(?:(?!</tr>).)*</tr>", dom, re.S)
    assert row is not None, "no requirement row for the MTU"
    assert "1500" in row.group(0) and "node02" in row.group(0)

    assert print_pages(tmp_path, run / "certificate.html") <= 2  # the sign-off among them
    assert print_pages(tmp_path, run / "evidence.html") >= 1  # the appendix prints on its own

    shot = ROOT / "reports" / "certificate-lab-mtu-fault.png"
    shot.parent.mkdir(exist_ok=True)
    chromium(tmp_path, "--window-size=1200,2000", f"--screenshot={shot}", page)
    assert shot.stat().st_size > 10_000
    full = ROOT / "reports" / "certificate-screenshot.png"  # header to heat maps, for review
    chromium(tmp_path, "--hide-scrollbars", "--window-size=1000,3000", f"--screenshot={full}", page)
    assert full.read_bytes().startswith(b"\x89PNG") and full.stat().st_size > 50_000


def test_generated_certificate_sections_in_a_browser(tmp_path):
    """A lab-marked, partial, signed bundle with a version mismatch and hostile node output:
    the browser shows every section and runs nothing from the nodes."""
    key, pub = tmp_path / "sign.pem", tmp_path / "sign.pub"
    generate_keypair(key, pub)
    bundle = EvidenceBundle(tmp_path / "run")
    digest = bundle.store_output(HOSTILE)
    for index, node in enumerate(["gpu-a", "gpu-b", HOSTILE_NODE]):
        record = CheckRecord(
            check_id="reachability",
            requirement="Nodes reachable over SSH",
            subject=node,
            measured=[Measurement(name="kernel", value="6.8.0-48-generic")],
            verdict="pass",
            tool_versions={"kernel": "6.8.0-31-generic" if index == 1 else "6.8.0-48-generic"},
            commands=[
                CommandRecord(node=node, command="uname -r", exit_status=0, output_digest=digest)
            ],
        )
        bundle.append(record)
    bundle.append(  # an unset bound: bundle.close lists it as not measured, with its key
        CheckRecord(
            check_id="nccl_busbw",
            requirement="NCCL bus bandwidth",
            subject="cluster",
            kind="cluster",
            verdict="skipped",
            message="no bound set (expect.nccl.min_busbw_largest_gbs)",
        )
    )
    scope = RunScope(
        handover=False,
        label="static checks",
        selection="-m static",
        excluded=[ScopeEntry(check_id="cloud_audit", reason="no credentials on the lab")],
    )
    bundle.close(RunSummary(run_id="run", lab=True, profile="lab", scope=scope))
    page = render_certificate(bundle.run_dir, {"signer": signer_display(key)}).as_uri()

    dom = chromium(tmp_path, "--dump-dom", page).stdout
    assert "PWNED" not in dom.split("</title>", 1)[0]  # no node script ran
    assert "<img" not in dom and 'id="lab-banner"' in dom
    assert re.search(r"<title>LAB", dom)
    assert "static checks (-m static)" in dom and "not a handover certificate" in dom
    assert "no credentials on the lab" in section(dom, "scope")
    assert "expect.nccl.min_busbw_largest_gbs" in section(dom, "scope")
    assert "kernel differs across nodes" in section(dom, "versions")
    assert "256 SHA256:" in dom


@pytest.mark.parametrize(
    ("build", "nodes", "lab"),
    [
        (write_bundle, 4, True),
        (write_bundle, 64, False),
        (write_crowded_bundle, 4, False),
        (write_crowded_bundle, 64, True),
    ],
)
def test_certificate_prints_on_two_pages_whatever_the_cluster_size(tmp_path, build, nodes, lab):
    """Verdict, scope, what failed, versions, waivers and the sign-off on at most two A4
    pages, from 4 to 64 nodes and with every list overflowing; the rest is the appendix."""
    page = build(tmp_path / f"run{nodes}", nodes, lab=lab)
    dom = chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    for ident in ("scope", "findings", "requirements", "versions", "waivers", "signoff"):
        assert f'id="{ident}"' in dom, ident
    assert print_pages(tmp_path, page) <= 2
    appendix = page.parent / "evidence.html"
    assert print_pages(tmp_path, appendix) >= 2  # the raw evidence, printed on request
    shot = ROOT / "reports" / f"certificate-{build.__name__}-{nodes}.png"
    shot.parent.mkdir(exist_ok=True)
    chromium(
        tmp_path,
        "--hide-scrollbars",
        "--window-size=900,2600",
        f"--screenshot={shot}",
        page.as_uri(),
    )
    assert shot.read_bytes().startswith(b"\x89PNG")
