"""The certificate: requirement rows, certificate.json facts and the self-contained page."""

from __future__ import annotations

import json
import re
import xml.dom.minidom
from datetime import date, datetime, timezone

import pytest

from pytest_hpcnet.redact import clear_secrets, register_secret
from pytest_hpcnet.report.certificate.page import (
    RequirementSpec,
    format_margin,
    render_certificate,
    requirement_rows,
)
from pytest_hpcnet.report.evidence import (
    CheckRecord,
    CommandRecord,
    EvidenceBundle,
    Measurement,
    Waiver,
)
from pytest_hpcnet.report.signing import html_facts
from tests.gpu_load_checks import GPU_LOAD_CHECKS

RUN_START = datetime(2026, 11, 30, 5, 27, 50, tzinfo=timezone.utc)
RUN_DATE = RUN_START.date()
NODES = ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]
CONTEXT = {
    "cluster": "prod-gpu-01",
    "region": "cn-wulanchabu",
    "zone": "cn-wulanchabu-c",
    "vpc_id": "vpc-0abc",
    "vswitch_id": "vsw-0def",
    "operator": "Carol Operator",
    "nodes": [{"name": n, "instance_type": "ecs.ebmgn8is.32xlarge"} for n in NODES],
    "contacts": [
        {"name": "Alice Provider", "role": "Delivery lead", "organisation": "Vendor"},
        {"name": "Bob Customer", "role": "Platform owner", "organisation": "Customer"},
    ],
    "inventory_sha256": "1" * 64,
    "expectations_sha256": "2" * 64,
}


def measured(name, value, threshold, comparison, unit="", source="profile ebmgn8is"):
    return [
        Measurement(
            name=name,
            value=value,
            unit=unit,
            threshold=threshold,
            comparison=comparison,
            threshold_source=source,
        )
    ]


def mtu(node: str, value: int = 9000) -> CheckRecord:
    return CheckRecord(
        check_id="mtu",
        requirement="Jumbo MTU",
        subject=node,
        kind="node",
        measured=measured("mtu", value, 9000, ">=", "B", "inventory expect.mtu"),
        verdict="pass" if value >= 9000 else "fail",
        message="" if value >= 9000 else f"{node}: eth0 mtu {value} < 9000",
        started_at=RUN_START,
    )


def bandwidth(source: str, target: str, value: float, digest: str | None = None) -> CheckRecord:
    failing = value < 180
    return CheckRecord(
        check_id="ib_write_bw",
        requirement="RDMA write bandwidth",
        kind="pair",
        subject=f"{source}->{target}",
        measured=measured("bw_avg_gbps", value, 180.0, ">=", "Gb/s"),
        verdict="fail" if failing else "pass",
        message=f"{source}->{target}: bw_avg {value} Gb/s < 180 Gb/s" if failing else "",
        commands=[
            CommandRecord(
                node=source,
                command=f"ib_write_bw -d erdma_0 {target}",
                exit_status=0,
                duration_s=6.5,
                output_digest=digest,
            )
        ],
        suspect_nodes=["gpu-c"] if failing else [],
        started_at=RUN_START,
    )


def latency(value: float, waiver: Waiver | None = None) -> CheckRecord:
    return CheckRecord(
        check_id="ib_write_lat",
        requirement="RDMA write latency",
        kind="pair",
        subject="gpu-a->gpu-b",
        measured=measured("lat_avg_us", value, 10.0, "<=", "us"),
        verdict="pass" if value <= 10 else "fail",
        message="" if value <= 10 else f"latency {value} us > 10 us",
        waiver=waiver,
        started_at=RUN_START,
    )


def rejected_bundle(tmp_path) -> EvidenceBundle:
    """Four nodes; every pair touching gpu-c is slow; one expired waiver."""
    bundle = EvidenceBundle(tmp_path / "20261130-052750-ab12")
    digest = bundle.store_output(
        "#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec]\n 65536 5000 121.40 120.25 0.229\n"
    )
    for node in NODES:
        bundle.append(mtu(node))
    for source in NODES:
        for target in NODES:
            if source != target:
                slow = "gpu-c" in (source, target)
                bundle.append(bandwidth(source, target, 120.25 if slow else 196.5, digest))
    bundle.append(latency(4.0))
    bundle.append(
        latency(12.5, Waiver(reason="switch firmware", by="ops", expires=date(2026, 11, 1)))
    )
    bundle.close({"started_at": RUN_START, "cluster": "prod-gpu-01"})
    return bundle


# --- requirement rows ---------------------------------------------------------------


