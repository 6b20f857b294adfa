"""The certificate as sign-off evidence: scope and lab in the header, threshold sources,
skip reasons, versions, node facts, signer, evidence for passing rows, baseline, heat-map
colours, hostile node output."""

from __future__ import annotations

import html as htmllib
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from pytest_hpcnet.report.certificate.header import certified_verdict
from pytest_hpcnet.report.certificate.page import render_certificate
from pytest_hpcnet.report.certificate.versions import version_rows, versions_table
from pytest_hpcnet.report.evidence import CheckRecord, CommandRecord, EvidenceBundle, Measurement
from pytest_hpcnet.report.heatmap import COLOURS, cell_state
from pytest_hpcnet.report.records import RunScope, RunSummary, ScopeEntry
from pytest_hpcnet.report.signing import generate_keypair, load_private_key, signer_display
from pytest_hpcnet.report.verify import verify
from tests.unit.test_certificate import CONTEXT, NODES, RUN_START, bandwidth, mtu

KERNEL = "6.8.0-48-generic"
HOSTILE_NAME = '<img src=x onerror="alert(1)">'
HOSTILE_OUTPUT = '<script>alert("pwned")</script>\n<img src=x onerror=alert(2)>\n'


def reach(node: str, kernel: str = KERNEL, versions: dict[str, str] | None = None) -> CheckRecord:
    tools = {"kernel": kernel, "erdma": "0.2.38", "rdma-core": "50.0-2", "perftest": "24.01.0"}
    return CheckRecord(
        check_id="reachability",
        requirement="Nodes reachable over SSH",
        subject=node,
        measured=[
            Measurement(name="hostname", value=node),
            Measurement(name="kernel", value=kernel),
            Measurement(name="instance_type", value="ecs.ebmgn8is.32xlarge"),
            Measurement(name="instance_id", value=f"i-{node}"),
            Measurement(name="vswitch_id", value="vsw-0def"),
        ],
        verdict="pass",
        started_at=RUN_START,
        tool_versions=tools if versions is None else versions,
    )


def devices(node: str) -> CheckRecord:
    return CheckRecord(
        check_id="erdma",
        requirement="eRDMA devices",
        subject=node,
        measured=[
            Measurement(
                name="devices",
                value=2,
                unit="devices",
                threshold=2,
                comparison=">=",
                threshold_source="expect.rdma",
            )
        ],
        verdict="pass",
        started_at=RUN_START,
    )


def skipped_audit(node: str) -> CheckRecord:
    return CheckRecord(
        check_id="cloud_audit",
        requirement="Cloud control plane",
        subject=node,
        verdict="skipped",
        message="no Alibaba Cloud credentials (ALIBABA_CLOUD_ACCESS_KEY_ID)",
        started_at=RUN_START,
    )


def write_bundle(
    tmp_path: Path,
    summary: dict,
    records: list[CheckRecord] | None = None,
    odd_kernel: bool = False,
    audit_skipped: bool = True,
) -> EvidenceBundle:
    bundle = EvidenceBundle(tmp_path / "20261130-052750-cd34")
    digest = bundle.store_output("ib_write_bw output\n 65536 5000 196.50 196.50 0.37\n")
    for index, node in enumerate(NODES):
        odd = odd_kernel and index == 2
        bundle.append(
            reach(
                node,
                "6.8.0-31-generic" if odd else KERNEL,
                {"kernel": KERNEL} if index == 3 else None,
            )
        )
        bundle.append(devices(node))
        bundle.append(mtu(node))
        if audit_skipped:
            bundle.append(skipped_audit(node))
    for source, target in zip(NODES, NODES[1:] + NODES[:1], strict=True):
        bundle.append(bandwidth(source, target, 196.5, digest))
    for record in records or []:
        bundle.append(record)
    bundle.close(
        RunSummary(run_id=bundle.run_id, started_at=RUN_START, cluster="prod-gpu-01", **summary)
    )
    return bundle


def render(
    tmp_path: Path, summary: dict | None = None, context: dict | None = None, **kwargs
) -> tuple[Path, str]:
    bundle = write_bundle(tmp_path, summary or {}, **kwargs)
    page = render_certificate(bundle.run_dir, {**CONTEXT, **(context or {})})
    return bundle.run_dir, page.read_text(encoding="utf-8")


def section(page: str, ident: str) -> str:
    return page.split(f'id="{ident}"', 1)[1].split("</section>", 1)[0]


def appendix(run_dir: Path) -> str:
    """The evidence appendix beside the certificate."""
    return (run_dir / "evidence.html").read_text(encoding="utf-8")


# --- header: profile, scope, lab ----------------------------------------------------------


