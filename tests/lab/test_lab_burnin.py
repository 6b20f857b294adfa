"""Burn-in through the real suite on the 4-node lab with two ERIs, in compressed time (24 s,
a sample every 2 s): faults that appear with time each fail exactly their node and GPU (or
device: a flapping ERI link, an AER error and an NVSwitch SXid mid-run) at about the time
injected, the controller is killed mid-run and resumed (`--hpcnet-burnin-resume`) without losing or
repeating a sample, and a node that stops answering halfway (`block tcp/22`) is named with
its last-seen time while the others go on. One run of ~40 s covers all of it.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_hpcnet.lab import faults, links
from pytest_hpcnet.lab.state import LabState

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
SECONDS, INTERVAL = 24, 2
IFACES = ("eth0", "eth1")
INJECTED = [  # kind, node, argument: GPU (or ERI) and when (seconds after the injection)
    ("burnin-throttle", "node01", "2 9"),  # after the GPU's 3 baseline windows
    ("burnin-ecc", "node02", "5 8"),
    ("burnin-checksum", "node03", "1 5"),  # windows
    ("burnin-flap", "node01", "erdma_1 8"),  # from 8 s on, every 8 s
]
MID_RUN = [  # injected once the first samples are in (after the nodes' baseline lines)
    ("aer", "node03", "erdma_0 nonfatal 2"),
    ("nvswitch-sxid", "node02", "22013"),
]
FAILS = {  # node: the measurements that fail, each of one GPU or device
    "node01": {
        "GPU 2 burnin.temperature",
        "GPU 2 burnin.slowdown",
        "GPU 2 burnin.tflops_drift",
        "erdma_1 burnin.eri_counters",
        "eth1 burnin.nic_drops",
    },
    "node02": {"GPU 5 burnin.ecc_uncorrected", "GPU 5 burnin.retired", "NVSwitch burnin.sxid"},
    "node03": {"GPU 1 burnin.checksum", "erdma_0 burnin.aer"},
}
WHEN = {  # a failed measurement -> the fault whose time it names
    "erdma_1 burnin.eri_counters": "burnin-flap",
    "eth1 burnin.nic_drops": "burnin-flap",
    "erdma_0 burnin.aer": "aer",
    "NVSwitch burnin.sxid": "nvswitch-sxid",
}
DEVICES = {
    "burnin.aer",
    "burnin.aer_correctable",
    "burnin.pcie_link",
    "burnin.nvlink_errors",
    "burnin.eri_counters",
    "burnin.nic_errors",
    "burnin.nic_drops",
    "burnin.copy_drift",
}


def pytest_run(inventory: Path, reports: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "pytest", "-m", "burnin", "-q", "-p", "no:cacheprovider"),
            *("--inventory", str(inventory), "--reports-dir", str(reports), *extra),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(predicate, timeout: float) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.2)


def records_of(run: Path) -> dict[str, dict]:
    lines = (run / "evidence.jsonl").read_text().splitlines()
    return {r["subject"]: r for r in map(json.loads, lines) if r["check_id"] == "burnin"}


def lab_fault(state: Path, node: str, kind: str) -> str:
    """The value the lab recorded for a node's fault (`GPU@EPOCH`, `ERI@FIRST@PERIOD`)."""
    record = json.loads((state / "lab.json").read_text())
    return next(n for n in record["nodes"] if n["name"] == node)["faults"][kind]


def first_time(value: str) -> float:
    return float(re.search(r"at t=([0-9.]+) s", value).group(1))


