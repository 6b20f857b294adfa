"""DCGM diagnostics: the parser on published JSON, the lab emulation, and the judge."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_hpcnet.probes.gpu import parse_query_gpu, query_gpu_command
from pytest_hpcnet.probes.gpu_dcgm import dcgm_command, parse_dcgm_json
from pytest_hpcnet.requirements.gpu_dcgm import INSTALL_DCGM, judge_gpu_dcgm
from tests.unit.test_lab_gpu_load_tools import lab_node

FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu_load"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_dcgm_4_json_software_fail():
    run = parse_dcgm_json(text("dcgm-4.2.3-gb10-r1-json-software-fail-persistence-sram.json"))
    assert run.version == "4.2.3" and run.tests() == ["software"]
    (result,) = run.results
    assert (result.test, result.gpu, result.status) == ("software", 0, "fail")
    assert result.warnings[0].startswith("Persistence Mode: Persistence mode for GPU 0 is disabled")
    verdict = judge_gpu_dcgm("spark", run, None, 1)
    assert verdict.outcome == "fail"
    assert verdict.reason.startswith("spark GPU 0: DCGM software failed: Persistence Mode")


def test_dcgm_3_json_with_prefix_line_and_nulls():
    run = parse_dcgm_json(
        text("nvvs-3.1.0-json-8gpu-software-pass-null-entries-warning-prefix-dcgm-test.txt")
    )
    assert run.error is None and "Persistence Mode" in run.tests()
    assert {r.gpu for r in run.results} == set(range(8))
    assert {r.status for r in run.results} == {"pass"}
    verdict = judge_gpu_dcgm("n1", run, None, 1)
    assert verdict.outcome == "pass" and "passed on 8 GPUs" in verdict.reason


def test_unreadable_outputs_are_not_measured():
    for name in (
        "dcgm-4.4.1-v100-x4-r3-error-plugin-dir-missing-issue254.txt",
        "dcgm-4.x-json-fragment-diagnostic-8gpu-info-truncated-issue215.txt",
    ):
        run = parse_dcgm_json(text(name))
        assert run.error, name
        assert judge_gpu_dcgm("n1", run, None, 3).outcome == "not_measured"
    cut = text("dcgm-4.2.3-gb10-r1-json-software-fail-persistence-sram.json")[:400]
    assert "cut or invalid" in parse_dcgm_json(cut).error
    missing = judge_gpu_dcgm("n1", None, None, 3, "no dcgmi on the node's PATH")
    assert missing.outcome == "not_measured" and missing.fix == INSTALL_DCGM


def test_skipped_test_is_not_a_pass_and_warn_is_reported():
    doc = json.loads(text("dcgm-4.2.3-gb10-r1-json-software-fail-persistence-sram.json"))
    result = doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]
    result["status"], result["warnings"] = "Skip", []
    skipped = judge_gpu_dcgm("n1", parse_dcgm_json(json.dumps(doc)), None, 1)
    assert (
        skipped.outcome == "not_measured" and "n1 GPU 0: dcgm 'software' skipped" in skipped.reason
    )
    result["status"] = "Warn"
    warned = judge_gpu_dcgm("n1", parse_dcgm_json(json.dumps(doc)), None, 1)
    assert warned.outcome == "pass" and "warnings (not failed): GPU 0 software" in warned.reason


def test_lab_emulation_and_its_fault(tmp_path):
    (tmp_path / "ok").mkdir()
    (tmp_path / "bad").mkdir()
    healthy = lab_node(tmp_path / "ok", {})
    run = parse_dcgm_json(healthy(dcgm_command(3)))
    assert run.tests() == [
        "software",
        "pcie",
        "memory",
        "diagnostic",
        "targeted_stress",
        "targeted_power",
        "memory_bandwidth",
    ]
    query = parse_query_gpu(healthy(query_gpu_command()))
    assert judge_gpu_dcgm("node01", run, query, 3).outcome == "pass"
    faulted = lab_node(tmp_path / "bad", {"dcgm-fail": "3"})
    verdict = judge_gpu_dcgm("node01", parse_dcgm_json(faulted(dcgm_command(2))), query, 2)
    assert verdict.outcome == "fail"
    assert verdict.reason == (
        "node01 GPU 3 (00000000:5D:00.0, serial 1654124006923): DCGM memory failed: GPU 3"
        " failed the memory test (hpcnet lab emulation of a DCGM failure)"
    )


# -- coverage: the tests planned for the level, on every expected GPU --------------------


def test_dcgm_3_software_only_is_not_a_level_3_pass():
    run = parse_dcgm_json(
        text("nvvs-3.1.0-json-8gpu-software-pass-null-entries-warning-prefix-dcgm-test.txt")
    )
    assert judge_gpu_dcgm("n1", run, None, 1, expected_gpus=8).outcome == "pass"
    verdict = judge_gpu_dcgm("node03", run, None, 3, expected_gpus=8)
    assert verdict.outcome == "not_measured"
    assert "node03 GPU 5: dcgm 'memory' not run" in verdict.reason
    assert "node03 GPU 0: dcgm 'targeted_power' not run" in verdict.reason
    unmeasured = {m.subject for m in verdict.measurements if m.value is None}
    assert "memory on GPU 5" in unmeasured


def _doc(level: int, gpus: int = 8) -> dict:
    tests = ["software", "pcie", "memory"][: {1: 1, 2: 3}.get(level, 3)]
    return {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": name,
                            "results": [
                                {"entity_group": "GPU", "entity_id": i, "status": "Pass"}
                                for i in range(gpus)
                            ],
                            "test_summary": {"status": "Pass"},
                        }
                        for name in tests
                    ],
                }
            ]
        },
        "metadata": {"version": "4.2.3"},
    }


def test_dcgm_gpu_missing_from_most_tests_is_not_measured():
    doc = _doc(2)
    assert (
        judge_gpu_dcgm("n", parse_dcgm_json(json.dumps(doc)), None, 2, expected_gpus=8).outcome
        == "pass"
    )
    for test in doc["DCGM Diagnostic"]["test_categories"][0]["tests"][1:]:
        test["results"] = [r for r in test["results"] if r["entity_id"] != 5]
    verdict = judge_gpu_dcgm("node03", parse_dcgm_json(json.dumps(doc)), None, 2, expected_gpus=8)
    assert verdict.outcome == "not_measured"
    assert "node03 GPU 5: dcgm 'pcie' not run" in verdict.reason
    assert "node03 GPU 4" not in verdict.reason


def test_dcgm_gpu_the_output_never_lists_is_not_measured():
    run = parse_dcgm_json(json.dumps(_doc(2, gpus=7)))
    verdict = judge_gpu_dcgm("n", run, None, 2, expected_gpus=8)
    assert (
        verdict.outcome == "not_measured" and "n GPU 7: dcgm 'software' not run" in verdict.reason
    )


def test_dcgm_summary_skip_or_error_without_results_and_empty_results():
    for status, results in (("Skip", None), ("Error", None), ("Pass", [])):
        doc = _doc(2)
        test = doc["DCGM Diagnostic"]["test_categories"][0]["tests"][2]
        test["test_summary"]["status"] = status
        if results is None:
            del test["results"]
        else:
            test["results"] = results
        verdict = judge_gpu_dcgm("n", parse_dcgm_json(json.dumps(doc)), None, 2, expected_gpus=8)
        assert verdict.outcome == "not_measured", status
        assert "n GPU 0: dcgm 'memory' not run" in verdict.reason, status


def test_dcgm_fail_among_missing_fails():
    doc = _doc(2)
    doc["DCGM Diagnostic"]["test_categories"][0]["tests"][1]["results"][2]["status"] = "Fail"
    del doc["DCGM Diagnostic"]["test_categories"][0]["tests"][2]["results"][6]
    verdict = judge_gpu_dcgm("n", parse_dcgm_json(json.dumps(doc)), None, 2, expected_gpus=8)
    assert verdict.outcome == "fail" and "n GPU 2: DCGM pcie failed" in verdict.reason
    assert "n GPU 6: dcgm 'memory' not run" in verdict.reason


def test_dcgm_3_gpu_missing_from_one_deployment_check_is_not_measured():
    text_of_3 = (
        FIXTURES / "nvvs-3.1.0-json-8gpu-software-pass-null-entries-warning-prefix-dcgm-test.txt"
    ).read_text()
    assert judge_gpu_dcgm("n", parse_dcgm_json(text_of_3), None, 1, expected_gpus=8).ok
    text = text_of_3.replace('"gpu_ids" : "0,1,2,3,4,5,6,7"', '"gpu_ids" : "1,2,3,4,5,6,7"', 1)
    verdict = judge_gpu_dcgm("n", parse_dcgm_json(text), None, 1, expected_gpus=8)
    assert verdict.outcome == "not_measured"
    assert "n GPU 0: dcgm 'software' (Denylist) not run" in verdict.reason


def test_text_after_the_json_document_is_not_one_whole_result():
    whole = text("dcgm-4.2.3-gb10-r1-json-software-fail-persistence-sram.json")
    run = parse_dcgm_json(whole + "\nError: unable to connect to host engine\n")
    assert run.error and run.error.startswith("text after dcgmi's JSON document")
