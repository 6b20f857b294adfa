"""Every way a requirement fails carries a declared fault code, from the judge to the
evidence, terminal, JUnit, metrics and certificate (docs/fault-codes.md)."""

from __future__ import annotations

import re
from importlib import import_module
from pathlib import Path

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.lab.faults import KINDS
from pytest_hpcnet.probes import rdma_parsers
from pytest_hpcnet.probes.gpu import parse_query_gpu
from pytest_hpcnet.probes.gpu_xid import XID_MEANINGS, parse_kernel_log
from pytest_hpcnet.report.certificate.summary import findings
from pytest_hpcnet.report.fault_codes import markdown
from pytest_hpcnet.report.metrics import prometheus_text
from pytest_hpcnet.report.recording import Check, record_codes
from pytest_hpcnet.report.records import CheckRecord
from pytest_hpcnet.report.terminal_summary import failure_line
from pytest_hpcnet.requirements import gpu, rdma
from pytest_hpcnet.requirements.registry import (
    BY_ID,
    JUDGES_PACKAGE,
    REPAIRS,
    REQUIREMENTS,
    default_code,
    fault_codes,
    xid_code,
)
from pytest_hpcnet.requirements.verdict import Measurement, failing

CODE = re.compile(r"^HPCNET(-[A-Z0-9]+)+$")
LITERAL = re.compile(r'"(HPCNET(?:-[A-Z0-9]+)+)"')
DOCS = Path(__file__).resolve().parents[2] / "docs" / "fault-codes.md"


def test_every_requirement_declares_its_fault_codes():
    missing = [r.id for r in REQUIREMENTS if not r.faults]
    assert missing == [], (
        f"requirements without fault codes: {', '.join(missing)}; give each "
        "`faults=(FaultCode(code, meaning, repair, action), ...)` in requirements/registry.py "
        "(the first is its default), then regenerate docs/fault-codes.md"
    )


def test_every_code_is_unique_well_formed_and_has_a_repair_class():
    seen: dict[str, list[str]] = {}
    for requirement in REQUIREMENTS:
        for fault in requirement.faults:
            seen.setdefault(fault.code, []).append(requirement.id)
    assert {c: ids for c, ids in seen.items() if len(ids) > 1} == {}, "codes declared twice"
    declared = [f for r in REQUIREMENTS for f in r.faults]
    assert [f.code for f in declared if not CODE.match(f.code)] == []
    assert [f.code for f in declared if f.repair not in REPAIRS] == []
    assert [f.code for f in declared if not (f.meaning and f.action)] == []


def _modules(requirement) -> set[str]:
    return {reference.partition(":")[0] for reference in requirement.judges}


def test_every_code_a_judge_names_is_declared_for_a_requirement_it_judges():
    """A code literal in a judge module belongs to a requirement that module judges."""
    declared = fault_codes()
    wrong = {}
    for module in {m for r in REQUIREMENTS for m in _modules(r)}:
        source = Path(import_module(f"{JUDGES_PACKAGE}.{module}").__file__).read_text()
        for code in LITERAL.findall(source):
            owner = declared.get(code, ("", None))[0]
            if not owner or module not in _modules(BY_ID[owner]):
                wrong[code] = (module, owner or "not declared")
    assert wrong == {}


def test_every_xid_with_a_meaning_has_a_code_of_gpu_xid():
    codes = {f.code for f in BY_ID["gpu_xid"].faults}
    assert {xid_code(x) for x in XID_MEANINGS} <= codes
    assert xid_code(999) == default_code("gpu_xid") == "HPCNET-GPU-XID"


def test_every_lab_fault_breaks_requirements_with_a_default_code():
    """Whatever a lab fault fails, its failing measurements carry a code (the judge's, else
    the requirement's default, which the recorder fills in)."""
    assert {k.name: [c for c in k.breaks if not default_code(c)] for k in KINDS.values()} == {
        k.name: [] for k in KINDS.values()
    }


def expect(**gpu_keys) -> Expectations:
    return Expectations.model_validate({"gpu": gpu_keys})


def failed_codes(verdict) -> set[str]:
    return {m.code for m in verdict.measurements if m.outcome == "fail"}


