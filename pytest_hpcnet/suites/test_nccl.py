"""NCCL all-reduce bus bandwidth across all nodes (nccl-tests all_reduce_perf)."""

import dataclasses

import pytest

from pytest_hpcnet.probes.nccl import NcclExpected, NcclResult, nccl_size
from pytest_hpcnet.requirements.erdma import judge_nccl_network, judge_traffic
from pytest_hpcnet.requirements.judges import (
    is_not_measured,
    judge_nccl_avg_busbw,
    judge_nccl_correct,
    judge_nccl_largest_busbw,
    judge_nccl_run,
)
from pytest_hpcnet.requirements.registry import mark
from pytest_hpcnet.transport.fanout import CommandResult

pytestmark = [pytest.mark.benchmark, mark("nccl_busbw")]


def suspects(cluster, check):
    """Where a slow collective comes from: the nodes the pair bandwidth schedule blames, else
    the node that NCCL runs on halves of the cluster leave (benchmarks.nccl.bisect_max_runs)."""
    found = cluster.perftest("ib_write_bw").localization.suspects
    if found:
        check.suspect(*found)
        return f"suspect node: {', '.join(found)} (ib_write_bw pairs)"
    halving = cluster.nccl_bisection(check)
    if halving.suspects:
        check.suspect(*halving.suspects)
        runs = len(halving.trials)
        return f"suspect node: {', '.join(halving.suspects)} (NCCL on halves, {runs} runs)"
    return f"no suspect node (NCCL on halves: {halving.reason})"


def allreduce(cluster, check) -> tuple[NcclResult, CommandResult, NcclExpected]:
    """The whole-cluster run, its launch and what was launched: what every judge here reads.
    A run that is not complete and ok (`judge_nccl_run`) fails every NCCL check."""
    result, command = cluster.nccl(check)
    launched = cluster.collective.launched()
    if result.silent_nodes:  # nodes that stopped answering during the run: named
        check.suspect(*result.silent_nodes)
    check.judge(judge_nccl_run(result, command, launched))
    return result, command, launched


def test_average_bus_bandwidth(cluster, check):
    result, command, launched = allreduce(cluster, check)
    verdict = judge_nccl_avg_busbw(result, cluster.expect, command, launched)
    check.measure(
        "avg_busbw", verdict.measured, "GB/s", verdict.bound, ">=", "expect.nccl.min_avg_busbw_gbs"
    )
    if verdict.outcome == "fail":
        nodes = len(result.hosts) or len(cluster.nodes)
        verdict = verdict.with_reason(
            f"{verdict.reason} over {nodes} nodes; {suspects(cluster, check)}"
        )
    check.judge(verdict)


def test_bus_bandwidth_at_largest_size(cluster, check):
    result, command, launched = allreduce(cluster, check)
    verdict = judge_nccl_largest_busbw(result, cluster.expect, command, launched)
    check.measure(
        "busbw_largest",
        verdict.measured,
        "GB/s",
        verdict.bound,
        ">=",
        "expect.nccl.min_busbw_largest_gbs",
    )
    if verdict.outcome == "fail":
        verdict = verdict.with_reason(f"{verdict.reason}; {suspects(cluster, check)}")
    check.judge(verdict)


def test_no_wrong_results(cluster, check):
    result, command, launched = allreduce(cluster, check)
    verdict = judge_nccl_correct(result, command, launched)
    if not is_not_measured(verdict):
        check.measure(
            "wrong", verdict.measured, "values", verdict.bound, "==", "nccl-tests validation (-c 1)"
        )
    check.judge(verdict)  # not measured under -c 0 or N/A cells: INCOMPLETE


# -- NCCL on the right transport ----------------------------------------------------------


def by_inventory_name(cluster, log):
    """The log's hosts (NCCL prints each node's hostname) renamed to inventory names."""
    renamed = {}
    for node in cluster.reachable_nodes():
        section = cluster.gather_facts()[node.name].whole("hostname")
        hostname = section.strip() if section else node.name
        renamed[hostname] = renamed.get(hostname, node.name)
        renamed[hostname.split(".")[0]] = renamed.get(hostname.split(".")[0], node.name)
    hosts = tuple(dataclasses.replace(h, host=renamed.get(h.host, h.host)) for h in log.hosts)
    return dataclasses.replace(log, hosts=hosts)


@mark("nccl_transport")
def test_nccl_runs_on_erdma_not_sockets(cluster, check):
    network = cluster.expect.erdma.nccl_network
    if network is None:
        pytest.skip("not applicable: no NCCL network expected (expect.erdma.nccl_network is null)")
    allreduce(cluster, check)
    log, artefact = cluster.collective.transport_log()
    check.command(artefact)
    nodes = [n.name for n in cluster.reachable_nodes()]
    log = by_inventory_name(cluster, log)
    gdr = cluster.expect.erdma.gdr
    check.measure("network", network, "", network, "==", "expect.erdma.nccl_network")
    if gdr is False:
        check.measure("gdr", "not supported here", "", None, None, "expect.erdma.gdr")
    check.judge(judge_nccl_network(log, nodes, cluster.expect, None))
    # the device byte counters confirm the all-reduce moved its data over the ERIs
    watch = cluster.collective.counters
    for node in nodes:
        for result in watch.commands(node):
            check.command(result)
    settings = cluster.inventory.benchmarks.nccl
    size = nccl_size(settings.args.e) or 0
    devices = {n: cluster.collective.ib_devices(n) for n in nodes}
    n = max(len(nodes), 2)
    per_device = {len(d) for d in devices.values()} or {1}
    min_bytes = max(1, size * (n - 1) // n // max(max(per_device), 1))
    traffic = judge_traffic(watch.deltas(), devices, min_bytes)
    check.measure("min_bytes_per_eri", min_bytes, "bytes", min_bytes, ">=", "ring all-reduce")
    check.judge(traffic)