def test_partial_run_reads_passed_and_not_a_handover_certificate(tmp_path):
    scope = RunScope(handover=False, label="static checks", selection="-m static")
    _, page = render(tmp_path, {"scope": scope, "profile": "ebmgn8is"}, audit_skipped=False)
    assert 'class="big">PASSED<' in page and "ACCEPTED" not in page.split("<body>", 1)[1][:3000]
    assert "static checks (-m static) passed — not a handover certificate" in page
    assert "Partial run record (not a handover certificate)" in page
    assert ">ebmgn8is<" in page


def test_unmeasured_scope_is_incomplete_with_the_key_to_set(tmp_path):
    # The evidence decides what was not measured (bundle.close recomputes the scope): an
    # unset bound is a skip naming its key; the inventory's exclusion is kept with its reason.
    unbound = CheckRecord(
        check_id="nccl_busbw",
        requirement="NCCL bus bandwidth",
        subject="cluster",
        kind="cluster",
        verdict="skipped",
        message="no bound set (expect.nccl.min_busbw_gbps)",
        started_at=RUN_START,
    )
    scope = RunScope(excluded=[ScopeEntry(check_id="cpfs", reason="no CPFS on this cluster")])
    _, page = render(tmp_path, {"scope": scope}, records=[unbound], audit_skipped=False)
    assert 'class="big">INCOMPLETE<' in page
    measured = section(page, "not-measured")
    assert "nccl_busbw" in measured and "expect.nccl.min_busbw_gbps" in measured
    assert "no bound set" in measured
    excluded = page.split('id="not-in-scope"', 1)[1].split("</table>", 1)[0]
    assert "cpfs" in excluded and "no CPFS on this cluster" in excluded
    assert "in scope but not measured: nccl_busbw" in page


def test_verdict_is_the_worst_of_records_and_summary():
    partial = RunSummary(
        run_id="r", verdict="ACCEPTED", scope=RunScope(handover=False, label="static checks")
    )
    assert certified_verdict("ACCEPTED", partial) == "PASSED"
    assert certified_verdict("REJECTED", partial) == "REJECTED"
    assert certified_verdict("ACCEPTED", RunSummary(run_id="r", verdict="INCOMPLETE")) == (
        "INCOMPLETE"
    )
    assert certified_verdict("ACCEPTED", None) == "ACCEPTED"


def test_lab_evidence_is_marked_in_title_banner_and_heading(tmp_path):
    _, page = render(tmp_path, {"lab": True, "verdict": "ACCEPTED"})
    title = re.search(r"<title>(.*?)</title>", page).group(1)
    assert title.startswith("LAB")
    assert 'id="lab-banner"' in page and "not a certificate of a real cluster" in page
    assert 'class="big">LAB · ' in page
    assert "Handover certificate —" not in page
    _, real = render(tmp_path / "real")
    assert "lab-banner" not in real.split("<body>", 1)[1] and not re.search(r"<title>LAB", real)


# --- rows: threshold sources, skip reasons, baseline ---------------------------------------


def test_rows_carry_profile_sources_and_skip_reasons(tmp_path):
    sources = {"mtu": "Alibaba VPC jumbo frames: MTU 8500, ECS docs 'Jumbo frames'"}
    run_dir, _ = render(tmp_path, {"profile": "ebmgn8is", "profile_sources": sources})
    page = appendix(run_dir)
    rows = section(page, "requirements")
    mtu_row = re.search(r'<tr class="row-pass" id="req-mtu">.*?</tr>', rows, re.S).group(0)
    assert "inventory expect.mtu" in mtu_row  # the measurement's own source
    assert 'profile ebmgn8is: <a href="#source-mtu">mtu</a>' in mtu_row
    notes = section(page, "threshold-sources")
    assert 'id="source-mtu"' in notes
    assert "Alibaba VPC jumbo frames: MTU 8500" in htmllib.unescape(notes)
    assert "Alibaba VPC jumbo frames" not in htmllib.unescape(rows)  # listed once, not per row
    audit = re.search(r'<tr class="row-skipped" id="req-cloud_audit">.*?</tr>', rows, re.S)
    assert "skipped: no Alibaba Cloud credentials" in audit.group(0)
    assert "(4 subjects)" in audit.group(0)


def test_baseline_column_only_when_a_baseline_was_given(tmp_path):
    slower = bandwidth("gpu-a", "gpu-c", 150.0)
    slower.measured[0].baseline, slower.measured[0].delta = 200.0, -0.25
    run_dir, page = render(tmp_path, records=[slower])
    assert "<th>Change</th>" in section(page, "requirements") and "-25.0 %" in page
    rows = section(appendix(run_dir), "requirements")
    assert "<th>Baseline</th>" in rows and "-25.0 %" in rows and "200 Gb/s" in rows
    plain_dir, plain = render(tmp_path / "plain")
    assert "<th>Change</th>" not in plain and "<th>Baseline</th>" not in appendix(plain_dir)


