"""Judges of the NCCL suite's checks on the whole-cluster all-reduce: average and largest
bus bandwidth (a failure names its suspect node), correctness, the network NCCL chose and the
bytes each ERI moved. Each records the figure it judged."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.counters import CounterDelta
from pytest_hpcnet.probes.nccl import NcclExpected, NcclResult, nccl_size
from pytest_hpcnet.probes.nccl_debug import NcclNetLog
from pytest_hpcnet.requirements.erdma import judge_nccl_network, judge_traffic, reported_first
from pytest_hpcnet.requirements.judges import (
    is_not_measured,
    judge_nccl_avg_busbw,
    judge_nccl_correct,
    judge_nccl_largest_busbw,
)
from pytest_hpcnet.requirements.verdict import (
    FAIL,
    Measurement,
    Verdict,
    not_applicable,
    passing,
)
from pytest_hpcnet.transport.results import CommandResult

Blame = Callable[[], str]
"""Where a slow collective comes from, asked only when a bandwidth check fails (it may run
NCCL on halves of the cluster)."""


def nccl_suspects(pair_suspects: Sequence[str], halving: Any) -> str:
    """Where a slow collective comes from: the nodes the pair bandwidth schedule blames,
    else the node NCCL runs on halves of the cluster leave (`campaigns.bisection`)."""
    if pair_suspects:
        return f"suspect node: {', '.join(pair_suspects)} (ib_write_bw pairs)"
    if halving.suspects:
        runs = len(halving.trials)
        return f"suspect node: {', '.join(halving.suspects)} (NCCL on halves, {runs} runs)"
    return f"no suspect node (NCCL on halves: {halving.reason})"


def judge_average_busbw(
    result: NcclResult,
    expect: Expectations,
    command: CommandResult,
    launched: NcclExpected | None,
    nodes: int,
    blame: Blame,
) -> Verdict:
    """`judge_nccl_avg_busbw`, its figure recorded; a failure names the node count (the
    run's hosts, else `nodes`) and the suspect."""
    verdict = judge_nccl_avg_busbw(result, expect, command, launched)
    source = "expect.nccl.min_avg_busbw_gbs"
    found = Measurement("avg_busbw", verdict.measured, "GB/s", verdict.bound, ">=", source)
    if verdict.outcome == FAIL:
        over = len(result.hosts) or nodes
        verdict = verdict.with_reason(f"{verdict.reason} over {over} nodes; {blame()}")
    return reported_first(verdict, found)


def judge_largest_busbw(
    result: NcclResult,
    expect: Expectations,
    command: CommandResult,
    launched: NcclExpected | None,
    blame: Blame,
) -> Verdict:
    """`judge_nccl_largest_busbw`, its figure recorded; a failure names the suspect."""
    verdict = judge_nccl_largest_busbw(result, expect, command, launched)
    source = "expect.nccl.min_busbw_largest_gbs"
    found = Measurement("busbw_largest", verdict.measured, "GB/s", verdict.bound, ">=", source)
    if verdict.outcome == FAIL:
        verdict = verdict.with_reason(f"{verdict.reason}; {blame()}")
    return reported_first(verdict, found)


def judge_no_wrong_values(
    result: NcclResult, command: CommandResult, launched: NcclExpected | None
) -> Verdict:
    """`judge_nccl_correct`, the wrong values counted where validation ran (not measured
    under `-c 0` or N/A cells: INCOMPLETE)."""
    verdict = judge_nccl_correct(result, command, launched)
    if is_not_measured(verdict):
        return verdict
    source = "nccl-tests validation (-c 1)"
    found = Measurement("wrong", verdict.measured, "values", verdict.bound, "==", source)
    return reported_first(verdict.with_code("HPCNET-NCCL-WRONG-VALUES"), found)


def network_expected(expect: Expectations) -> Verdict:
    """A NCCL network is expected (`expect.erdma.nccl_network`); else not applicable."""
    if expect.erdma.nccl_network is None:
        return not_applicable("no NCCL network expected (expect.erdma.nccl_network is null)")
    return passing()


def by_inventory_name(log: NcclNetLog, hostnames: Mapping[str, str | None]) -> NcclNetLog:
    """The log's hosts (NCCL prints each node's hostname) renamed to inventory names
    (`hostnames`: each reached node's hostname, None where unread)."""
    renamed: dict[str, str] = {}
    for node, said in hostnames.items():
        hostname = said if said is not None else node
        renamed[hostname] = renamed.get(hostname, node)
        renamed[hostname.split(".")[0]] = renamed.get(hostname.split(".")[0], node)
    hosts = tuple(dataclasses.replace(h, host=renamed.get(h.host, h.host)) for h in log.hosts)
    return dataclasses.replace(log, hosts=hosts)


def judge_nccl_network_used(
    log: NcclNetLog, hostnames: Mapping[str, str | None], expect: Expectations
) -> Verdict:
    """NCCL chose `expect.erdma.nccl_network` on every reached node (`hostnames`' keys),
    the log's hosts read by inventory name; the network (and GPUDirect off) reported."""
    network = expect.erdma.nccl_network
    found = [Measurement("network", network, "", network, "==", "expect.erdma.nccl_network")]
    if expect.erdma.gdr is False:
        found.append(Measurement("gdr", "not supported here", "", None, None, "expect.erdma.gdr"))
    named = by_inventory_name(log, hostnames)
    return reported_first(judge_nccl_network(named, list(hostnames), expect, None), *found)


def judge_nccl_traffic(
    deltas: Mapping[str, CounterDelta],
    devices: Mapping[str, Sequence[str]],
    size_arg: str | int | None,
) -> Verdict:
    """Every node's ERIs moved their share of the ring all-reduce of the largest size
    (`-e`): `size x (n-1)/n` over the node's devices, at least one byte."""
    size = nccl_size(size_arg) or 0
    n = max(len(devices), 2)
    per_device = {len(d) for d in devices.values()} or {1}
    min_bytes = max(1, size * (n - 1) // n // max(max(per_device), 1))
    found = Measurement("min_bytes_per_eri", min_bytes, "bytes", min_bytes, ">=", "ring all-reduce")
    return reported_first(judge_traffic(deltas, devices, min_bytes), found)