def test_worst_value_is_min_for_at_least_and_max_for_at_most():
    records = [
        bandwidth("gpu-a", "gpu-b", 196.5),
        bandwidth("gpu-a", "gpu-c", 150.0),
        bandwidth("gpu-b", "gpu-c", 170.0),
        latency(4.0),
        latency(8.0),
    ]
    records[-1].subject = "gpu-c->gpu-d"
    rows = {row.check_id: row for row in requirement_rows(records, RUN_DATE)}
    bw = rows["ib_write_bw"]
    assert (bw.worst_value, bw.worst_subject, bw.verdict) == (150.0, "gpu-a->gpu-c", "fail")
    assert bw.margin == pytest.approx((150.0 - 180.0) / 180.0)
    assert bw.subjects == 3 and bw.subjects_failed == 2
    assert bw.threshold == "≥ 180 Gb/s"
    assert bw.threshold_source == "profile ebmgn8is"
    lat = rows["ib_write_lat"]
    assert (lat.worst_value, lat.worst_subject, lat.verdict) == (8.0, "gpu-c->gpu-d", "pass")
    assert lat.margin == pytest.approx(0.2)  # 20 % headroom under the 10 us limit
    assert format_margin(bw.margin) == "-16.7 %"


def test_failing_rows_first_and_not_run_rows_listed():
    rows = requirement_rows([mtu("gpu-a"), bandwidth("gpu-a", "gpu-b", 100.0)], RUN_DATE)
    assert [r.check_id for r in rows[:2]] == ["ib_write_bw", "mtu"]
    assert rows[0].anchor == "ev-ib_write_bw"
    not_run = {r.check_id for r in rows if r.verdict == "not_run"}
    assert {
        "erdma",
        "path_mtu",
        "security_group",
        "acl",
        "placement",
        "tuning",
        "ib_write_lat",
        "nccl_busbw",
        "cpfs",
        "cloud_audit",
        "erdma_identity",
        "erdma_driver",
        "erdma_port",
        "erdma_gdr",
        "erdma_eri_bw",
        "erdma_instance_bw",
        "nccl_transport",
        "nccl_all_gather",
        "nccl_reduce_scatter",
        "nccl_alltoall",
        "nccl_sendrecv",
        "nccl_rail",
        "nccl_network_only",
        "rdma_counters",
        "gpu_inventory",
        "gpu_health",
        "gpu_xid",
        "gpu_clocks",
        "gpu_power_limit",
        "pcie_links",
        "memlock",
        "gpu_topology",
        "versions",
        "firmware",
        "instance_type",
        "erdma_nic_index",
        "erdma_gdr_bw",
        "host_hardware",
        "pcie_aer",
        "host_settings",
        *GPU_LOAD_CHECKS,
        "burnin",
        "burnin_network",
    } == not_run


def test_custom_requirement_list_and_equality_thresholds():
    record = CheckRecord(
        check_id="erdma",
        requirement="eRDMA devices",
        subject="gpu-a",
        measured=measured("state", "DOWN", "ACTIVE", "=="),
        verdict="fail",
    )
    rows = requirement_rows(
        [record],
        RUN_DATE,
        [
            RequirementSpec(check_id="erdma", requirement="eRDMA"),
            RequirementSpec(check_id="cpfs", requirement="CPFS"),
        ],
    )
    assert [(r.check_id, r.verdict) for r in rows] == [("erdma", "fail"), ("cpfs", "not_run")]
    assert rows[0].worst_value == "DOWN" and rows[0].threshold == "= ACTIVE"
    assert rows[0].margin is None


# --- rendering ----------------------------------------------------------------------


@pytest.fixture
def rendered(tmp_path):
    bundle = rejected_bundle(tmp_path)
    page = render_certificate(bundle.run_dir, CONTEXT)
    return bundle.run_dir, page.read_text(encoding="utf-8")


def test_certificate_shows_verdict_and_run_facts(rendered):
    _, html = rendered
    assert 'class="big">REJECTED<' in html
    assert "verdict-REJECTED" in html
    for text in (
        "prod-gpu-01",
        "cn-wulanchabu",
        "vpc-0abc",
        "vsw-0def",
        "cn-wulanchabu-c",
        "4 × <span",
        "ecs.ebmgn8is.32xlarge",
        "20261130-052750-ab12",
        "Carol Operator",
        "1" * 64,
        "2" * 64,
        "2026-11-30 05:27:50",
    ):
        assert text in html, text


def test_failing_row_comes_first_with_worst_value_and_link(rendered):
    run_dir, html = rendered
    appendix = (run_dir / "evidence.html").read_text(encoding="utf-8")
    body = html.split('<section id="requirements">', 1)[1].split("</section>", 1)[0]
    row_classes = re.findall(r'<tr class="row-(\w+)"', body)
    assert row_classes[:2] == ["fail", "fail"]
    assert row_classes[-1] == "not_run"
    first_row = body.split('<tr class="row-', 2)[1]
    assert 'href="evidence.html#ev-ib_write_bw"' in first_row  # the record, in the appendix
    assert "120.2 Gb/s" in first_row  # the worst measured value, 4 significant digits
    assert "-33.2 %" in first_row
    assert 'id="ev-ib_write_bw"' in appendix  # the link has a target
    assert "bw_avg 120.25 Gb/s &lt; 180 Gb/s" in appendix  # failure message in evidence
    assert "121.40 120.25" in appendix  # raw-output excerpt
    assert "121.40 120.25" not in html  # raw output is not on the pages a person signs
    assert "Not run (no record)" in html and "NOT RUN" in appendix


