""" "Not measured" is its own outcome from the judge to the verdict: never a pass, never waived."""

from __future__ import annotations

import json
from datetime import date

import pytest

from pytest_hpcnet.report.recording import Check, CheckFailed, classify
from pytest_hpcnet.report.records import CheckRecord
from pytest_hpcnet.report.verdict import check_verdict, overall_verdict, scope_of
from pytest_hpcnet.requirements.judges import at_least, at_most
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    NotMeasured,
    Verdict,
    combine,
    failing,
    not_applicable,
    not_measured,
    passing,
)

pytest_plugins = ["pytester"]

TODAY = date(2026, 12, 1)


def test_the_outcome_follows_passed_or_is_given():
    assert Verdict(True).outcome == "pass" and Verdict(False).outcome == "fail"
    unmeasured = not_measured("nvidia-smi hung")
    assert unmeasured.outcome == "not_measured" and not unmeasured and not unmeasured.passed
    assert not not_applicable("no GPUs expected") and passing()
    with pytest.raises(ValueError):
        Verdict(outcome="maybe")  # type: ignore[arg-type]


def test_nothing_measured_or_no_bound_is_not_measured_never_a_pass():
    assert at_least(None, 10.0, "no bandwidth").outcome == "not_measured"
    assert at_least(float("nan"), 10.0, "nan").outcome == "not_measured"
    unbound = at_least(5.0, None, "", "expect.x")
    assert unbound.outcome == "not_measured" and "no bound set (expect.x)" in unbound.reason
    assert at_most(None, 1.0, "no t_avg").outcome == "not_measured"
    assert at_most(2.0, 1.0, "slow").outcome == "fail" and at_most(0.5, 1.0, "slow")


def test_an_impossible_measurement_is_not_measured_never_a_pass():
    """An infinite bandwidth or a negative latency is a misread output, not a fast link."""
    assert at_least(float("inf"), 10.0, "no bandwidth").outcome == "not_measured"
    assert at_least(-1.0, -5.0, "").outcome == "not_measured"
    negative = at_most(-3.0, 20.0, "t_avg")
    assert negative.outcome == "not_measured" and "-3" in negative.reason
    assert at_most(float("-inf"), 20.0, "t_avg").outcome == "not_measured"
    assert at_least(0.0, 0.0, "").outcome == "pass"


def test_combine_fails_first_then_not_measured_and_keeps_every_measurement():
    a = passing(measurements=(Measurement("mtu", 8500, "bytes", 8500, "=="),))
    b = not_measured("eth1: no address", sections=("addr",))
    c = failing("eth0: MTU 1500", fix="set MTU 8500")
    assert combine([a, b]).outcome == "not_measured"
    both = combine([a, b, c])
    assert both.outcome == "fail" and both.reason == "eth0: MTU 1500"
    assert both.fix == "set MTU 8500"
    # the record shows both parts: the pass, the part not measured and the failure
    assert [m.outcome for m in both.measurements] == ["pass", "not_measured", "fail"]
    assert both.sections == ("addr",)
    assert combine([]).outcome == "not_measured"
    assert combine([a, a])


def a_check() -> Check:
    return Check("gpu_ecc", "GPU ECC", "gpu-007", "node", "t::x[gpu-007]", None)


def test_check_judge_records_the_measurements_and_ends_with_the_outcome():
    check = a_check()
    measured = Measurement("ecc_corrected", 2, "errors", 0, "==", "expect.gpu.ecc", "GPU 3")
    with pytest.raises(CheckFailed, match="gpu-007: 2 corrected ECC errors"):
        check.judge(failing("2 corrected ECC errors", measurements=(measured,)), "gpu-007")
    assert check.measured[0]["value"] == 2 and check.measured[0]["subject"] == "GPU 3"
    with pytest.raises(NotMeasured, match="nvidia-smi hung"):
        a_check().judge(not_measured("nvidia-smi hung", sections=("nvidia_smi",)))
    with pytest.raises(pytest.skip.Exception, match="not applicable: no GPUs"):
        a_check().judge(not_applicable("no GPUs"))
    check = a_check()
    assert check.judge(passing(sections=("query_gpu",))) and check.sections == ["query_gpu"]


class _Report:
    passed = skipped = False
    when = "call"


class _Exc:
    def __init__(self, exc: BaseException):
        self.value = exc


def test_not_measured_and_missing_facts_are_classified_not_measured_not_fail():
    from pytest_hpcnet.campaigns.facts import MissingMeasurement

    for exc in (NotMeasured("cut"), MissingMeasurement("node01: facts lack section 'links'")):
        verdict, _ = classify(_Report(), _Exc(exc))  # type: ignore[arg-type]
        assert verdict == "not_measured"
    assert classify(_Report(), _Exc(CheckFailed("slow")))[0] == "fail"  # type: ignore[arg-type]


