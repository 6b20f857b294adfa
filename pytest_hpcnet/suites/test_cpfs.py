"""CPFS: mounted where expected with an allowed type; fio throughput per node, in total, fairly."""

import statistics

import pytest

from pytest_hpcnet.campaigns.storage import rated_aggregate_mbs
from pytest_hpcnet.probes.fio import fstype_allowed, parse_mount
from pytest_hpcnet.requirements.registry import mark

pytestmark = [pytest.mark.benchmark, mark("cpfs")]


def test_cpfs_mounted(cluster, node, check):
    cpfs = cluster.expect.cpfs
    mount = parse_mount(cluster.facts(node, check).text("cpfs_mount"), cpfs.mount)
    check.measure("fstype", mount.fstype, "", cpfs.fstypes, "in", "expect.cpfs.fstypes")
    where = mount.error or f"inside {mount.target}"
    assert mount.error is None and mount.target == cpfs.mount, (
        f"{node.name}: {cpfs.mount} is not a mount point ({where})"
    )
    assert fstype_allowed(mount.fstype, tuple(cpfs.fstypes)), (
        f"{node.name}: {cpfs.mount} is {mount.fstype} ({mount.source}), allowed: {cpfs.fstypes}"
    )


@pytest.mark.parametrize("rw", ["write", "read"])
def test_cpfs_node_throughput(cluster, node, rw, check):
    run = cluster.fio().get(node.name)
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
    assert bound is None or value >= bound, f"{node.name}: {rw} {value:.0f} MB/s < {bound} MB/s"


@pytest.mark.parametrize("rw", ["write", "read"])
def test_cpfs_aggregate_and_fairness(cluster, rw, check):
    runs = cluster.fio()
    values = {}
    for name, run in runs.items():
        result = run.write if rw == "write" else run.read
        if result is not None and result.ok:
            values[name] = result.write_bw_mb_s if rw == "write" else result.read_bw_mb_s
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
    assert fraction >= cpfs.min_fairness, (
        f"{slowest}: {rw} {values[slowest]:.0f} MB/s is {fraction:.0%} of the median "
        f"{median:.0f} MB/s (at least {cpfs.min_fairness:.0%} expected)"
    )
