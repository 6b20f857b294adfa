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
    assert skipped.outcome == "not_measured" and "skipped software" in skipped.reason
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