def test_no_waiver_covers_what_was_not_measured():
    from pytest_hpcnet.inventory.models import Waiver

    waiver = Waiver(check="gpu_ecc", reason="RMA open", by="QA", expires=TODAY)
    assert check_verdict("fail", waiver, TODAY) == "waived"
    assert check_verdict("not_measured", waiver, TODAY) == "not_measured"
    record = CheckRecord(
        check_id="gpu_ecc",
        requirement="GPU ECC",
        subject="gpu-007",
        verdict="not_measured",
        message="gpu-007: nvidia-smi hung",
        waiver=waiver,
    )
    passed = CheckRecord(check_id="mtu", requirement="MTU", subject="gpu-007", verdict="pass")
    assert overall_verdict([record, passed], run_date=TODAY) == "INCOMPLETE"
    (entry,) = scope_of([record, passed], run_date=TODAY).incomplete
    assert (entry.check_id, entry.kind, entry.subject) == ("gpu_ecc", "not_measured", "gpu-007")
    assert entry.reason == "not measured: gpu-007: nvidia-smi hung"


SUITE = """\
import pytest
from pytest_hpcnet.campaigns.facts import MissingMeasurement

@pytest.mark.check("gpu_xid", "Waived")
def test_missing_facts(check):
    raise MissingMeasurement("n1: facts lack section 'kernel_log' (output cut short)")
"""


def test_a_waiver_does_not_turn_a_missing_measurement_into_acceptance(pytester):
    pytester.makefile(
        ".yaml",
        inv=(
            "cluster: {name: unit, region: cn-test}\n"
            "ssh: {connect_timeout_s: 1, connect_retries: 1}\n"
            'nodes:\n  - {name: "n1", host: "198.18.0.201"}\n'
            "waivers:\n"
            "  - {check: gpu_xid, reason: vendor ticket 42, by: QA, "
            f"expires: {date.today().isoformat()}}}\n"
        ),
    )
    pytester.makepyfile(test_suite=SUITE)
    reports = pytester.path / "out"
    pytester.runpytest(".", "--inventory", "inv.yaml", "--reports-dir", str(reports))
    (run,) = [p for p in reports.iterdir() if p.is_dir()]
    (line,) = (run / "evidence.jsonl").read_text().splitlines()
    assert json.loads(line)["verdict"] == "not_measured"
    assert json.loads((run / "summary.json").read_text())["verdict"] == "INCOMPLETE"


def test_a_planned_subject_without_a_record_is_incomplete():
    from pytest_hpcnet.report.records import RunScope

    planned = RunScope(required=["mtu"], expected={"mtu": ["n1", "n2", "n3", "n4"]})
    one = [CheckRecord(check_id="mtu", requirement="MTU", subject="n1", verdict="pass")]
    assert overall_verdict(one, run_date=TODAY, scope=planned) == "INCOMPLETE"
    (entry,) = scope_of(one, planned, TODAY).incomplete
    assert (entry.kind, entry.subject) == ("not_run", "n2, n3, n4")
    every = [r.model_copy(update={"subject": s}) for r in one for s in ("n1", "n2", "n3", "n4")]
    assert overall_verdict(every, run_date=TODAY, scope=planned) == "ACCEPTED"


def test_stepwise_is_a_partial_run(pytester):
    pytester.makefile(".yaml", inv=INVENTORY_ONE)
    pytester.makepyfile(test_suite="def test_x(node):\n    pass\n")
    result = pytester.runpytest(".", "--inventory", "inv.yaml", "--sw", "--reports-dir", "out")
    (run,) = (pytester.path / "out").iterdir()
    scope = json.loads((run / "summary.json").read_text())["scope"]
    assert not scope["handover"] and "--stepwise" in scope["selection"]
    assert "not a handover certificate" in result.stdout.str()


INVENTORY_ONE = (
    "cluster: {name: unit, region: cn-test}\n"
    "ssh: {connect_timeout_s: 1, connect_retries: 1}\n"
    'nodes:\n  - {name: "n1", host: "198.18.0.201"}\n'
)


def test_the_terminal_counts_what_the_certificate_counts(pytester):
    pytester.makefile(".yaml", inv=INVENTORY_ONE)
    pytester.makepyfile(
        test_suite=(
            "import pytest\n"
            "from pytest_hpcnet.requirements.verdict import NotMeasured\n\n"
            '@pytest.mark.check("mtu", "MTU")\n'
            "def test_cut(check):\n"
            '    raise NotMeasured("n1: links section cut short")\n\n'
            '@pytest.mark.check("mtu", "MTU")\n'
            "def test_ok(check):\n"
            "    pass\n"
        )
    )
    result = pytester.runpytest(".", "--inventory", "inv.yaml", "--reports-dir", "out")
    result.stdout.fnmatch_lines(
        ["checks: 1 passed, 0 failed, 1 not measured, 0 errors, 0 waived, 0 skipped"]
    )


