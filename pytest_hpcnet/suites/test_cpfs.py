"""CPFS: mounted where expected with an allowed type; fio throughput per node, in total, fairly.

Throughput is measured only on nodes where the mount check passes: elsewhere fio would
measure the root disk. A node without the mount is an error naming it, never a pass."""

import pytest

from pytest_hpcnet.probes.fio import CPFS_MOUNT
from pytest_hpcnet.requirements.cpfs_fio import (
    judge_cpfs_aggregate,
    judge_node_fio,
    mounted,
    node_mounted,
)
from pytest_hpcnet.requirements.cpfs_mount import judge_cpfs_mount
from pytest_hpcnet.requirements.registry import mark

pytestmark = [pytest.mark.benchmark, mark("cpfs")]


def mounts(cluster):
    """Each reachable node's CPFS mount (from the facts, gathered once per session)."""
    path = cluster.expect.cpfs.mount
    return {n.name: cluster.facts(n).get(CPFS_MOUNT).of(path) for n in cluster.reachable_nodes()}


def test_cpfs_mounted(cluster, node, check):
    expect = cluster.expect.cpfs
    mount = cluster.facts(node, check).get(CPFS_MOUNT).of(expect.mount)
    check.judge(judge_cpfs_mount(node.name, mount, expect))


@pytest.mark.parametrize("rw", ["write", "read"])
def test_cpfs_node_throughput(cluster, node, rw, check):
    cluster.require_reachable(node, check)
    found, expect = mounts(cluster), cluster.expect.cpfs
    check.judge(node_mounted(node.name, rw, found, expect))
    run = cluster.fio(mounted(found, expect)).get(node.name)
    for result in run.commands if run is not None else ():
        check.command(result)
    check.judge(judge_node_fio(node.name, rw, run, expect))


@pytest.mark.parametrize("rw", ["write", "read"])
def test_cpfs_aggregate_and_fairness(cluster, rw, check):
    found, expect = mounts(cluster), cluster.expect.cpfs
    runs = cluster.fio(mounted(found, expect))
    verdict = judge_cpfs_aggregate(rw, runs, found, expect)
    check.suspect(*verdict.extra.get("suspects", ()))
    check.judge(verdict)
