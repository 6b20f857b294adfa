"""pytest-xdist on the 4-node lab: an `-n 2` run gives the evidence, verdict and certificate
of the `-n 0` run, each node's facts are gathered once in the whole session, and the pairs
that cross the two workers' ranges (node02->node03, node04->node01) are measured once."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_hpcnet.campaigns.partition import Partition
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import cluster as lab
from pytest_hpcnet.lab import faults
from tests.lab.test_static_suite import run_static

pytestmark = pytest.mark.lab

FAULTY = "node03"  # the first node of the second worker's range: a crossing pair's target
RUN_FIELDS = {
    "run_id",
    "generated_at",
    "started_at",
    "ended_at",
    "evidence_files",
    "evidence_digest",
}
MEASURED = {"margin", "worst_value", "worst_subject", "where", "measurement", "threshold", "unit"}
"""A certificate row's figure: its worst measurement and where, which differ between runs."""
FIRST = {"message"}
"""A row quotes its first failing record, first in the order the tests finished."""


def run(inventory: str, reports: Path, workers: int) -> tuple[int, list[dict], Path]:
    code, records = run_static(inventory, reports, "-n", str(workers))
    (folder,) = list(reports.iterdir())
    return code, records, folder


def record_keys(records: list[dict]) -> Counter:
    return Counter(
        (r["check_id"], r["subject"], r["verdict"], r["message"], r["nodeid"]) for r in records
    )


KINDS = {
    "facts": "echo '@@hpcnet begin hostname'",
    "listener": "f=$(mktemp /tmp/hpcnet-listener.",
    "probe": "d=$(mktemp -d /tmp/hpcnet-sections.",
    "stop": "kill ",
}


def ssh_work(records: list[dict]) -> Counter:
    """How many times each node ran each kind of command (facts, pair listener, pair probe,
    listener stop), counted by distinct start time across every record that cites it."""
    started: dict[tuple[str, str], set] = {}
    for record in records:
        for command in record["commands"]:
            for kind, head in KINDS.items():
                if command["command"].startswith(head):
                    started.setdefault((command["node"], kind), set()).add(command["started_at"])
    return Counter({key: len(times) for key, times in started.items()})


def flow_commands(inventory: str, fault: str | None) -> Counter:
    """The extra probe commands of an `-n 2` run: an ACL flow whose listening range (its
    target's ring predecessor's) is not its source's range."""
    inv = load_inventory(inventory)
    names = [n.name for n in inv.nodes]
    partition = Partition(names, 2)
    extra: Counter = Counter()
    for flow in inv.expect.flows.allow + inv.expect.flows.deny:
        partner = names[(names.index(flow.source) + 1) % len(names)]
        # a pair with a stopped end records no probe: the flow's is the source's only one
        down = fault == "down" and FAULTY in (flow.source, flow.target, partner)
        if partition.flow_owner(flow.target) != partition.range_of(flow.source) and not down:
            extra[(flow.source, "probe")] = 1
    return extra


def unordered(value: Any) -> Any:
    """`value` with every list sorted: the records' order is the order tests finished in."""
    if isinstance(value, dict):  # a scope entry's subjects, joined in record order
        return {
            k: ", ".join(sorted(v.split(", ")))
            if k == "subject" and isinstance(v, str)
            else unordered(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return sorted((unordered(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def certificate(folder: Path) -> dict:
    """certificate.json without what differs between any two runs (ids, times, digests)."""
    data = json.loads((folder / "certificate.json").read_text())
    data["requirements"] = [
        {k: v for k, v in row.items() if k not in MEASURED | FIRST and k != "threshold_source"}
        for row in data["requirements"]
    ]
    return unordered({k: v for k, v in data.items() if k not in RUN_FIELDS})


def summary(folder: Path) -> dict:
    data = json.loads((folder / "summary.json").read_text())
    keys = ("verdict", "counts", "scope", "unreachable_nodes", "lab", "connection_retries")
    return unordered({k: data[k] for k in keys})


def differences(one: Any, two: Any, path: str = "") -> list[str]:
    """Where two (unordered) JSON values differ, leaf by leaf."""
    if isinstance(one, dict) and isinstance(two, dict):
        keys = sorted(one.keys() | two.keys())
        return [d for k in keys for d in differences(one.get(k), two.get(k), f"{path}.{k}")]
    if isinstance(one, list) and isinstance(two, list) and len(one) == len(two):
        return [
            d
            for i, (a, b) in enumerate(zip(one, two, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    return [] if one == two else [f"{path}: {one!r:.300} != {two!r:.300}"]


@pytest.mark.parametrize("fault", [None, "mtu", "down"])
def test_two_workers_give_the_single_process_run(lab4, tmp_path, fault):
    if fault == "down":  # unreachable: found by one worker, known to the other
        os.kill(lab4.node(FAULTY).sshd_pid, signal.SIGTERM)
    elif fault:
        faults.inject(fault, FAULTY, None, Path(lab4.state_dir))
    try:
        one = run(lab4.inventory, tmp_path / "n0", 0)
        two = run(lab4.inventory, tmp_path / "n2", 2)
    finally:
        if fault == "down":
            lab.start_node_sshd(lab4, FAULTY)
        elif fault:
            faults.heal(FAULTY, Path(lab4.state_dir))
    (code0, records0, folder0), (code2, records2, folder2) = one, two
    assert code2 == code0 == (1 if fault else 0)
    assert record_keys(records2) == record_keys(records0)
    assert differences(summary(folder0), summary(folder2)) == []
    assert differences(certificate(folder0), certificate(folder2)) == []
    bad = {(r["check_id"], r["subject"]) for r in records2 if r["verdict"] != "pass"}
    if fault == "mtu":  # the crossing pair into the faulty node, judged once, by node02's worker
        assert ("path_mtu", f"node02->{FAULTY}") in bad, bad
    if fault == "down":
        assert summary(folder2)["verdict"] == "INCOMPLETE"
        assert ("path_mtu", f"node02->{FAULTY}") in bad, bad
    work0, work2 = ssh_work(records0), ssh_work(records2)
    probes0 = Counter({k: v for k, v in work0.items() if k[1] == "probe"})
    probes2 = Counter({k: v for k, v in work2.items() if k[1] == "probe"})
    assert work2 - probes2 == work0 - probes0  # nothing measured twice, nothing left out
    # a source probes its ACL flows in the command of the range listening on the flow's
    # target: one more command where that is another range than the source's own
    assert probes2 - probes0 == flow_commands(lab4.inventory, fault)
    assert {n: c for (n, kind), c in work2.items() if kind == "facts"} == {
        f"node0{i}": 1 for i in range(1, 5)
    }
    # stopped: node03 listens for nobody and node04's pair (from node03) records nothing
    listeners = {f"node0{i}": 1 for i in range(1, 5) if fault != "down" or i not in (3, 4)}
    assert {n: c for (n, kind), c in work2.items() if kind == "listener"} == listeners