def test_the_certificate_says_a_waiver_did_not_cover_what_was_not_measured():
    from pytest_hpcnet.inventory.models import Waiver
    from pytest_hpcnet.report.certificate.rows import waiver_rows

    waiver = Waiver(check="gpu_ecc", reason="RMA open", by="QA", expires=TODAY)
    records = [
        CheckRecord(check_id="gpu_ecc", requirement="ECC", subject=s, verdict=v, waiver=waiver)
        for s, v in (("gpu-007", "waived"), ("gpu-008", "not_measured"))
    ]
    (row,) = waiver_rows(records, TODAY)  # one waiver, one row, whatever it covered
    assert row.applied and row.by == "QA"
    assert row.note.startswith("NOT APPLIED to gpu-008: not measured")


def test_junit_and_report_html_carry_the_verdict(pytester):
    import xml.etree.ElementTree as ET

    pytester.makefile(".yaml", inv=INVENTORY_ONE)
    pytester.makepyfile(
        test_suite=(
            "import pytest\n\n"
            '@pytest.mark.check("mtu", "MTU")\n'
            "def test_bad(check):\n"
            '    assert False, "n1: MTU 1500"\n'
        )
    )
    pytester.runpytest(".", "--inventory", "inv.yaml", "--reports-dir", "out")
    (run,) = (pytester.path / "out").iterdir()
    props = {
        p.get("name"): p.get("value")
        for p in ET.parse(run / "junit.xml").getroot().iter("property")
    }
    assert props["hpcnet_verdict"] == "REJECTED" and props["hpcnet_checks_fail"] == "1"
    assert "hpcnet verdict: <strong>REJECTED" in (run / "report.html").read_text()


def test_a_bad_signing_key_is_found_before_the_run(pytester):
    from pytest_hpcnet.report.signing import generate_keypair

    generate_keypair(pytester.path / "sign.pem", pytester.path / "sign.pub")
    pytester.makefile(".yaml", inv=INVENTORY_ONE)
    pytester.makepyfile(test_suite="def test_x(node):\n    pass\n")
    for key, said in (("missing.pem", "no such file"), ("sign.pub", "that is the public key")):
        result = pytester.runpytest(
            ".", "--inventory", "inv.yaml", "--hpcnet-sign-key", key, "--reports-dir", "out"
        )
        assert result.ret == 4, result.stdout.str()
        (line,) = [x for x in result.stderr.lines if "--hpcnet-sign-key" in x]
        assert said in line and "Traceback" not in result.stderr.str()
    good = pytester.runpytest(
        ".", "--inventory", "inv.yaml", "--hpcnet-sign-key", "sign.pem", "--reports-dir", "out"
    )
    assert good.ret == 0


def test_the_summary_gives_each_failure_its_whole_reason_on_one_line(pytester):
    pytester.makefile(".yaml", inv=INVENTORY_ONE)
    reason = "n1: eth1 (erdma_1): MTU 1500, expected 8500 " + "and a long tail " * 6
    pytester.makepyfile(
        test_suite=(
            "import pytest\n\n"
            '@pytest.mark.check("mtu", "MTU")\n'
            "def test_bad(check):\n"
            f"    assert False, {reason!r}\n"
        )
    )
    result = pytester.runpytest(".", "--inventory", "inv.yaml", "--reports-dir", "out")
    result.stdout.fnmatch_lines([f"    FAIL mtu [cluster] HPCNET-MTU: {reason.strip()}"])


def test_the_evidence_appendix_shows_each_gpus_ecc_count_as_a_number(tmp_path):
    from tests.certificate_bundle import write_bundle

    write_bundle(tmp_path, 4)
    appendix = (tmp_path / "evidence.html").read_text()
    assert '<td class="mono">GPU3 ecc_uncorrected</td><td class="num">3' in appendix


def test_report_html_never_says_exit_none():
    from pytest_hpcnet.report.html_report import command_line

    cut = {"node": "n1", "exit_status": None, "duration_s": None, "output_digest": None}
    assert command_line(cut) == "n1: no exit status"
    done = {"node": "n1", "exit_status": 0, "duration_s": 0.4, "output_digest": "ab"}
    assert command_line(done) == "n1: exit 0 in 0.4 s, output outputs/ab.txt"
