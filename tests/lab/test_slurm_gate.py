"""The gate against a real Slurm in the 4-node lab: a faulted node is drained with the check
in its reason and resumed after heal; a node drained by someone else stays drained; the dry
run prints exactly the commands the real run executes; a silent controller leaves nothing
half-done."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pytest_hpcnet.gate.slurm import parse_scontrol_nodes
from pytest_hpcnet.lab import faults
from pytest_hpcnet.lab import slurm as lab_slurm
from pytest_hpcnet.report.evidence import EvidenceBundle
from tests.lab.test_static_suite import ROOT, run_static

MISSING = lab_slurm.missing()
pytestmark = [pytest.mark.lab, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]
OPS_REASON = "ops: replace DIMM B2"
SEP = "\x1f"


@pytest.fixture(scope="module")
def slurm_lab(lab4):
    """The lab with munged, slurmctld and a slurmd per node; all stopped at the end."""
    started = time.monotonic()
    lab_slurm.start(lab4)
    print(f"lab Slurm up in {time.monotonic() - started:.1f} s")
    try:
        yield lab4
    finally:
        lab_slurm.stop(lab4.root)


def scontrol(lab, *args: str) -> subprocess.CompletedProcess:
    proc = lab_slurm.scontrol(lab.root, *args)
    assert proc.returncode == 0, proc.stderr
    return proc


def states(lab) -> dict:
    return parse_scontrol_nodes(scontrol(lab, "show", "node", "-o").stdout)


def gate_inventory(lab, tmp_path: Path) -> tuple[Path, Path]:
    """The lab inventory plus `scheduler:`, with scontrol behind a wrapper logging each argv."""
    log = tmp_path / "scontrol.log"
    wrapper = tmp_path / "scontrol"
    logger = 'for a in "$0" "$@"; do printf "%s\\037" "$a"; done; echo'
    wrapper.write_text(
        f"#!/bin/sh\n{{ {logger}; }} >> {shlex.quote(str(log))}\n"
        f'exec {lab_slurm.PROGRAMS["scontrol"]} "$@"\n'
    )
    wrapper.chmod(0o755)
    data = yaml.safe_load(Path(lab.inventory).read_text())
    data["scheduler"] = {"kind": "slurm", "act": True, "scontrol": str(wrapper), "timeout_s": 10}
    inventory = tmp_path / "gate.yaml"
    inventory.write_text(yaml.safe_dump(data))
    return inventory, log


def gate(lab, run_dir: Path, inventory: Path, *extra: str) -> tuple[int, list[str]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_hpcnet.cli",
            "gate",
            "apply",
            str(run_dir),
            "--inventory",
            str(inventory),
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=lab_slurm.env(lab.root),
        timeout=120,
    )
    print(f"$ hpcnet gate apply {run_dir.name} {' '.join(extra)} -> {proc.returncode}")
    print(proc.stdout + proc.stderr)
    return proc.returncode, (proc.stdout + proc.stderr).splitlines()


def logged(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [line.split(SEP)[:-1] for line in log.read_text().splitlines()]


def latest(reports: Path) -> Path:
    return sorted(p for p in reports.iterdir() if not p.name.startswith("."))[-1]


def test_faulted_node_is_drained_then_resumed_and_others_drain_is_kept(slurm_lab, tmp_path):
    lab = slurm_lab
    inventory, log = gate_inventory(lab, tmp_path)
    scontrol(lab, "update", "NodeName=node03", "State=DRAIN", f"Reason={OPS_REASON}")
    try:
        faults.inject("mtu", "node02", None, Path(lab.state_dir))
        try:  # the fault stays while the gate re-runs node02's failed checks to confirm them
            code, _ = run_static(str(inventory), tmp_path / "reports")
            assert code == 1
            failed_run = latest(tmp_path / "reports")

            dry_code, dry = gate(lab, failed_run, inventory)
            assert dry_code == 1, dry
            scontrol_path = str(inventory.parent / "scontrol")
            printed = [line for line in dry if line.startswith(scontrol_path)]
            assert logged(log) == [[scontrol_path, "show", "node", "-o"]]
            assert len(printed) == 1 and "NodeName=node02 State=DRAIN" in printed[0], dry
            assert any(line.startswith("  confirmed node02: mtu") for line in dry), dry
            assert any(
                line.startswith("  untouched node03: reason set by someone else") for line in dry
            )

            log.unlink()
            act_code, act = gate(lab, failed_run, inventory, "--act")
        finally:
            faults.heal("node02", Path(lab.state_dir))
        assert act_code == 1, act
        updates = [argv for argv in logged(log) if argv[1] == "update"]
        assert updates == [shlex.split(line) for line in printed]  # exactly what was printed
        drained = states(lab)
        assert drained["node02"].drained and drained["node02"].reason.startswith("hpcnet: mtu")
        assert "(confirmed by a re-run)" in drained["node02"].reason
        assert drained["node03"].drained and drained["node03"].reason == OPS_REASON
        assert not drained["node01"].drained and not drained["node04"].drained

        code, _ = run_static(str(inventory), tmp_path / "reports")
        assert code == 0
        healed_run = latest(tmp_path / "reports")
        dry_code, dry = gate(lab, healed_run, inventory)
        resume = f"{inventory.parent / 'scontrol'} update NodeName=node02 State=RESUME"
        assert dry_code == 0 and resume in dry, dry
        log.unlink()
        act_code, act = gate(lab, healed_run, inventory, "--act")
        assert act_code == 0, act
        assert [a for a in logged(log) if a[1] == "update"] == [shlex.split(resume)]
        after = states(lab)
        assert not after["node02"].drained and after["node02"].reason == ""
        assert after["node03"].drained and after["node03"].reason == OPS_REASON
    finally:
        lab_slurm.scontrol(lab.root, "update", "NodeName=node03", "State=RESUME")


def test_silent_controller_leaves_nothing_done_and_exits_4(slurm_lab, tmp_path):
    lab = slurm_lab
    inventory, log = gate_inventory(lab, tmp_path)
    bundle = EvidenceBundle.create(tmp_path / "reports", "20261130-020000-ab12")
    for node in ("node01", "node02"):
        bad = node == "node02"
        bundle.append(
            {
                "check_id": "mtu",
                "requirement": "r",
                "subject": node,
                "verdict": "fail" if bad else "pass",
                "message": "eth0 MTU 1500",
            }
        )
    bundle.close({"cluster": yaml.safe_load(Path(lab.inventory).read_text())["cluster"]["name"]})
    ctld = lab_slurm.recorded(lab.root)["slurmctld"]
    os.kill(ctld, signal.SIGSTOP)  # alive but silent: the worst case for a timeout
    try:
        started = time.monotonic()
        code, lines = gate(lab, bundle.run_dir, inventory, "--act")
        took = time.monotonic() - started
    finally:
        os.kill(ctld, signal.SIGCONT)
    assert code == 4, lines
    assert "slurm: nothing done; the next gate run plans again" in lines
    assert [argv[1] for argv in logged(log)] == ["show"]
    assert took < 60
    assert not states(lab)["node02"].drained