def test_requirements_table_has_fixed_columns_that_fill_the_page(tmp_path):
    """Long thresholds and values wrap inside their column instead of widening the table
    past an A4 page (each column's width set, summing to the page's width)."""
    slower = bandwidth("gpu-a", "gpu-c", 150.0)
    slower.measured[0].baseline, slower.measured[0].delta = 200.0, -0.25
    runs = [render(tmp_path / "plain"), render(tmp_path, records=[slower])]
    pages = [page for run_dir, page in runs] + [appendix(run_dir) for run_dir, _ in runs]
    for page in pages:
        table = section(page, "requirements")
        heads = re.findall(r"<th>", table.split("</thead>", 1)[0])
        widths = [int(w) for w in re.findall(r'<col style="width:(\d+)%">', table)]
        assert re.search(r'<table class="requirements( compact)?">', table)
        assert len(widths) == len(heads) and sum(widths) == 100


# --- versions and node facts ----------------------------------------------------------------


def test_versions_collapse_identical_nodes_and_name_the_odd_ones(tmp_path):
    run_dir, page = render(tmp_path, odd_kernel=True)
    assert "erdma differs across nodes: 0.2.38 on all 4 nodes but gpu-d; not read on gpu-d" in page
    versions = section(appendix(run_dir), "versions")
    assert "kernel differs across nodes" in versions
    assert "6.8.0-31-generic on gpu-c" in versions
    assert re.search(r'class="mono odd">6\.8\.0-31-generic<', versions)
    assert "not read" in versions  # gpu-d recorded only its kernel
    assert (
        "erdma differs across nodes: 0.2.38 on gpu-a, gpu-b, gpu-c; not read on gpu-d" in versions
    )


def test_versions_agreeing_on_every_node_read_all_n_nodes():
    records = [reach(n) for n in NODES]
    table = versions_table(records, NODES)
    assert all(t.consistent for t in table)
    assert [t.tool for t in table][:3] == ["kernel", "erdma", "rdma-core"]
    rows = version_rows(table)
    assert len(rows) == 1 and rows[0].nodes == NODES


def test_node_facts_from_the_records(tmp_path):
    run_dir, page = render(tmp_path)
    summary = section(page, "versions")  # nodes that share their facts share a row
    assert "all 4 nodes" in summary and "ecs.ebmgn8is.32xlarge" in summary
    facts = appendix(run_dir).split('id="node-facts"', 1)[1].split("</table>", 1)[0]
    row = re.search(r"<tr><td class=\"mono\">gpu-b</td>.*?</tr>", facts).group(0)
    for text in (">2<", ">9000<", KERNEL, "ecs.ebmgn8is.32xlarge", "i-gpu-b", "vsw-0def"):
        assert text in row, text


# --- signature ------------------------------------------------------------------------------


