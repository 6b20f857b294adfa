"""eRDMA in depth through the real suite (issue 16): a 4-node lab with two ERIs per node,
`pytest --inventory lab -m ... -k ...` as a user runs it. Healthy, every eRDMA check
passes; each fault fails exactly its checks, each naming the faulted node (and device).

One lab for the module: faults are applied and healed in turn (healed even on failure).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pytest_hpcnet.lab import faults
from tests.lab.test_static_suite import failing, run_static

pytestmark = pytest.mark.lab

NODE, DEV = "node02", "erdma_1"
STATIC = "erdma"
"""-k of the static eRDMA checks (suites/test_erdma.py)."""
BENCH = "every_eri or all_eris or no_suspect or error_counter or runs_on_erdma"
"""-k of the benchmark eRDMA checks (per-ERI, all at once, localization, counters, NCCL)."""


def run(lab, tmp_path, marker, keywords, kind=None, arg=None, inventory=None):
    """The suite with `kind` injected on NODE (healed afterwards): (exit code, records)."""
    state_dir = Path(lab.state_dir)
    if kind:
        faults.inject(kind, NODE, arg, state_dir)
    try:
        return run_static(inventory or lab.inventory, tmp_path, "-k", keywords, marker=marker)
    finally:
        if kind:
            faults.heal(NODE, state_dir)


def named(records, *words):
    """Failing records whose message lacks one of `words` (each must name them)."""
    return [r["message"] for r in failing(records) if not all(w in r["message"] for w in words)]


def test_healthy_two_eri_lab_passes_every_erdma_check(lab2, tmp_path):
    code, records = run(lab2, tmp_path / "s", "static", STATIC)
    assert code == 0, [r["message"] for r in failing(records)]
    passed = {r["check_id"] for r in records if r["verdict"] == "pass"}
    assert {"erdma", "erdma_identity", "erdma_driver", "erdma_port"} <= passed
    code, records = run(lab2, tmp_path / "b", "benchmark", BENCH)
    assert code == 0, [r["message"] for r in failing(records)]
    passed = {r["check_id"] for r in records if r["verdict"] == "pass"}
    assert {
        "erdma_eri_bw",
        "erdma_instance_bw",
        "perftest_localization",
        "rdma_counters",
        "nccl_transport",
    } <= passed
    eri = [r for r in records if r["check_id"] == "erdma_eri_bw"]
    measured = {(m.get("subject"), m["name"]) for r in eri for m in r["measured"]}
    assert {("erdma_0", "bw_avg"), ("erdma_1", "bw_avg")} <= measured  # every ERI


def test_eri_down_fails_that_node_and_device(lab2, tmp_path):
    code, records = run(lab2, tmp_path / "s", "static", STATIC, "eri-down", DEV)
    assert code == 1
    assert {r["check_id"] for r in failing(records)} == {"erdma"}
    assert not named(records, NODE, DEV)
    code, records = run(lab2, tmp_path / "b", "benchmark", BENCH, "eri-down", DEV)
    bad = {r["check_id"] for r in failing(records)}
    assert code == 1
    assert bad == {
        "erdma_eri_bw",
        "erdma_instance_bw",
        "perftest_localization",
        "nccl_transport",
    }, [r["message"] for r in failing(records)]
    assert not named(records, NODE)
    localization = [
        r["message"] for r in failing(records) if r["check_id"] == "perftest_localization"
    ]
    assert all(f"suspect device {NODE} {DEV}" in m for m in localization), localization


def test_eri_slow_fails_that_device_bandwidth(lab2, tmp_path):
    keywords = "every_eri or no_suspect"
    code, records = run(lab2, tmp_path, "benchmark", keywords, "eri-slow", DEV)
    assert code == 1
    bad = failing(records)
    assert {r["check_id"] for r in bad} == {"erdma_eri_bw", "perftest_localization"}
    assert not named(records, NODE, DEV)
    eri = [r["message"] for r in bad if r["check_id"] == "erdma_eri_bw"]
    assert all("erdma_0" not in m.split("(suspect")[0] for m in eri), eri  # only erdma_1 fails


def test_nccl_socket_fallback_names_the_node(lab2, tmp_path):
    code, records = run(lab2, tmp_path, "benchmark", "runs_on_erdma", "nccl-socket")
    assert code == 1
    (bad,) = failing(records)
    assert bad["check_id"] == "nccl_transport"
    assert f"{NODE}: NCCL used Socket" in bad["message"], bad["message"]
    others = [n for n in ("node01", "node03", "node04") if f"{n}:" in bad["message"]]
    assert not others, bad["message"]


def test_gid_shift_is_followed_and_a_pinned_index_fails(lab2, tmp_path):
    """The suite picks each device's IPv4 GID (index 2 after the shift): it passes; an
    inventory that pins index 1 for the node (a constant) fails at that node and device."""
    code, records = run(lab2, tmp_path / "a", "static", "gid_index", "gid-shift", DEV)
    assert code == 0, [r["message"] for r in failing(records)]
    mine = [r for r in records if r["subject"] == NODE and r["check_id"] == "erdma_port"]
    chosen = {m["name"]: m["value"] for r in mine for m in r["measured"] if "gid" in m["name"]}
    assert chosen == {"erdma_0 gid_index": 1, "erdma_1 gid_index": 2}, chosen
    data = yaml.safe_load(Path(lab2.inventory).read_text())
    for node in data["nodes"]:
        if node["name"] == NODE:
            node["rdma"] = {"gid_index": 1}
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text(yaml.safe_dump(data, sort_keys=False))
    code, records = run(lab2, tmp_path / "b", "static", "gid_index", "gid-shift", DEV, pinned)
    assert code == 1
    (bad,) = failing(records)
    assert bad["check_id"] == "erdma_port" and bad["subject"] == NODE
    assert f"{NODE} {DEV}: GID index 1 is 2001:db8:18::2" in bad["message"], bad["message"]


def test_rate_limit_drops_fail_the_counter_check_of_that_device(lab2, tmp_path):
    code, records = run(lab2, tmp_path, "benchmark", "error_counter", "rate-limit-drops", DEV)
    assert code == 1
    (bad,) = failing(records)
    assert bad["check_id"] == "rdma_counters" and bad["subject"] == NODE
    assert f"{NODE} {DEV}: hw_" in bad["message"] and "limit_drop_cnt" in bad["message"]


def test_gpudirect_perftest_runs_each_eri_with_its_nearest_gpu(lab2, tmp_path):
    """Opt-in (`benchmarks.perftest.gdr`) where GDR is expected: ib_write_bw --use_cuda=<the
    GPU nearest the ERI in nvidia-smi topo -m> per device, every node in one pair; the lab's
    topology puts erdma_0 nearest GPU0 and erdma_1 nearest GPU4."""
    data = yaml.safe_load(Path(lab2.inventory).read_text())
    data["expect"].setdefault("erdma", {})["gdr"] = True
    data["benchmarks"]["perftest"]["gdr"] = True
    inventory = tmp_path / "gdr.yaml"
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    code, records = run(lab2, tmp_path / "r", "benchmark", "gpudirect", inventory=inventory)
    assert code == 0, [r["message"] for r in failing(records)]
    gdr = [r for r in records if r["check_id"] == "erdma_gdr_bw"]
    assert len(gdr) == 4 and {r["verdict"] for r in gdr} == {"pass"}
    commands = [c["command"] for r in gdr for c in r["commands"]]
    assert any("-d erdma_0" in c and "--use_cuda=0" in c for c in commands), commands
    assert any("-d erdma_1" in c and "--use_cuda=4" in c for c in commands), commands
    measured = {(m.get("subject"), m["name"]) for r in gdr for m in r["measured"]}
    assert measured == {("erdma_0", "gdr bw_avg"), ("erdma_1", "gdr bw_avg")}
