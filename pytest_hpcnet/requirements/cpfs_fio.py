"""Judges of the CPFS throughput checks on the fio runs: a node's throughput where its mount
check passed (elsewhere fio would measure the root disk), and the aggregate and fairness
over the nodes measured, naming those left out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_hpcnet.inventory.expectations import CpfsExpect
from pytest_hpcnet.probes.fio import MountInfo
from pytest_hpcnet.requirements.cpfs import (
    judge_aggregate_and_fairness,
    judge_node_throughput,
    node_bandwidth,
)
from pytest_hpcnet.requirements.cpfs_mount import judge_cpfs_mount
from pytest_hpcnet.requirements.verdict import Measurement, Verdict, not_measured, passing


def mount_verdicts(mounts: Mapping[str, MountInfo], cpfs: CpfsExpect) -> dict[str, Verdict]:
    """Each node's mount verdict (`judge_cpfs_mount`)."""
    return {node: judge_cpfs_mount(node, mount, cpfs) for node, mount in mounts.items()}


def mounted(mounts: Mapping[str, MountInfo], cpfs: CpfsExpect) -> set[str]:
    """The nodes whose mount check passed: the only ones fio measures."""
    return {node for node, verdict in mount_verdicts(mounts, cpfs).items() if verdict}


def node_mounted(node: str, rw: str, mounts: Mapping[str, MountInfo], cpfs: CpfsExpect) -> Verdict:
    """A node whose mount check failed is not measured (fio would measure the root disk)."""
    mount = mount_verdicts(mounts, cpfs).get(node)
    if mount is not None and not mount:
        return not_measured(f"{mount.reason}: fio {rw} not measured there")
    return passing()


def judge_node_fio(node: str, rw: str, run: Any, cpfs: CpfsExpect) -> Verdict:
    """`judge_node_throughput` on the node's fio run (`campaigns.storage.FioRun`; None: not
    run, its facts did not come back)."""
    if run is None:
        return not_measured(f"{node}: fio {rw} not run (its facts did not come back)")
    result = run.write if rw == "write" else run.read
    return judge_node_throughput(node, rw, result, run.error, cpfs)


def judge_cpfs_aggregate(
    rw: str,
    runs: Mapping[str, Any],
    mounts: Mapping[str, MountInfo],
    cpfs: CpfsExpect,
) -> Verdict:
    """`judge_aggregate_and_fairness` over the nodes with a figure; those without the mount
    or a figure are named (`left_out`), and the node it blames is `extra["suspects"]`."""
    verdicts = mount_verdicts(mounts, cpfs)
    left_out = sorted(set(verdicts) - {name for name, v in verdicts.items() if v})
    values = {}
    for name, run in runs.items():
        value = node_bandwidth(run.write if rw == "write" else run.read, rw)
        if value is not None:
            values[name] = value
        else:
            left_out.append(name)
    found = ()
    if left_out:
        said = ", ".join(left_out)
        found = (Measurement("left_out", said, "nodes", None, None, "no mount or no result"),)
    if not values and left_out and not runs:
        why = f"fio {rw}: no node has the CPFS mount ({', '.join(left_out)} left out)"
        return not_measured(why).with_reported(*found)
    verdict = judge_aggregate_and_fairness(rw, values, cpfs, left_out)
    verdict = verdict.with_reported(*found)
    verdict.extra["suspects"] = [verdict.subject] if verdict.subject else []
    return verdict
