"""Every waiver of the inventory is on the signed pages once, with its grantor, reason,
expiry and what it covered (the measurements it waived, with their figures), however many
subjects it covered; thresholds read as words, never `True`, `False` or `None`."""

from __future__ import annotations

import re
from datetime import date

import pytest

from pytest_hpcnet.inventory.models import Waiver
from pytest_hpcnet.report.certificate.format import format_threshold
from pytest_hpcnet.report.certificate.page import render_certificate
from pytest_hpcnet.report.certificate.rows import waiver_rows
from pytest_hpcnet.report.evidence import CheckRecord, EvidenceBundle, Measurement
from tests.unit.test_certificate import CONTEXT, RUN_DATE, RUN_START

VENDOR = Waiver(
    check="ib_write_bw",
    reason="vendor: switch firmware 4.2 pending",
    by="Vendor QA",
    expires=date(2026, 12, 20),
)
NODE = Waiver(
    check="mtu[gpu-b]", reason="NIC swap booked", by="Ops lead", expires=date(2026, 12, 15)
)
EXPIRED = Waiver(check="mtu[gpu-c]", reason="old ticket 77", by="Ops", expires=date(2026, 11, 1))
UNUSED = Waiver(
    check="gpu_health[gpu-d GPU 3]", reason="RMA 991", by="QA", expires=date(2026, 12, 31)
)
DECLARED = [VENDOR, NODE, EXPIRED, UNUSED]


def mtu(node: str, value: int, waiver: Waiver | None = None) -> CheckRecord:
    bad = value != 8500
    valid = waiver is not None and waiver.applies_on(RUN_DATE)
    return CheckRecord(
        check_id="mtu",
        requirement="Jumbo MTU",
        subject=node,
        verdict=("waived" if valid else "fail") if bad else "pass",
        measured=[
            Measurement(
                name="mtu",
                value=value,
                unit="bytes",
                threshold=8500,
                comparison="==",
                threshold_source="expect.mtu",
                outcome="fail" if bad else "pass",
            )
        ],
        waiver=waiver,
        started_at=RUN_START,
    )


def pair(source: str, target: str, value: float) -> CheckRecord:
    bad = value < 180
    return CheckRecord(
        check_id="ib_write_bw",
        requirement="RDMA write bandwidth",
        kind="pair",
        subject=f"{source}->{target}",
        verdict="waived" if bad else "pass",
        measured=[
            Measurement(
                name="bw_avg",
                value=value,
                unit="Gb/s",
                threshold=180,
                comparison=">=",
                outcome="fail" if bad else "pass",
            )
        ],
        waiver=VENDOR if bad else None,
        started_at=RUN_START,
    )


def rendered(tmp_path, declared=DECLARED):
    bundle = EvidenceBundle(tmp_path / "run")
    bundle.append(mtu("gpu-a", 8500))
    bundle.append(mtu("gpu-b", 1500, NODE))
    bundle.append(mtu("gpu-c", 1500, EXPIRED))
    for target, value in (("gpu-a", 120.5), ("gpu-c", 121.0), ("gpu-d", 119.5), ("gpu-b", 196.0)):
        bundle.append(pair("gpu-b" if target != "gpu-b" else "gpu-a", target, value))
    bundle.close({"started_at": RUN_START, "cluster": "prod-gpu-01"})
    page = render_certificate(bundle.run_dir, {**CONTEXT, "waivers": declared})
    return page.read_text()


def waivers_section(page: str) -> str:
    return page.split('<section id="waivers">', 1)[1].split("</section>", 1)[0]


def test_every_declared_waiver_is_on_the_page_once_uncut(tmp_path):
    section = waivers_section(rendered(tmp_path))
    assert "shown" not in section  # never "1 of 3 shown"
    for waiver in DECLARED:
        assert section.count(waiver.reason) == 1, waiver.reason
        assert waiver.by in section and waiver.expires.isoformat() in section