def test_burnin_faults_over_time_a_killed_controller_and_a_lost_node(lab2, tmp_path):
    state = Path(lab2.state_dir)
    inventory = tmp_path / "lab.yaml"
    inventory.write_text(
        Path(lab2.inventory).read_text()
        + f"burnin: {{interval: {INTERVAL}, heartbeat: 30, size: 4096}}\n"
    )
    reports = tmp_path / "reports"
    try:
        first = pytest_run(inventory, reports, "--hpcnet-burnin", f"{SECONDS}s")
        wait_for(lambda: len(list(reports.glob("*/burnin/run.json"))) == 1, 60)
        run = next(reports.glob("*/burnin")).parent
        for kind, node, arg in INJECTED:  # the burn-in has started on every node
            faults.inject(kind, node, arg, state)
        recorded = {kind: lab_fault(state, node, kind) for kind, node, _ in INJECTED}
        wait_for(lambda: (run / "burnin" / "node01.jsonl").exists(), 30)
        mid_at = {}
        for kind, node, arg in MID_RUN:  # after the node's baseline device line
            faults.inject(kind, node, arg, state)
            mid_at[kind] = time.time()
        wait_for(lambda: (run / "burnin" / "node01.jsonl").stat().st_size > 3000, 30)
        first.send_signal(signal.SIGKILL)  # the controller dies mid-run; the nodes go on
        first.communicate()
        kept = {p.name: p.read_text() for p in (run / "burnin").glob("node0*.jsonl")}
        faults.inject("block", "node04", "tcp/22", state)  # node04 stops answering
        resumed = pytest_run(inventory, reports, "--hpcnet-burnin-resume", run.name)
        out, _ = resumed.communicate(timeout=120)
    finally:
        faults.heal("all", state)
    runs = sorted(p for p in reports.iterdir() if p.is_dir())
    assert len(runs) == 2, out
    found = records_of(runs[-1])
    assert {n: r["verdict"] for n, r in found.items()} == {
        "node01": "fail",
        "node02": "fail",
        "node03": "fail",
        "node04": "not_measured",
    }, out[-3000:]
    burnin = runs[-1] / "burnin"
    run_id = json.loads((burnin / "run.json").read_text())["run"]
    for node, expected in FAILS.items():
        failed = {
            f"{m['subject']} {m['name']}": m["value"]
            for m in found[node]["measured"]
            if m["outcome"] == "fail"
        }
        assert set(failed) == expected, (node, failed)
        unmeasured = [m for m in found[node]["measured"] if m["outcome"] == "not_measured"]
        assert not unmeasured, (node, unmeasured)
        folder = state / "nodes" / node / "burnin" / run_id
        t0 = float(re.search(r"t0=([0-9.]+)", (folder / "started").read_text()).group(1))
        when = {
            "burnin-flap": float(recorded["burnin-flap"].split("@")[1]),  # its first flap
            **mid_at,
        }
        for name, value in failed.items():  # a sample's lag, or a window's (TFLOPS)
            kind = WHEN.get(name) or next(k for k, n, _ in INJECTED if n == node)
            if kind == "burnin-checksum":  # the first window after AFTER_WINDOWS
                assert "(window 6)" in value, (name, value)
                continue
            at = (when[kind] if kind in when else float(recorded[kind].partition("@")[2])) - t0
            lag = 4 * INTERVAL + 1 if name.endswith("tflops_drift") else 2 * INTERVAL + 1
            assert abs(first_time(value) - at) <= lag, (node, name, value, at)
    passed = {  # every other device's watch passed: the flap and AER failed only theirs
        f"{m['subject']} {m['name']}"
        for node in ("node01", "node02", "node03")
        for m in found[node]["measured"]
        if m["name"] in DEVICES and m["outcome"] == "pass"
    }
    assert {"erdma_0 burnin.eri_counters", "eth0 burnin.nic_drops", "GPU 7 burnin.aer"} <= passed
    assert {
        "GPU 0 burnin.nvlink_errors",
        "GPU 0 burnin.pcie_link",
        "GPU 0 burnin.copy_drift",
    } <= passed
    assert not [m for m in found["node04"]["measured"] if m["outcome"] == "fail"]
    assert "stopped answering" in found["node04"]["message"]
    assert "last seen 20" in found["node04"]["message"]
    for node in ("node01", "node02", "node03"):  # every sample the node wrote, once
        on_node = state / "nodes" / node / "burnin" / run_id / "samples.jsonl"
        collected = (burnin / f"{node}.jsonl").read_text()
        assert collected == on_node.read_text()
        assert collected.startswith(kept[f"{node}.jsonl"])
        assert '"end": "done"' in collected.splitlines()[-1]
    page = (runs[-1] / "evidence.html").read_text()  # a timeline per node, failures marked
    assert all(f'id="burnin-{n}"' in page for n in ("node01", "node02", "node03")), out[-2000:]
    assert page.count('class="failure"') >= len(FAILS)


def test_a_flapping_eri_drops_frames_on_its_own_link_only(lab2):
    """The frames a flap sends after bringing the link up reach that link alone: the bridge
    keeps the ENI's MAC through the flap (a vSwitch knows its ENIs), so nothing floods to the
    other nodes' links, whose counters would fail every later run."""
    state_dir = Path(lab2.state_dir)
    state = LabState.load(state_dir)
    before = {(n.name, i): links.rx_dropped(n, i) for n in state.nodes for i in IFACES}
    faults.inject("burnin-flap", "node01", "erdma_1 1", state_dir)
    try:
        wait_for(
            lambda: (
                links.rx_dropped(state.nodes[0], "eth1")
                >= before[("node01", "eth1")] + 2 * links.DROP_FRAMES
            ),
            15,
        )  # two flaps: the second after the FDB lost it
    finally:
        faults.heal("node01", state_dir)
    after = {(n.name, i): links.rx_dropped(n, i) for n in state.nodes for i in IFACES}
    grew = {key for key in after if after[key] != before[key]}
    assert grew == {("node01", "eth1")}, (before, after)
