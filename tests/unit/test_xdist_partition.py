"""Nodes split between xdist workers: contiguous ranges, one owner per pair and flow, each
node's facts gathered once in the whole session (the others read them from the spool), and
the ranges' pair probes together equal the single-process ones."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest

import tests.unit.test_pair_pipeline as pipe
from pytest_hpcnet.campaigns.facts import FactsCampaign
from pytest_hpcnet.campaigns.pairs.campaign import PairCampaign
from pytest_hpcnet.campaigns.partition import CLUSTER_GROUP, FactsSpool, Partition
from pytest_hpcnet.inventory.loader import load_inventory

pytest_plugins = ["pytester"]
WORKERS = 3


class WorkerTransport(pipe.FakeTransport):
    """The pipeline tests' canned transport, as one worker's: it learns of nodes another
    worker found unreachable."""

    def __init__(self) -> None:
        super().__init__()
        self.noted: dict[str, str] = {}

    def note_unreachable(self, name: str, reason: str) -> None:
        self.noted[name] = reason


@pytest.fixture
def inventory(tmp_path):
    path = tmp_path / "pipe.yaml"
    path.write_text(pipe.INVENTORY)
    pipe.INV = load_inventory(path)
    return pipe.INV


def workers(inventory, spool: FactsSpool | None) -> list[tuple[FactsCampaign, WorkerTransport]]:
    partition = Partition([n.name for n in inventory.nodes], WORKERS)
    out = []
    for _ in range(WORKERS):
        transport = WorkerTransport()
        out.append(
            (FactsCampaign(inventory, transport, partition=partition, spool=spool), transport)
        )
    return out


def measured(found: dict) -> dict:
    """Pair or flow facts without the commands that measured them."""
    return {key: replace(value, commands=()) for key, value in found.items()}


def runs(transports: list[WorkerTransport], kind: str) -> Counter:
    return Counter(name for t in transports for k, name in t.log if k == kind)


def test_ranges_are_contiguous_and_owners_follow_the_ring():
    names = [f"n{i}" for i in range(1, 11)]
    partition = Partition(names, 3)
    assert partition.ranges == [names[0:3], names[3:6], names[6:10]]
    assert [partition.range_of(n) for n in ("n1", "n4", "n10", "nx")] == [0, 1, 2, None]
    assert partition.pair_owner("n3") == 0  # n3->n4 crosses into range 1: its source's
    assert partition.flow_owner("n4") == 0  # n4's listener is the n3->n4 pair's
    assert partition.flow_owner("n1") == 2  # the ring's last pair n10->n1
    assert Partition.group(1) == "hpcnet-1" and Partition.group(None) == CLUSTER_GROUP
    assert Partition(["a", "b"], 8).ranges == [["a"], ["b"]]  # never an empty range


def test_each_node_facts_are_gathered_once_in_the_whole_session(inventory, tmp_path):
    spool = FactsSpool.create(tmp_path / "spool", "t")
    single = FactsCampaign(inventory, WorkerTransport()).gather()
    split = workers(inventory, spool)
    for index, (campaign, _) in enumerate(split):  # each worker's own range first
        for name in campaign.partition.ranges[index]:
            campaign.gather()[name]
    for campaign, _ in split:  # then every node, as a cluster-wide check reads them
        assert dict(campaign.gather()) == dict(single)
    transports = [t for _, t in split]
    assert runs(transports, "facts") == Counter(n.name for n in inventory.nodes)
    gathered = [c.gathered_here for c, _ in split]
    assert gathered == [set(r) for r in split[0][0].partition.ranges]
    # a node another worker found unreachable is unreachable here too
    assert [t.noted for t in transports] == [{}, {pipe.DOWN: "refused"}, {pipe.DOWN: "refused"}]


def test_without_the_spool_a_worker_gathers_what_it_reads(inventory):
    (campaign, transport), *_ = workers(inventory, None)
    campaign.gather()["n1"]
    assert runs([transport], "facts") == Counter(["n1", "n2", "n3", "n4"])


def test_a_range_not_shared_in_time_is_not_measured(inventory, tmp_path):
    spool = FactsSpool.create(tmp_path / "spool", "t")
    (spool.path / "facts-1.claim").touch()  # claimed by a worker that never answers
    campaign, transport = workers(inventory, spool)[0]
    campaign._share_wait_s = lambda: 0.0
    facts = campaign.gather()["n5"]
    assert facts.result.unreachable == "facts of nodes n5..n8 not shared by another worker"
    assert runs([transport], "facts") == Counter()


def test_the_ranges_pair_probes_equal_the_single_process_ones(inventory, tmp_path):
    reference = WorkerTransport()
    single = PairCampaign(FactsCampaign(inventory, reference))
    single.gather()
    spool = FactsSpool.create(tmp_path / "spool", "t")
    split = workers(inventory, spool)
    for index, (campaign, _) in enumerate(split):
        for name in campaign.partition.ranges[index]:
            campaign.gather()[name]
    pairs, flows = {}, {}
    for index, (campaign, _) in enumerate(split):
        found = PairCampaign(campaign).gather_range(index)
        pairs.update(found[0])
        flows.update(found[1])
    # what each pair saw is the same; n5's probe of its flow to n2 is range 0's command
    assert measured(pairs) == measured(single._pairs) and measured(flows) == measured(single._flows)
    transports = [t for _, t in split]
    assert runs(transports, "facts") == Counter(n.name for n in inventory.nodes)
    listeners = runs(transports, "listen")
    assert set(listeners.values()) == {1}  # one listener per node: no port taken twice
    assert listeners == runs([reference], "listen")


def test_the_scheduler_groups_by_what_the_workers_collected(tmp_path):
    pytest.importorskip("xdist")
    from pytest_hpcnet.xdist_schedule import RangeScheduling

    spool = FactsSpool.create(tmp_path / "spool", "t")
    groups = {"s.py::t[n1]": "hpcnet-0", "s.py::t[n9]": "hpcnet-2"}
    spool.put("collected-gw0", {"groups": groups, "planned": {"mtu": ["n1", "n9"]}})
    spool.put("collected-gw1", {"groups": groups, "planned": {"mtu": ["n1", "n9"]}})
    assert spool.collected().planned == {"mtu": ["n1", "n9"]}
    scheduler = RangeScheduling.__new__(RangeScheduling)
    scheduler._groups = spool.collected().groups
    assert scheduler._split_scope("s.py::t[n9]") == "hpcnet-2"
    assert scheduler._split_scope("site.py::test_own") == "site.py::test_own"


SPLIT_INVENTORY = """\
cluster: {name: split, region: cn-test}
ssh: {connect_timeout_s: 1, connect_retries: 1}
nodes:
  - {name: "n[1-4]", host: "198.18.0.[201-204]"}