def test_a_waiver_says_what_it_covered_with_the_figures(tmp_path):
    section = waivers_section(rendered(tmp_path))
    vendor = re.search(
        r"<tr[^>]*>(?:(?!</tr>).)*vendor: switch firmware(?:(?!</tr>).)*</tr>", section, re.S
    ).group(0)
    assert "gpu-b-&gt;gpu-a: bw_avg 120.5 Gb/s (needs ≥ 180 Gb/s)" in vendor
    assert "gpu-b-&gt;gpu-c: bw_avg 121 Gb/s" in vendor
    assert 'and 1 more in the <a href="evidence.html#waivers">appendix</a>' in vendor
    appendix = (tmp_path / "run" / "evidence.html").read_text()
    assert "gpu-b-&gt;gpu-d: bw_avg 119.5 Gb/s (needs ≥ 180 Gb/s)" in appendix
    assert "waived 3 failures" in vendor
    node = re.search(
        r"<tr[^>]*>(?:(?!</tr>).)*NIC swap booked(?:(?!</tr>).)*</tr>", section, re.S
    ).group(0)
    assert "gpu-b: mtu 1500 bytes (needs = 8500 bytes)" in node


def test_expired_and_unused_waivers_say_why_they_waived_nothing(tmp_path):
    section = waivers_section(rendered(tmp_path))
    expired = re.search(
        r"<tr[^>]*>(?:(?!</tr>).)*old ticket 77(?:(?!</tr>).)*</tr>", section, re.S
    ).group(0)
    assert "EXPIRED — NOT APPLIED" in expired and "gpu-c: mtu 1500 bytes" in expired
    unused = re.search(r"<tr[^>]*>(?:(?!</tr>).)*RMA 991(?:(?!</tr>).)*</tr>", section, re.S).group(
        0
    )
    assert "matched nothing in this run" in unused


def test_waivers_carried_only_by_the_records_are_listed_once_each(tmp_path):
    section = waivers_section(rendered(tmp_path, declared=[]))
    assert section.count(VENDOR.reason) == 1 and section.count(NODE.reason) == 1
    assert UNUSED.reason not in section


def test_one_waiver_over_a_waived_and_an_unmeasured_subject_is_one_row():
    waiver = Waiver(check="gpu_ecc", reason="RMA open", by="QA", expires=RUN_DATE)
    records = [
        CheckRecord(check_id="gpu_ecc", requirement="ECC", subject=s, verdict=v, waiver=waiver)
        for s, v in (("gpu-007", "waived"), ("gpu-008", "not_measured"))
    ]
    (row,) = waiver_rows(records, RUN_DATE)
    assert row.applied and row.by == "QA"
    assert row.note.startswith("NOT APPLIED to gpu-008: not measured")


@pytest.mark.parametrize(
    ("threshold", "comparison", "shown"),
    [
        ("True", "==", "yes"),
        ("False", "==", "no"),
        (["True", "None"], "in", "one of yes, none"),
        ("None", "==", "none"),
    ],
)
def test_thresholds_never_read_true_false_or_none(threshold, comparison, shown):
    m = Measurement(name="x", value=1, threshold=threshold, comparison=comparison)
    assert format_threshold(m) == shown


def test_facts_written_before_the_waiver_figures_and_the_operators_login_still_render(tmp_path):
    import json

    from pytest_hpcnet.report.certificate.page import render_html

    rendered(tmp_path)
    run = tmp_path / "run"
    facts = json.loads((run / "certificate.json").read_text())
    for key in ("unsigned_inputs", "login", "inventory_copy"):
        facts.pop(key)
    facts["generator"].pop("commit")
    facts["waivers"] = [
        {
            "check_id": "mtu",
            "subject": "gpu-b",
            "reason": "NIC swap booked",
            "by": "Ops lead",
            "expires": "2026-12-15",
            "applied": True,
            "note": "",
        }
    ]
    page = render_html(run, facts)
    assert "NIC swap booked" in page and "Carol Operator" in page