def test_nodes_table_and_heat_map_mark_the_suspect(rendered):
    run_dir, html = rendered
    facts = json.loads((run_dir / "certificate.json").read_text())
    suspects = [n["name"] for n in facts["nodes"] if n["suspect"]]
    assert suspects == ["gpu-c"]
    assert 'suspect: <span class="suspect-flag mono">gpu-c</span>' in html  # failing pairs
    assert "<svg" not in html  # the matrices are in the appendix
    html = (run_dir / "evidence.html").read_text(encoding="utf-8")
    svgs = re.findall(r"<svg.*?</svg>", html, re.DOTALL)
    assert svgs, "no heat map"
    heatmap = next(s for s in svgs if "ib_write_bw" in s)
    xml.dom.minidom.parseString(heatmap)  # well-formed inline SVG
    assert heatmap.count("<rect") == len(NODES) ** 2
    assert 'class="label suspect"' in heatmap and "⚠ gpu-c" in heatmap
    assert "⚠ suspect" in html


def test_page_is_self_contained(rendered):
    _, html = rendered
    lowered = html.lower()
    assert "<script src" not in lowered
    assert "<link" not in lowered
    assert "@import" not in lowered and "url(" not in lowered
    assert re.findall(r"<script[^>]*>", lowered) == [
        '<script type="application/json" id="hpcnet-facts">'
    ]
    links = re.findall(r"(?:src|href)=\"(?!#)([^\"]+)\"", html)
    inside = r"outputs/[0-9a-f]{64}\.txt|trends\.html|evidence\.html(#[\w-]+)?"
    external = [link for link in links if not re.fullmatch(inside, link)]
    assert links and external == []  # only relative links into the bundle's own outputs/
    assert "@page" in html and "A4" in html and "break-inside: avoid" in html


def test_embedded_facts_match_certificate_json(rendered):
    run_dir, html = rendered
    facts = json.loads((run_dir / "certificate.json").read_text())
    assert html_facts(html) == facts
    assert facts["verdict"] == "REJECTED"
    assert facts["evidence_digest"] in html
    assert re.fullmatch(r"[0-9a-f]{64}", facts["evidence_digest"])
    assert facts["requirements"][0]["check_id"] == "ib_write_bw"
    assert "evidence.jsonl" in facts["evidence_files"]


def test_waivers_and_sign_off(rendered):
    _, html = rendered
    waivers = html.split('<section id="waivers">', 1)[1].split("</section>", 1)[0]
    assert "switch firmware" in waivers and "2026-11-01" in waivers
    assert "EXPIRED — NOT APPLIED" in waivers
    assert "<th>Granted by, until</th>" in waivers and "<td>ops, 2026-11-01</td>" in waivers
    signoff = html.split('<section id="signoff"', 1)[1]
    assert "Alice Provider" in signoff and "Bob Customer" in signoff
    assert signoff.count('class="line"') == 0  # nothing to accept on a REJECTED run
    assert "Nothing to accept: this run is REJECTED" in signoff and "accept the cluster" not in html


def test_unclosed_run_is_incomplete_and_pairless_run_has_no_heat_map(tmp_path):
    bundle = EvidenceBundle(tmp_path / "run")
    bundle.append(mtu("gpu-a"))  # never closed: the run was interrupted
    html = render_certificate(bundle.run_dir, {"cluster": "c"}).read_text()
    assert 'class="big">INCOMPLETE<' in html
    assert "the run did not finish" in html
    assert "<svg" not in html


def test_accepted_run(tmp_path):
    bundle = EvidenceBundle(tmp_path / "run")
    for node in NODES:
        bundle.append(mtu(node))
    bundle.close({})
    html = render_certificate(bundle.run_dir, CONTEXT).read_text()
    assert 'class="big">ACCEPTED<' in html
    assert "verdict-ACCEPTED" in html


def test_hostile_text_is_escaped_and_facts_stay_data(tmp_path):
    bundle = EvidenceBundle(tmp_path / "run")
    record = mtu("gpu-a", 1500)
    record.message = "</script><script>alert(1)</script><b>x</b>"
    bundle.append(record)
    bundle.close({})
    html = render_certificate(bundle.run_dir, CONTEXT).read_text()
    assert "<script>alert(1)" not in html
    assert "<b>x</b>" not in html
    assert html_facts(html)["requirements"][0]["message"] == record.message


def test_secrets_are_redacted_in_certificate(tmp_path):
    clear_secrets()
    try:
        register_secret("s3cr3t-passphrase")
        bundle = EvidenceBundle(tmp_path / "run")
        bundle.append(mtu("gpu-a"))
        bundle.close({})
        page = render_certificate(bundle.run_dir, {**CONTEXT, "operator": "s3cr3t-passphrase"})
        assert "s3cr3t-passphrase" not in page.read_text()
        assert "s3cr3t-passphrase" not in (bundle.run_dir / "certificate.json").read_text()
    finally:
        clear_secrets()
