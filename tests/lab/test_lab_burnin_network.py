"""Network rounds during a burn-in through the real suite on the 4-node lab: a 14 s burn-in
with a round every 5 s (rounds at 5 s and 10 s), each round `ib_write_bw` between rotating
disjoint pairs and an NCCL all-reduce, with one ERI slowed for real (`eri-slow node03
erdma_0`: the emulated perftest on that ERI paces itself at 500 Mbit/s, the bound is 1):
exactly the iterations over node03's erdma_0 fail, each named with its round and time.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_hpcnet.lab import faults

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
SECONDS, EVERY = 14, 5


def test_network_rounds_during_a_burnin_fail_exactly_the_slow_eri(lab4, tmp_path):
    state = Path(lab4.state_dir)
    inventory = tmp_path / "lab.yaml"
    data = yaml.safe_load(Path(lab4.inventory).read_text())
    data["burnin"] = {"interval": 2, "heartbeat": 30, "size": 16384, "network_every": EVERY}
    # short rounds for a 2-core host (a round ~5 s under the emulated load, ~8 s with the
    # lab's GEMM size 4096, which leaves round 2 too late): 1 s pairs, one 1 MiB all-reduce
    bench = data["benchmarks"]
    bench["perftest"]["duration_s"] = 1
    bench["nccl"]["args"] = {**bench["nccl"]["args"], "e": "1M", "n": 1, "w": 0}
    # a 1 MiB all-reduce under the emulated load: 0.015-0.03 GB/s on a loaded 2-core host,
    # near the lab profile's 0.01 floor; this test is about the ERI, so the floor is lower
    data["expect"]["nccl"] = {"min_avg_busbw_gbs": 0.002, "min_busbw_largest_gbs": 0.002}
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    reports = tmp_path / "reports"
    faults.inject("eri-slow", "node03", "erdma_0", state)
    try:
        done = subprocess.run(
            [
                *(sys.executable, "-m", "pytest", "-m", "burnin", "-q", "-p", "no:cacheprovider"),
                *("-k", "test_burnin_network", "--hpcnet-burnin", f"{SECONDS}s"),
                *("--inventory", str(inventory), "--reports-dir", str(reports)),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        faults.heal("all", state)
    out = done.stdout[-3000:] + done.stderr[-2000:]
    run = next(p for p in reports.iterdir() if p.is_dir())
    lines = (run / "evidence.jsonl").read_text().splitlines()
    record = next(r for r in map(json.loads, lines) if r["check_id"] == "burnin_network")
    assert record["verdict"] == "fail", out
    measured = record["measured"]
    outcomes = {m["subject"]: m["outcome"] for m in measured}
    bw = [s for s in outcomes if re.fullmatch(r"node0\d/erdma_0-node0\d/erdma_0 round \d", s)]
    assert len(bw) == 4, outcomes  # 2 disjoint pairs a round, 2 rounds, each pair once
    assert {s.split()[-1] for s in bw} == {"1", "2"}
    pairs = [frozenset(re.findall(r"node0\d", s)) for s in bw]
    assert len(set(pairs)) == 4  # the second round pairs every node with another partner
    failed = {s for s, o in outcomes.items() if o == "fail"}
    assert failed == {s for s in bw if "node03/" in s}, outcomes  # one a round: node03's pair
    assert all(o == "pass" for s, o in outcomes.items() if s not in failed), outcomes
    nccl = [m for m in measured if m["subject"].startswith("all_reduce 4 nodes round")]
    assert len(nccl) == 4  # average and largest, each round
    for m in measured:  # every iteration with its time, within the burn-in
        t = float(re.search(r"at t=([0-9.]+) s", m["value"]).group(1))
        assert EVERY - 1 <= t <= SECONDS + 10, m
    assert "node03/erdma_0" in record["message"] and "at t=" in record["message"]
    evidence = (run / "burnin" / "network.jsonl").read_text().splitlines()
    assert len(evidence) == 2 * (1 + 2 + 1)  # a round line, 2 ERI runs, 1 all-reduce
