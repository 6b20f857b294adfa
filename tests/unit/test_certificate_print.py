"""The certificate as a printed document: wording a signer reads, what failed by node,
device and GPU, bounded lists, sign-off text that fits the verdict, and the evidence
appendix that the bundle's digest covers."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest

from pytest_hpcnet.report.certificate.format import counted, format_threshold, format_value
from pytest_hpcnet.report.certificate.page import ROW_BUDGET, ROW_CAPS, fit_rows
from pytest_hpcnet.report.certificate.rows import requirement_rows
from pytest_hpcnet.report.certificate.summary import findings, name_list, where
from pytest_hpcnet.report.evidence import CheckRecord, Measurement
from pytest_hpcnet.report.verify import verify
from tests.certificate_bundle import (
    write_accepted_bundle,
    write_bundle,
    write_crowded_bundle,
)

ON = date(2026, 12, 1)


def section(page: str, ident: str) -> str:
    return page.split(f'id="{ident}"', 1)[1].split("</section>", 1)[0]


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (12582912, "bytes", "12 MiB"),
        (1536 * 1024 * 1024, "bytes", "1.5 GiB"),
        (8500, "bytes", "8500 bytes"),
        (1, "devices", "1 device"),
        (2, "devices", "2 devices"),
        (1, "GPUs", "1 GPU"),
        (180.25, "Gb/s", "180.2 Gb/s"),
        (None, "Gb/s", "—"),
    ],
)
def test_values_in_human_units_and_plurals(value, unit, shown):
    assert format_value(value, unit) == shown


@pytest.mark.parametrize(
    ("threshold", "comparison", "unit", "shown"),
    [
        (0, "==", "GPUs", "no GPUs"),
        (12582912, ">=", "bytes", "≥ 12 MiB"),
        (8.0, "<=", "us", "≤ 8 us"),
        (8500, "==", "bytes", "= 8500 bytes"),
        ([4096, 8500], "in", "bytes", "one of 4096, 8500 bytes"),
    ],
)
def test_thresholds_read_as_words_and_symbols(threshold, comparison, unit, shown):
    measured = Measurement(name="x", value=1, unit=unit, threshold=threshold, comparison=comparison)
    assert format_threshold(measured) == shown


def test_counts_and_node_lists():
    assert counted(1, "checks") == "1 check" and counted(3, "checks") == "3 checks"
    assert counted(1, "more records") == "1 more record"
    nodes = [f"n{i}" for i in range(10)]
    assert name_list(nodes, nodes) == "all 10 nodes"
    assert name_list(nodes[1:], nodes) == "all 10 nodes but n0"
    assert name_list(nodes[:7], 64) == "n0, n1, n2, n3 and 3 more"


def _node(node: str, value: float, check: str = "mtu", device: str = "") -> CheckRecord:
    return CheckRecord(
        check_id=check,
        requirement="Jumbo MTU",
        subject=node,
        verdict="pass" if value == 8500 else "fail",
        measured=[
            Measurement(
                name="mtu",
                value=value,
                unit="bytes",
                threshold=8500,
                comparison="==",
                subject=device,
                outcome="pass" if value == 8500 else "fail",
            )
        ],
    )


def test_where_says_all_nodes_when_every_node_measured_the_same():
    records = [_node(f"node{i:02d}", 8500) for i in range(1, 5)]
    [row] = requirement_rows(records, ON, [])
    assert row.worst_subject == "node01" and where(records, row, ON) == "all 4 nodes"
    records[2] = _node("node03", 1500, device="eth0")
    [row] = requirement_rows(records, ON, [])
    assert where(records, row, ON) == "node03 eth0"


def test_findings_group_nodes_that_failed_the_same_way_and_name_the_gpu(tmp_path):
    same = [_node(f"node{i:02d}", 1500, device="eth0") for i in range(1, 65)]
    [finding] = findings(same, ON)
    assert (finding.device, finding.measured, finding.threshold) == (
        "eth0",
        "1500 bytes",
        "= 8500 bytes",
    )
    assert name_list(finding.subjects, [r.subject for r in same]) == "all 64 nodes"
    page = write_bundle(tmp_path / "run", 4).read_text(encoding="utf-8")
    failed = section(page, "findings")
    row = re.search(r"<tr[^>]*>(?:(?!</tr>).)*GPU memory health(?:(?!</tr>).)*</tr>", failed, re.S)
    assert (
        row and "node04" in row.group(0) and "GPU3" in row.group(0) and "3 errors" in row.group(0)
    )
    assert "NOT MEASURED" in failed and "memlock section cut short" in failed
    pairs = page.split('id="failing-pairs"', 1)[1].split("</table>", 1)[0]
    assert "node01 → node02" in pairs and "suspect" in pairs and "≥ 180 Gb/s" in pairs


def test_fit_rows_keeps_every_list_within_its_caps_and_the_budget():
    lists = {name: list(range(50)) for name in ROW_CAPS}
    fitted = fit_rows(lists)
    shown = {name: len(part["shown"]) for name, part in fitted.items()}
    assert sum(shown.values()) <= ROW_BUDGET
    assert all(shown[name] >= ROW_CAPS[name][1] for name in shown)
    assert all(part["more"] == 50 - len(part["shown"]) for part in fitted.values())
    small = fit_rows({name: [1] for name in ROW_CAPS})
    assert all(part == {"shown": [1], "more": 0} for part in small.values())


@pytest.mark.parametrize("count", [4, 64])
def test_main_page_stays_short_and_points_to_the_appendix(tmp_path, count):
    page = write_crowded_bundle(tmp_path / "run", count).read_text(encoding="utf-8")
    body = page.split("<body>", 1)[1]
    assert "<details" not in body and "<svg" not in body and "<pre" not in body
    rows = len(re.findall(r"<tr[ >]", body))
    judged = len(re.findall(r'<tr class="row-[a-z_]+" id="req-', body))  # one per requirement
    waivers = body.split('<section id="waivers">', 1)[1].split("</section>", 1)[0]
    listed = len(re.findall(r"<tr[ >]", waivers)) - 1  # one grantor, reason and expiry: one row
    assert listed == 1
    assert waivers.count("accepted for the pilot") == 1  # every waiver, never cut
    assert len(re.search(r'<td class="mono">([^<]*)</td>', waivers).group(1).split(", ")) == 12
    assert rows - judged - listed <= ROW_BUDGET + 12  # the capped lists and the tables' headers
    assert 'all in the <a href="evidence.html#findings">appendix</a>' in body
    assert 'id="signoff"' in body


def test_sign_off_fits_the_verdict(tmp_path):
    accepted = write_accepted_bundle(tmp_path / "ok", 4).read_text(encoding="utf-8")
    signoff = section(accepted, "signoff")
    assert "The undersigned accept the cluster" in signoff and "verdict <strong>ACCEPTED" in signoff
    assert signoff.count('class="line"') == 4
    incomplete = write_bundle(tmp_path / "bad", 4).read_text(encoding="utf-8")
    signoff = section(incomplete, "signoff")
    assert "accept the cluster" not in incomplete and 'class="line"' not in signoff
    assert "Nothing to accept: this run is INCOMPLETE" in signoff
    assert "fix what failed" in signoff and "measure what was not measured" in signoff


def test_no_machine_wording_on_either_page(tmp_path):
    main = write_bundle(tmp_path / "run", 4)
    for page in (main, main.parent / "evidence.html"):
        text = page.read_text(encoding="utf-8").split('<script type="application/json"')[0]
        for bad in ("exit None", "exit —", "== 0 GPUs", "1 devices", "12582912", "check(s)"):
            assert bad not in text, (page.name, bad)
    appendix = (main.parent / "evidence.html").read_text(encoding="utf-8")
    assert "exit 0" in appendix  # an exit status that is known is shown


def test_heat_map_only_where_legible_else_the_worst_pairs(tmp_path):
    small = write_bundle(tmp_path / "four", 4).parent / "evidence.html"
    pairs = section(small.read_text(encoding="utf-8"), "pairs")
    assert "<svg" in pairs and 'class="legend"' in pairs and "in Gb/s" in pairs
    large = write_bundle(tmp_path / "big", 64).parent / "evidence.html"
    pairs = section(large.read_text(encoding="utf-8"), "pairs")
    matrix = pairs.split('id="matrix-ib_write_bw"', 1)[1].split("<h3", 1)[0]
    assert "<svg" not in matrix and "64 nodes: too many for a legible matrix" in matrix
    assert "61.5 Gb/s" in matrix and "≥ 180 Gb/s" in matrix


def test_the_appendix_is_in_the_digest_and_tampering_fails_verify(tmp_path):
    page = write_bundle(tmp_path / "run", 4)
    run: Path = page.parent
    assert verify(run).ok
    appendix = run / "evidence.html"
    assert 'href="evidence.html"' in page.read_text(encoding="utf-8")
    appendix.write_text(appendix.read_text(encoding="utf-8").replace("FAIL", "PASS"))
    result = verify(run)
    assert not result.ok
    assert "evidence file changed: evidence.html" in result.problems
    appendix.unlink()
    assert "evidence file missing: evidence.html" in verify(run).problems


def test_a_partial_run_asks_for_the_whole_suite(tmp_path):
    from pytest_hpcnet.report.certificate.page import render_certificate
    from pytest_hpcnet.report.evidence import EvidenceBundle
    from pytest_hpcnet.report.records import RunScope, RunSummary

    bundle = EvidenceBundle(tmp_path / "run")
    bundle.append(_node("node01", 1500))
    bundle.close(RunSummary(run_id="run", scope=RunScope(handover=False, label="static checks")))
    page = render_certificate(bundle.run_dir, {"nodes": [{"name": "node01"}]}).read_text()
    signoff = section(page, "signoff")
    assert "Nothing to accept: this run is REJECTED" in signoff
    assert "run the whole suite" in signoff and "fix what failed" in signoff