def test_signer_fingerprint_matches_ssh_keygen_and_verify_still_passes(tmp_path):
    key, pub = tmp_path / "sign.pem", tmp_path / "sign.pub"
    generate_keypair(key, pub)
    signer = signer_display(key)
    run_dir, page = render(tmp_path / "run", context={"signer": signer})
    assert signer["ssh_fingerprint"] in page and signer["fingerprint"] in page
    assert verify(run_dir).ok
    assert "hpcnet verify" in page
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        pytest.skip("ssh-keygen is not installed: fingerprint format not compared")
    openssh = tmp_path / "sign.openssh.pub"
    openssh.write_bytes(
        load_private_key(key)
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    shown = subprocess.run(
        [keygen, "-l", "-f", str(openssh)], capture_output=True, text=True, check=True
    ).stdout.split()
    assert signer["ssh_fingerprint"].split() == [shown[0], shown[1], shown[-1]]


def test_unsigned_bundle_says_so(tmp_path):
    _, page = render(tmp_path)
    assert "<strong>unsigned</strong>" in page and "This bundle was not signed" in page


# --- evidence -------------------------------------------------------------------------------


def test_passing_rows_have_collapsed_evidence_and_failing_rows_open(tmp_path):
    run_dir, main = render(tmp_path)
    page = appendix(run_dir)
    assert "<details" not in main  # the evidence is the appendix
    passing = re.search(r'<details class="evidence" id="ev-ib_write_bw">.*?</details>', page, re.S)
    assert passing is not None, "no collapsed evidence for the passing bandwidth row"
    assert "ib_write_bw -d erdma_0" in passing.group(0)  # the command
    assert "196.50 196.50" in passing.group(0)  # the output's excerpt
    links = re.findall(r'href="(outputs/[0-9a-f]{64}\.txt)"', passing.group(0))
    assert links and all((run_dir / link).is_file() for link in links)
    assert re.search(r'<details class="evidence" id="ev-mtu">', page)
    assert 'href="evidence.html#ev-mtu"' in main  # the row links to its evidence
    failed_dir, _ = render(tmp_path / "failed", records=[bandwidth("gpu-a", "gpu-c", 150.0)])
    failed = appendix(failed_dir)
    assert re.search(r'<details class="evidence" id="ev-ib_write_bw" open>', failed)


def test_hostile_node_output_and_names_never_become_markup(tmp_path):
    bundle = EvidenceBundle(tmp_path / "20261130-052750-ef56")
    digest = bundle.store_output(HOSTILE_OUTPUT)
    evil = reach(HOSTILE_NAME, kernel='6.8.0"><script>alert(3)</script>')
    evil.commands = [
        CommandRecord(node=HOSTILE_NAME, command="uname -r", exit_status=0, output_digest=digest)
    ]
    evil.tool_versions["nccl"] = "<b onmouseover=alert(4)>2.21</b>"
    failing = mtu(HOSTILE_NAME, 1500)
    failing.message = f"{HOSTILE_NAME}: eth0 mtu 1500 <script>alert(5)</script>"
    failing.commands = evil.commands
    for record in (evil, failing):
        bundle.append(record)
    bundle.close({"started_at": RUN_START})
    context = {**CONTEXT, "nodes": [{"name": HOSTILE_NAME, "instance_type": "<i>x</i>"}]}
    main = render_certificate(bundle.run_dir, context).read_text(encoding="utf-8")
    page = appendix(bundle.run_dir)
    assert re.findall(r"<script[^>]*>", main) == [
        '<script type="application/json" id="hpcnet-facts">'
    ]
    assert re.findall(r"<script[^>]*>", page) == []
    for shown in (main, page):
        for tag in ("<img", "<b ", "<i>x"):
            assert tag not in shown, tag
        assert not re.search(r"<[a-z]+[^>]*\sonerror=", shown, re.I)
        assert not re.search(r"<[a-z]+[^>]*\sonmouseover=", shown, re.I)
    assert "&lt;script&gt;alert(&#34;pwned&#34;)" in page  # the output is shown, escaped
    assert "&lt;img src=x onerror" in main  # the failing node, named and escaped


# --- heat map -------------------------------------------------------------------------------


def test_exact_pass_is_green_and_failures_red():
    exact = Measurement(name="mtu", value=8500, threshold=8500, comparison=">=")
    ports = Measurement(name="open_ports", value=14, threshold=14, comparison=">=")
    close = Measurement(name="bw", value=181.0, threshold=180.0, comparison=">=")
    assert cell_state(exact, "pass") == cell_state(ports, "pass") == "pass"
    assert cell_state(close, "pass") == "near"
    assert cell_state(close, "fail") == "fail"
    assert COLOURS["pass"][0] != COLOURS["near"][0]


def test_heat_map_has_a_legend_and_green_cells(tmp_path):
    run_dir, _ = render(tmp_path)
    nodes = section(appendix(run_dir), "pairs")
    assert 'class="legend"' in nodes and "not measured" in nodes and "(Gb/s)" in nodes
    assert f'fill="{COLOURS["pass"][0]}"' in nodes


def test_gpu_section_hook_is_in_the_template_once():
    template = Path(__file__).resolve().parents[2] / "pytest_hpcnet/templates/evidence.html.j2"
    text = template.read_text()
    line = '{% include "certificate_gpu.html.j2" ignore missing %}'
    assert text.count(line) == 1
    assert text.index(line) > text.index('<section id="requirements">')


@pytest.mark.parametrize("print_rule", ["details::details-content", "break-inside: avoid"])
def test_prints_with_details_expanded(tmp_path, print_rule):
    _, page = render(tmp_path)
    assert print_rule in page.split("@media print", 1)[1]


def test_finish_run_names_the_key_that_signs_and_the_bundle_verifies(tmp_path):
    from pytest_hpcnet.report.certificate.page import CertificateContext
    from pytest_hpcnet.report.handover import finish_run

    key, pub = tmp_path / "sign.pem", tmp_path / "sign.pub"
    fingerprint = generate_keypair(key, pub)
    bundle = write_bundle(tmp_path, {})
    page = finish_run(
        bundle.run_dir, CertificateContext(**CONTEXT), RUN_START.date(), sign_key=str(key)
    )
    text = page.read_text(encoding="utf-8")
    assert fingerprint in text and "signed after rendering" in text
    result = verify(bundle.run_dir, pub)
    assert result.ok and result.signed and result.key_fingerprint == fingerprint