"""

SPLIT_SUITE = """\
import os
from pathlib import Path

import pytest


def ran(name):
    with Path(os.environ["RAN"]).open("a") as out:
        out.write(f"{os.environ['PYTEST_XDIST_WORKER']} {name}\\n")


@pytest.mark.check("reachability", "r")
def test_per_node(node, check):
    ran(node.name)


@pytest.mark.check("path_mtu", "p")
def test_per_pair(node_pair, check):
    ran(node_pair[0].name + "->" + node_pair[1].name)


@pytest.mark.check("placement", "c")
def test_cluster_wide(check):
    ran("cluster")
"""


def test_two_workers_run_each_range_and_its_pairs_in_one_worker(pytester, tmp_path, monkeypatch):
    pytest.importorskip("xdist")
    pytester.makefile(".yaml", inv=SPLIT_INVENTORY)
    pytester.makepyfile(test_split=SPLIT_SUITE)
    monkeypatch.setenv("RAN", str(tmp_path / "ran.txt"))
    result = pytester.runpytest_subprocess(
        ".", "--inventory", "inv.yaml", "--reports-dir", "out", "-n", "2", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=9)
    where = dict(line.split()[::-1] for line in (tmp_path / "ran.txt").read_text().splitlines())
    first, second = where["n1"], where["n3"]
    assert first != second
    assert {where[s] for s in ("n1", "n2", "n1->n2", "n2->n3")} == {first}  # n2->n3: its source's
    assert {where[s] for s in ("n3", "n4", "n3->n4", "n4->n1")} == {second}
    (run,) = list((pytester.path / "out").iterdir())
    records = [json.loads(line) for line in (run / "evidence.jsonl").read_text().splitlines()]
    assert sorted(r["nodeid"] for r in records) == sorted(  # the ids of a run without xdist
        [f"test_split.py::test_per_node[n{i}]" for i in range(1, 5)]
        + [f"test_split.py::test_per_pair[{p}]" for p in ("n1->n2", "n2->n3", "n3->n4", "n4->n1")]
        + ["test_split.py::test_cluster_wide"]
    )
