"""The GPU load suite as a user runs it on one GPU machine (`connection: local`, no SSH),
here against the lab's emulated nvidia-smi, dcgmi and torch on PATH: every check of the
`gpu_load` marker passes on the controller itself, and the certificate's evidence appendix
has the table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pytest_hpcnet.lab.emulation import PYLIB, install_tools
from pytest_hpcnet.lab.state import LabNode, LabState
from tests.gpu_load_checks import GPU_LOAD_CHECKS

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_load_suite_on_a_local_node(tmp_path):
    state = LabState(str(tmp_path), "lab.yaml", nodes=[LabNode("node01", "198.18.0.11", 8500)])
    state.save()
    bin_dir = install_tools(state)
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        "cluster: {name: one-gpu-box, region: cn-lab}\n"
        "nodes:\n  - {name: node01, host: localhost, connection: local}\n"
        "expect: {profile: lab}\n"
        "benchmarks: {gpu_load: {seconds: 5, size: 16384, nccl: {e: 1G, n: 2, w: 1}}}\n"
    )
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HPCNET_LAB_NODE": "node01",
        "HPCNET_LAB_STATE": str(tmp_path),
        "PYTHONPATH": str(bin_dir / PYLIB),
    }
    reports = tmp_path / "reports"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "gpu_load",
            "-q",
            "-p",
            "no:cacheprovider",
            "--inventory",
            str(inventory),
            "--reports-dir",
            str(reports),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    run = sorted(reports.iterdir())[-1]
    records = [json.loads(x) for x in (run / "evidence.jsonl").read_text().splitlines() if x]
    verdicts = {(r["check_id"], r["verdict"]) for r in records}
    assert verdicts == {(c, "pass") for c in GPU_LOAD_CHECKS}, [
        r["message"] for r in records if r["verdict"] != "pass"
    ] or proc.stdout[-3000:]
    assert proc.returncode == 0, proc.stdout[-3000:]
    # each engine's version, found once per node in the facts or printed by its run
    versions = {k: v for r in records for k, v in r["tool_versions"].items()}
    assert versions["torch"].startswith("2.5.1+hpcnet.lab")
    assert (versions["dcgm"], versions["nvbandwidth"]) == ("4.2.3", "v0.10.0")
    assert versions["nccl_tests"] and versions["nccl_tests_nccl"].startswith("2.")
    compute = next(r for r in records if r["check_id"] == "gpu_compute")
    assert {"torch", "dcgm", "nvbandwidth"} <= set(compute["tool_versions"])
    html = (run / "evidence.html").read_text()  # the certificate's evidence appendix
    assert '<section id="gpus-under-load">' in html and html.count("GPU 7") >= 1
