"""CPFS: mounted where expected with an allowed type; fio throughput per node, in total, fairly.

Throughput is measured only on nodes where the mount check passes: elsewhere fio would
measure the root disk. A node without the mount is an error naming it, never a pass."""

import statistics

import pytest

from pytest_hpcnet.campaigns.storage import rated_aggregate_mbs
from pytest_hpcnet.probes.fio import parse_mount
from pytest_hpcnet.requirements.cpfs_mount import judge_cpfs_mount
from pytest_hpcnet.requirements.registry import mark

pytestmark = [pytest.mark.benchmark, mark("cpfs")]


class NotMounted(Exception):
    """The throughput of a node without the CPFS mount was not measured."""


def mount_verdicts(cluster, check=None) -> dict:
    """Each reachable node's mount verdict (from the facts, gathered once per session)."""
    cpfs = cluster.expect.cpfs
    return {
        node.name: judge_cpfs_mount(
            node.name, parse_mount(cluster.facts(node, check).text("cpfs_mount"), cpfs.mount), cpfs
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
    cpfs = cluster.expect.cpfs
    mount = parse_mount(cluster.facts(node, check).text("cpfs_mount"), cpfs.mount)
    check.measure("fstype", mount.fstype, "", cpfs.fstypes, "in", "expect.cpfs.fstypes")
    verdict = judge_cpfs_mount(node.name, mount, cpfs)
    assert verdict, verdict.reason


@pytest.mark.parametrize("rw", ["write", "read"])
def test_cpfs_node_throughput(cluster, node, rw, check):
    mount = mount_verdicts(cluster).get(node.name)
    if mount is not None and not mount:
        raise NotMounted(f"{mount.reason}: fio {rw} not measured there")
    runs, _ = mounted_runs(cluster, check)
    run = runs.get(node.name)
    assert run is not None, f"{node.name}: fio did not run"
    for result in run.commands:
        check.command(result)
    result = run.write if rw == "write" else run.read
    assert run.error is None and result is not None and result.ok, (
        f"{node.name}: fio {rw} failed: {run.error or (result.error if result else 'no output')}"
    )
    value = result.write_bw_mb_s if rw == "write" else result.read_bw_mb_s
    cpfs = cluster.expect.cpfs
    bound = cpfs.min_write_mbs_per_node if rw == "write" else cpfs.min_read_mbs_per_node
    check.measure(f"{rw}_bw", value, "MB/s", bound, ">=", f"expect.cpfs.min_{rw}_mbs_per_node")
    assert value is not None and value > 0, f"{node.name}: fio {rw}: unparseable output"
    if bound is None:
        pytest.skip(f"no bound set (expect.cpfs.min_{rw}_mbs_per_node); measured {value:.0f} MB/s")
    assert value >= bound, f"{node.name}: {rw} {value:.0f} MB/s < {bound} MB/s"


@pytest.mark.parametrize("rw", ["write", "read"])
def test_cpfs_aggregate_and_fairness(cluster, rw, check):
    runs, left_out = mounted_runs(cluster, check)
    if left_out:
        check.measure("left_out", ", ".join(left_out), "nodes", None, None, "no CPFS mount there")
    values = {}
    for name, run in runs.items():
        result = run.write if rw == "write" else run.read
        if result is not None and result.ok:
            values[name] = result.write_bw_mb_s if rw == "write" else result.read_bw_mb_s
    if not values and left_out:
        raise NotMounted(f"fio {rw}: no node has the CPFS mount ({', '.join(left_out)} left out)")
    assert values, f"fio {rw}: no node produced a result"
    total = sum(values.values())
    cpfs = cluster.expect.cpfs
    if cpfs.capacity_tib:
        rated = rated_aggregate_mbs(rw, cpfs.capacity_tib, len(values))
        bound = rated * (1 + cpfs.aggregate_lower)
        check.measure(f"{rw}_aggregate", total, "MB/s", bound, ">=", "expect.cpfs.capacity_tib")
        assert total >= bound, (
            f"aggregate {rw} {total:.0f} MB/s < {bound:.0f} MB/s (rated {rated:.0f})"
        )
    median = statistics.median(values.values())
    slowest = min(values, key=values.get)
    fraction = values[slowest] / median if median else 0.0
    check.measure(
        f"{rw}_fairness", fraction, "of median", cpfs.min_fairness, ">=", "expect.cpfs.min_fairness"
    )
    if fraction < cpfs.min_fairness:
        check.suspect(slowest)
    over = f" (over {len(values)} nodes; left out without the mount: {', '.join(left_out)})"
    assert fraction >= cpfs.min_fairness, (
        f"{slowest}: {rw} {values[slowest]:.0f} MB/s is {fraction:.0%} of the median "
        f"{median:.0f} MB/s (at least {cpfs.min_fairness:.0%} expected)"
        f"{over if left_out else ''}"
    )
