"""Reboot and re-accept against the lab's real Slurm and control plane: in one night, a
transient GPU fault (an Xid) is rebooted away, re-accepted under load and resumed; a
persistent one (an eRDMA port down) is rebooted, fails the re-acceptance and stays drained
with its ticket bundle; a `config` fault (the MTU) is never rebooted. Under a reset policy, a
GPU's ECC fault is reset away (`nvidia-smi -r`), re-accepted under load and resumed, and a
node whose GPU a process holds is not reset."""

from __future__ import annotations

import gzip
import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from pytest_hpcnet import cli
from pytest_hpcnet.lab import faults
from pytest_hpcnet.lab import slurm as lab_slurm
from pytest_hpcnet.lab.state import LabState
from pytest_hpcnet.report.evidence import EvidenceBundle
from pytest_hpcnet.report.signing import generate_keypair
from pytest_hpcnet.report.ticket import read_ticket
from tests.lab.test_slurm_gate import gate, gate_inventory, latest, slurm_lab, states
from tests.lab.test_static_suite import run_static

MISSING = lab_slurm.missing()
pytestmark = [pytest.mark.lab, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]
__all__ = ["slurm_lab"]
POLICY = {
    "reset": [],
    "reboot": ["reset", "reboot"],
    "max_share": 0.5,
    "max_nodes_per_night": 2,
    "suspect_nights": 7,
    "reboot_timeout_s": 60,
    "ssh_timeout_s": 30,
    "reaccept_timeout_s": 240,
}

CHECKS = "no_xid_since_boot or rdma_ports_active or interface_mtu_is_expected"
"""The static checks the three faults fail (the night's run, narrowed to keep it short)."""


def sshd_pids(lab) -> dict[str, int | None]:
    state = LabState.load(Path(lab.state_dir))
    return {n.name: n.sshd_pid for n in state.nodes}


def test_transient_is_resumed_persistent_stays_drained_config_never_rebooted(slurm_lab, tmp_path):
    lab = slurm_lab
    inventory, _ = gate_inventory(lab, tmp_path)
    data = yaml.safe_load(inventory.read_text())
    data["gate"] = {"repair": POLICY}
    data["scheduler"]["confirm_runs"] = 0  # the gate's re-run is tested in test_slurm_gate
    data.setdefault("benchmarks", {})["gpu_load"] = {"seconds": 5}
    inventory.write_text(yaml.safe_dump(data))
    state_dir = Path(lab.state_dir)
    faults.inject("gpu-xid", "node02", None, state_dir)
    faults.inject("port-down", "node03", None, state_dir)
    faults.inject("mtu", "node04", None, state_dir)
    before = sshd_pids(lab)
    try:
        code, _ = run_static(str(inventory), tmp_path / "reports", "-k", CHECKS)
        assert code == 1
        run_dir = latest(tmp_path / "reports")
        started = time.monotonic()
        act_code, act = gate(lab, run_dir, inventory, "--act")
        took = time.monotonic() - started
        assert act_code == 1, act
        after = sshd_pids(lab)
        left = {n.name: dict(n.faults) for n in LabState.load(state_dir).nodes}
        slurm_now = states(lab)
    finally:
        faults.heal("all", state_dir)
        for name in ("node02", "node03", "node04"):
            lab_slurm.scontrol(lab.root, "update", f"NodeName={name}", "State=RESUME")
    entry = json.loads((tmp_path / "reports/.gate" / run_dir.name / "gate.jsonl").read_text())
    kept = {r["node"]: r for r in entry["repair"]}
    print(f"gate apply with repairs: {took:.1f} s")
    for name in sorted(kept):
        print(json.dumps(kept[name], sort_keys=True))

    assert kept["node02"]["action"] == "reboot" and kept["node02"]["outcome"] == "resumed"
    assert kept["node02"]["codes"] == ["HPCNET-GPU-XID-94"]
    assert 0 < kept["node02"]["reboot_to_ssh_s"] < 30 and kept["node02"]["ssh_to_accepted_s"] > 0
    assert not slurm_now["node02"].drained and "gpu-xid" not in left["node02"]
    assert after["node02"] != before["node02"]

    assert kept["node03"]["action"] == "reboot" and kept["node03"]["outcome"] == "failed"
    assert "re-acceptance" in kept["node03"]["why"]
    assert slurm_now["node03"].drained and slurm_now["node03"].ours
    assert kept["node03"]["codes"] == ["HPCNET-ERI-PORT-DOWN"]
    assert "port-down" in left["node03"] and after["node03"] != before["node03"]
    ticket = Path(kept["node03"]["ticket"])  # the bundle of a node left for replacement
    assert ticket.is_file() and ticket.name == f"ticket-{run_dir.name}-node03.tar.gz"
    assert "HPCNET-ERI-PORT-DOWN" in read_ticket(ticket)["summary.txt"].decode()
    assert "ticket" not in kept["node02"] and "ticket" not in kept["node04"]

    assert "action" not in kept["node04"] and kept["node04"]["outcome"] == "not_repaired"
    assert "HPCNET-MTU (config)" in kept["node04"]["why"]
    assert slurm_now["node04"].drained and after["node04"] == before["node04"]
    assert not slurm_now["node01"].drained and after["node01"] == before["node01"]
    text = "\n".join(act)
    assert "repair node02: HPCNET-GPU-XID-94: reboot (reboot to SSH" in text


