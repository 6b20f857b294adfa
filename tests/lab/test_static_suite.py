"""The static suite against the 4-node lab: clean when healthy, and each injected fault fails
exactly the checks that concern the faulty node, each naming it, and nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_hpcnet.lab import faults
from pytest_hpcnet.requirements.registry import BY_ID

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
NODE = "node02"


def run_static(
    inventory: str,
    reports: Path,
    *extra: str,
    marker: str = "static",
    output: list[str] | None = None,
) -> tuple[int, list[dict]]:
    """Run `pytest -m <marker> --inventory ...` as a user would; return exit code and
    evidence records (and append what the run printed to `output`, when given)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            marker,
            "-q",
            "-p",
            "no:cacheprovider",
            "--inventory",
            inventory,
            "--reports-dir",
            str(reports),
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    if output is not None:
        output.append(proc.stdout + proc.stderr)
    runs = sorted(reports.iterdir())
    evidence = runs[-1] / "evidence.jsonl"
    records = [json.loads(line) for line in evidence.read_text().splitlines() if line.strip()]
    return proc.returncode, records


def concerns(record: dict, node: str) -> bool:
    subject = record["subject"]
    return subject == node or node in subject.split("->") or node in record["message"]


def failing(records: list[dict]) -> list[dict]:
    return [r for r in records if r["verdict"] in ("fail", "not_measured", "error")]


def test_healthy_lab_passes_the_static_suite(lab4, tmp_path):
    printed: list[str] = []
    code, records = run_static(lab4.inventory, tmp_path, output=printed)
    progress = [line for line in printed[0].splitlines() if line.startswith("hpcnet: ")]
    assert progress[:2] == ["hpcnet: facts from 4 nodes ...", progress[1]], progress
    assert progress[1].startswith("hpcnet: facts from 4 nodes: 4 answered, 0 unreachable (")
    assert any(ln.startswith("hpcnet: pair probes on 4 pairs: 4 pairs and ") for ln in progress)
    assert not failing(records), [r["message"] for r in failing(records)]
    assert code == 0
    checks = {r["check_id"] for r in records if r["verdict"] == "pass"}
    assert {
        "reachability",
        "erdma",
        "mtu",
        "path_mtu",
        "security_group",
        "acl",
        "placement",
        "tuning",
    } <= checks


FAULTS = {
    "mtu": (None, {"mtu", "path_mtu"}),
    # the host blocks what the lab's console allows: the audit's cross-check names both
    "block": ("tcp/29500", {"security_group", "cloud_audit"}),
    "reject": ("udp/4791", {"security_group", "cloud_audit"}),
    # no device and no erdma module: every eRDMA check of the node; topo -m then shows no NIC
    # and sysfs no RDMA device (pcie_links: fewer than rdma.min_devices); the ERI that
    # rdma.min_devices plans is not listed, so its MTU and its pairs' path MTU are not measured
    "no-rdma": (
        None,
        {
            "erdma",
            "erdma_identity",
            "erdma_driver",
            "erdma_port",
            "gpu_topology",
            "pcie_links",
            "mtu",
            "path_mtu",
        },
    ),
    "port-down": (None, {"erdma"}),
    "vswitch": (None, {"placement"}),
    "zone": (None, {"placement"}),
    "sysctl": (None, {"tuning"}),
    "nic-errors": (None, {"tuning"}),
    "imds-token": (None, set()),  # the probe uses token mode: nothing may fail
}


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_fault_fails_exactly_the_checks_of_that_node(lab4, tmp_path, kind):
    arg, expected_checks = FAULTS[kind]
    faults.inject(kind, NODE, arg, Path(lab4.state_dir))
    try:
        code, records = run_static(lab4.inventory, tmp_path)
    finally:
        faults.heal(NODE, Path(lab4.state_dir))
    bad = failing(records)
    assert code == (1 if expected_checks else 0)
    assert {r["check_id"] for r in bad} == expected_checks, [r["message"] for r in bad]
    for record in bad:
        assert concerns(record, NODE), (
            f"{record['check_id']} {record['subject']}: {record['message']}"
        )
        assert NODE in record["message"], record["message"]
        if record["verdict"] == "fail":  # a failure carries codes its requirement declares
            declared = {f.code for f in BY_ID[record["check_id"]].faults}
            assert record["codes"] and set(record["codes"]) <= declared, record["codes"]
    if kind == "port-down":
        assert [r["codes"] for r in bad] == [["HPCNET-ERI-PORT-DOWN"]]


def test_heal_restores_a_clean_pass(lab4, tmp_path):
    code, records = run_static(lab4.inventory, tmp_path)
    assert code == 0, [r["message"] for r in failing(records)]


def test_xdist_workers_write_one_bundle_and_one_certificate(lab4, tmp_path):
    code, records = run_static(lab4.inventory, tmp_path, "-n", "2")
    assert code == 0
    ids = [r["nodeid"] for r in records]
    assert len(ids) == len(set(ids)) > 40  # each check once, from both workers
    (run,) = list(tmp_path.iterdir())
    assert json.loads((run / "summary.json").read_text())["verdict"] == "PASSED"  # -m static