def test_ecc_failures_carry_the_cause(fixture_text):
    verdict = gpu.judge_ecc(
        "node02", parse_query_gpu(fixture_text("gpu", "query-8gpu-ecc-gpu2.csv"))
    )
    # GPU 2: uncorrected errors and a pending remap (what it cannot report fails with them)
    gpu2 = {m.name: m.code for m in verdict.measurements if m.subject == "GPU 2"}
    assert gpu2["ecc_uncorrected_volatile"] == "HPCNET-GPU-ECC-DBE"
    assert gpu2["remapped_rows_pending"] == "HPCNET-GPU-ROW-REMAP-PENDING"
    assert {"HPCNET-GPU-ECC-DBE", "HPCNET-GPU-ROW-REMAP-PENDING"} <= failed_codes(verdict)
    text = (
        "index, pci.bus_id, ecc.mode.current, ecc.errors.uncorrected.volatile.total, "
        "retired_pages.pending, remapped_rows.pending, remapped_rows.failure\n"
        "0, 00000000:0A:00.0, Disabled, 0, No, No, No\n"
        "1, 00000000:0B:00.0, Enabled, 0, No, No, Yes\n"
    )
    verdict = gpu.judge_ecc("node09", parse_query_gpu(text))
    assert failed_codes(verdict) == {"HPCNET-GPU-ECC-OFF", "HPCNET-GPU-ROW-REMAP-FAIL"}


def test_xid_failures_carry_the_most_drastic_xid_per_gpu(fixture_text):
    log = parse_kernel_log(fixture_text("gpu", "kernel-log-journalctl-xids.txt"))
    healthy = parse_query_gpu(fixture_text("gpu", "query-8gpu-h200.csv"))
    verdict = gpu.judge_xid("node03", log, expect(allowed_xids=[13]), healthy)
    coded = {m.subject: m.code for m in verdict.measurements if m.outcome == "fail"}
    # GPU 2: Xid 63 and 94 (both reset); GPU 7: Xid 79 (reboot) leads the node
    assert coded == {
        "": "HPCNET-GPU-XID-79",
        "GPU 2": "HPCNET-GPU-XID-63",
        "GPU 7": "HPCNET-GPU-XID-79",
    }
    unknown = parse_kernel_log("hpcnet-klog: dmesg\n[ 1.0] NVRM: Xid (PCI:0000:18:00): 999, x\n")
    assert failed_codes(gpu.judge_xid("node04", unknown, expect())) == {"HPCNET-GPU-XID"}


def test_a_port_down_is_not_a_device_missing(fixture_text):
    found = rdma_parsers.parse_ibv_devinfo(fixture_text("rdma", "erdma-two-devices.txt"))
    assert failed_codes(rdma.judge_ports_active("n1", found, "erdma_*")) == {"HPCNET-ERI-PORT-DOWN"}
    none = rdma_parsers.parse_ibv_devinfo("")
    assert failed_codes(rdma.judge_ports_active("n1", none, "erdma_*")) <= {"HPCNET-ERI-DEVICES"}


def test_a_failure_without_a_code_takes_its_requirements_default():
    check = Check("mtu", "Jumbo MTU", "node02", "node", "t::x", None)
    verdict = failing(
        "eth1: MTU 1500, expected 8500",
        measurements=(Measurement("mtu", 1500, "bytes", 8500, "==", "expect.mtu", "eth1"),),
    )
    for m in verdict.measurements:
        check.record_measurement(m)
    assert [m.get("code") for m in check.measured] == ["HPCNET-MTU"]
    record = check.record("fail", "eth1: MTU 1500", None)
    assert record_codes(record) == ["HPCNET-MTU"]
    assert record_codes({**record, "measured": []}) == ["HPCNET-MTU"]  # a regression
    assert record_codes({**record, "check_id": "site_own", "measured": []}) == []


def _record(**kw) -> CheckRecord:
    measured = [
        {
            "name": "mtu",
            "value": 1500,
            "threshold": 8500,
            "comparison": "==",
            "subject": "eth1",
            "outcome": "fail",
            "code": "HPCNET-MTU",
        }
    ]
    base = {
        "check_id": "mtu",
        "requirement": "Jumbo MTU",
        "subject": "node02",
        "verdict": "fail",
        "message": "eth1: MTU 1500",
        "measured": measured,
    }
    return CheckRecord.model_validate({**base, **kw})


def test_the_code_reaches_terminal_metrics_and_certificate():
    record = _record(codes=["HPCNET-MTU"])
    assert failure_line(record.model_dump()) == "FAIL mtu [node02] HPCNET-MTU: eth1: MTU 1500"
    text = prometheus_text([record])
    assert 'hpcnet_fault{check="mtu",subject="node02",code="HPCNET-MTU",repair="config"} 1' in text
    (found,) = findings([record], run_date=None)  # type: ignore[arg-type]
    assert found.code == "HPCNET-MTU"
    # evidence written before codes: the record's failed measurements, else the default
    assert _record().fault_codes() == ["HPCNET-MTU"]
    assert _record(measured=[]).fault_codes() == ["HPCNET-MTU"]
    assert _record(verdict="pass").fault_codes() == []


def test_docs_list_every_code_as_the_registry_declares_it():
    assert DOCS.read_text() == markdown(), (
        "docs/fault-codes.md differs from the registry: "
        "python -m pytest_hpcnet.report.fault_codes > docs/fault-codes.md"
    )