RESET_POLICY = {**POLICY, "reset": ["reset"], "reboot": []}


def test_reset_fault_is_reset_and_resumed_held_gpu_is_not_reset(slurm_lab, tmp_path):
    lab = slurm_lab
    inventory, _ = gate_inventory(lab, tmp_path)
    data = yaml.safe_load(inventory.read_text())
    data["gate"] = {"repair": RESET_POLICY}
    data["scheduler"]["confirm_runs"] = 0
    data.setdefault("benchmarks", {})["gpu_load"] = {"seconds": 5}
    inventory.write_text(yaml.safe_dump(data))
    state_dir = Path(lab.state_dir)
    faults.inject("gpu-ecc", "node02", "2", state_dir)
    faults.inject("gpu-ecc", "node03", "2", state_dir)
    holder = subprocess.Popen(["sleep", "300"])
    held = state_dir / "nodes" / "node03" / "gpu_busy" / "2"
    held.parent.mkdir(parents=True, exist_ok=True)
    held.write_text(f"{time.time() + 300:.3f} {holder.pid} python3\n")
    before = sshd_pids(lab)
    try:
        code, _ = run_static(str(inventory), tmp_path / "reports", "-k", "gpu_memory_health")
        assert code == 1
        run_dir = latest(tmp_path / "reports")
        # the share limit, half the nodes failing: at 0.25 of 4 one node is repaired at once
        narrow = tmp_path / "narrow.yaml"
        data["gate"]["repair"] = {**RESET_POLICY, "max_share": 0.25}
        narrow.write_text(yaml.safe_dump(data))
        started = time.monotonic()
        _, planned = gate(lab, run_dir, narrow)
        print(f"gate apply (dry run, the share limit): {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        act_code, act = gate(lab, run_dir, inventory, "--act")
        took = time.monotonic() - started
        assert act_code == 1, act
        left = {n.name: dict(n.faults) for n in LabState.load(state_dir).nodes}
        slurm_now = states(lab)
    finally:
        holder.kill()
        holder.wait()
        held.unlink(missing_ok=True)
        faults.heal("all", state_dir)
        for name in ("node02", "node03"):
            lab_slurm.scontrol(lab.root, "update", f"NodeName={name}", "State=RESUME")
    entry = json.loads((tmp_path / "reports/.gate" / run_dir.name / "gate.jsonl").read_text())
    kept = {r["node"]: r for r in entry["repair"]}
    print(f"gate apply with resets: {took:.1f} s")
    for name in sorted(kept):
        print(json.dumps(kept[name], sort_keys=True))

    plan = "\n".join(planned)
    assert "repair node02: HPCNET-GPU-ECC-DBE,HPCNET-GPU-ROW-REMAP-PENDING: reset (planned)" in plan
    assert (
        "repair node03: HPCNET-GPU-ECC-DBE,HPCNET-GPU-ROW-REMAP-PENDING: no repair: skipped: "
        "1 nodes in repair at once at most (gate.repair: max_share 0.25 of 4" in plan
    )

    reset = kept["node02"]
    assert reset["action"] == "reset" and reset["outcome"] == "resumed", reset
    assert reset["codes"] == ["HPCNET-GPU-ECC-DBE", "HPCNET-GPU-ROW-REMAP-PENDING"]
    assert reset["reset_s"] >= 0 and reset["ssh_to_accepted_s"] > 0
    assert any("gpu_load" in line for line in reset["reaccept"])
    assert not slurm_now["node02"].drained and "gpu-ecc" not in left["node02"]

    busy = kept["node03"]
    assert "action" not in busy and busy["outcome"] == "skipped", busy
    assert f"a process holds a GPU ({holder.pid}, python3)" in busy["why"]
    assert slurm_now["node03"].drained and slurm_now["node03"].ours
    assert "gpu-ecc" in left["node03"]
    assert sshd_pids(lab) == before  # nothing rebooted
    assert "repair node02: HPCNET-GPU-ECC-DBE,HPCNET-GPU-ROW-REMAP-PENDING: reset (reset" in (
        "\n".join(act)
    )


def test_ticket_bug_report_over_ssh(lab4, tmp_path):
    """`hpcnet ticket --bug-report` on a lab node: the emulated nvidia-bug-report.sh runs
    over SSH and its log lands in the bundle."""
    bundle = EvidenceBundle.create(tmp_path / "reports", "20261203-020000-ab12")
    failed = {"check_id": "gpu_health", "requirement": "GPU memory health", "verdict": "fail"}
    bundle.append({**failed, "subject": "node02", "codes": ["HPCNET-GPU-ECC-DBE"]})
    bundle.close({"cluster": "lab"})
    run_dir = bundle.run_dir
    generate_keypair(tmp_path / "k.pem", tmp_path / "k.pub.pem")
    out = tmp_path / "ticket.tar.gz"
    argv = ["ticket", str(run_dir), "node02", "--sign-key", str(tmp_path / "k.pem")]
    argv += ["--inventory", lab4.inventory, "--bug-report", "--out", str(out)]
    started = time.monotonic()
    assert cli.main(argv) == 0
    print(f"hpcnet ticket --bug-report: {time.monotonic() - started:.1f} s")
    files = read_ticket(out)
    assert "nvidia-smi -q" in gzip.decompress(files["nvidia-bug-report.log.gz"]).decode()
    assert json.loads(files["ticket.json"])["bug_report"]["exit_status"] == 0
