"""Every requirement shows the bound it is held to, whatever its outcome: the registry's
`bounds` resolve on every profile, and a row that measured no bound shows the planned one."""

from __future__ import annotations

import pytest

from pytest_hpcnet.inventory.expectations import Expectations, load_profile
from pytest_hpcnet.report.certificate.page import render_certificate
from pytest_hpcnet.report.certificate.rows import fill_planned_bounds, requirement_rows
from pytest_hpcnet.report.evidence import CheckRecord, EvidenceBundle
from pytest_hpcnet.report.records import Measurement
from pytest_hpcnet.requirements.registry import REQUIREMENTS, expectation_at, planned_bounds

PROFILES = ("lab", "ebmgn7ex", "ebmgn8is", "ebmgn8v", "gn9gc")


@pytest.mark.parametrize("profile", PROFILES)
def test_every_bound_key_resolves_on_every_profile(profile):
    expect = Expectations(**load_profile(profile))
    for req in REQUIREMENTS:
        for bound in req.bounds:
            expectation_at(expect, bound.key)  # an unknown key raises AttributeError
            if bound.scale:
                assert isinstance(expectation_at(expect, bound.scale), float)


def test_planned_bounds_scale_a_rated_figure():
    expect = Expectations(erdma={"per_eri_gbps": 200, "bw_fraction": 0.8})
    (eri,) = planned_bounds(expect)["erdma_eri_bw"]
    assert eri["value"] == pytest.approx(160.0)
    assert eri["key"] == "erdma.per_eri_gbps x erdma.bw_fraction"


def _mtu_record() -> CheckRecord:
    return CheckRecord(
        check_id="mtu",
        requirement="Jumbo MTU",
        subject="gpu-a",
        kind="node",
        verdict="pass",
        measured=[
            Measurement(name="mtu", value=9000, unit="bytes", threshold=9000, comparison="==")
        ],
    )


def test_a_row_without_a_measured_bound_shows_the_planned_one():
    expect = Expectations(ib_write_bw={"min_gbps": 90})
    rows = {r.check_id: r for r in requirement_rows([_mtu_record()])}
    fill_planned_bounds(rows.values(), planned_bounds(expect))
    assert rows["ib_write_bw"].verdict == "not_run"
    assert rows["ib_write_bw"].threshold == "≥ 90 Gbit/s"
    assert rows["ib_write_bw"].threshold_source == "expect.ib_write_bw.bound_gbps"
    assert rows["nccl_busbw"].threshold == "avg_busbw unset; busbw_largest unset"
    # a measured bound stands: the judge's, not the plan's
    assert rows["mtu"].threshold == "= 9000 bytes"


def test_certificate_of_an_unmeasured_requirement_names_its_bound(tmp_path):
    bundle = EvidenceBundle(tmp_path / "run")
    bundle.append(_mtu_record())
    bundle.close({"bounds": planned_bounds(Expectations(ib_write_bw={"min_gbps": 90}))})
    html = render_certificate(bundle.run_dir, {"cluster": "c"}).read_text()
    row = html[html.index("RDMA write bandwidth (ib_write_bw)") :][:600]
    assert "≥ 90 Gbit/s" in row


def test_failing_rows_past_the_page_are_named_on_one_line():
    from pytest_hpcnet.report.certificate.page import fold_failing_rows
    from pytest_hpcnet.report.certificate.rows import RequirementRow

    rows = [RequirementRow(check_id=f"r{i}", requirement=f"R{i}", verdict="fail") for i in range(5)]
    rows.append(RequirementRow(check_id="ok", requirement="OK", verdict="pass"))
    shown, folded = fold_failing_rows(rows, 3)
    assert [r.check_id for r in shown] == ["r0", "r1", "r2", "ok"]
    assert [r.check_id for r in folded] == ["r3", "r4"]
    assert fold_failing_rows(rows, 5) == (rows, [])
