"""CPFS: mounted where expected with an allowed type; fio throughput per node, in total, fairly.

Throughput is measured only on nodes where the mount check passes: elsewhere fio would
measure the root disk. A node without the mount is an error naming it, never a pass."""

import pytest

from pytest_hpcnet.probes.fio import parse_mount
from pytest_hpcnet.requirements import cpfs
from pytest_hpcnet.requirements.cpfs_mount import judge_cpfs_mount
from pytest_hpcnet.requirements.registry import mark
from pytest_hpcnet.requirements.verdict import NotMeasured

pytestmark = [pytest.mark.benchmark, mark("cpfs")]


class NotMounted(NotMeasured):
    """The throughput of a node without the CPFS mount was not measured."""


def mount_verdicts(cluster, check=None) -> dict:
    """Each reachable node's mount verdict (from the facts, gathered once per session)."""
    expect = cluster.expect.cpfs
    return {
        node.name: judge_cpfs_mount(
            node.name,
            parse_mount(cluster.facts(node, check).text("cpfs_mount"), expect.mount),
            expect,
        )
        for node in cluster.reachable_nodes()
    }


def mounted_runs(cluster, check) -> tuple[dict, list[str]]:
    """fio runs on the nodes whose mount check passed, and the nodes left out."""
    verdicts = mount_verdicts(cluster)
    mounted = {name for name, verdict in verdicts.items() if verdict}
    left_out = sorted(set(verdicts) - mounted)
    return cluster.fio(mounted), left_out


def test_cpfs_mounted(cluster, node, check):
    expect = cluster.expect.cpfs
    mount = parse_mount(cluster.facts(node, check).text("cpfs_mount"), expect.mount)
    check.judge(judge_cpfs_mount(node.name, mount, expect))


@pytest.mark.parametrize("rw", ["write", "read"])
def test_cpfs_node_throughput(cluster, node, rw, check):
    cluster.require_reachable(node, check)
    mount = mount_verdicts(cluster).get(node.name)
    if mount is not None and not mount:
        raise NotMounted(f"{mount.reason}: fio {rw} not measured there")
    runs, _ = mounted_runs(cluster, check)
    run = runs.get(node.name)
    if run is None:
        raise NotMounted(f"{node.name}: fio {rw} not run (its facts did not come back)")
    for result in run.commands:
        check.command(result)
    result = run.write if rw == "write" else run.read
    check.judge(cpfs.judge_node_throughput(node.name, rw, result, run.error, cluster.expect.cpfs))


@pytest.mark.parametrize("rw", ["write", "read"])
def test_cpfs_aggregate_and_fairness(cluster, rw, check):
    runs, left_out = mounted_runs(cluster, check)
    values = {}
    for name, run in runs.items():
        value = cpfs.node_bandwidth(run.write if rw == "write" else run.read, rw)
        if value is not None:
            values[name] = value
        else:
            left_out.append(name)
    if left_out:
        check.measure("left_out", ", ".join(left_out), "nodes", None, None, "no mount or no result")
    if not values and left_out and not runs:
        raise NotMounted(f"fio {rw}: no node has the CPFS mount ({', '.join(left_out)} left out)")
    verdict = cpfs.judge_aggregate_and_fairness(rw, values, cluster.expect.cpfs, left_out)
    if verdict.subject:
        check.suspect(verdict.subject)
    check.judge(verdict)
