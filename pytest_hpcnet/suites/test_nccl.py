"""NCCL across all nodes: all_reduce_perf, and all_gather_perf, reduce_scatter_perf,
alltoall_perf and sendrecv_perf in one launch (nccl-tests)."""

import pytest

from pytest_hpcnet.requirements.judges import judge_nccl_run
from pytest_hpcnet.requirements.nccl import (
    judge_average_busbw,
    judge_largest_busbw,
    judge_nccl_network_used,
    judge_nccl_traffic,
    judge_no_wrong_values,
    nccl_suspects,
    network_expected,
)
from pytest_hpcnet.requirements.nccl_collectives import (
    judge_collective_busbw,
    judge_collective_correct,
    judge_collective_run,
    judge_collective_selected,
    judge_collective_traffic,
    judge_collective_transport,
)
from pytest_hpcnet.requirements.nccl_network_only import (
    judge_network_only,
    judge_network_only_expected,
    network_only_passes,
)
from pytest_hpcnet.requirements.nccl_rail import judge_nccl_rails, judge_rails_present, rail_passes
from pytest_hpcnet.requirements.registry import mark

pytestmark = [pytest.mark.benchmark, mark("nccl_busbw")]


def blame(cluster, check):
    """Asked only on a failure: the nodes the pair bandwidth schedule blames, else the node
    that NCCL runs on halves of the cluster leave (benchmarks.nccl.bisect_max_runs), named
    as suspects."""

    def suspects() -> str:
        found = cluster.perftest("ib_write_bw").localization.suspects
        halving = None if found else cluster.nccl_bisection(check)
        check.suspect(*(found or halving.suspects))
        return nccl_suspects(found, halving)

    return suspects


def allreduce(cluster, check):
    """The whole-cluster run, its launch and what was launched: what every judge here reads.
    A run that is not complete and ok (`judge_nccl_run`) fails every NCCL check; nodes that
    stopped answering during the run are named."""
    result, command = cluster.nccl(check)
    launched = cluster.collective.launched()
    check.suspect(*result.silent_nodes)
    check.judge(judge_nccl_run(result, command, launched))
    return result, command, launched


def test_average_bus_bandwidth(cluster, check):
    result, command, launched = allreduce(cluster, check)
    nodes = len(cluster.nodes)
    suspects = blame(cluster, check)
    check.judge(judge_average_busbw(result, cluster.expect, command, launched, nodes, suspects))


def test_bus_bandwidth_at_largest_size(cluster, check):
    result, command, launched = allreduce(cluster, check)
    suspects = blame(cluster, check)
    check.judge(judge_largest_busbw(result, cluster.expect, command, launched, suspects))


def test_no_wrong_results(cluster, check):
    result, command, launched = allreduce(cluster, check)
    check.judge(judge_no_wrong_values(result, command, launched))


# -- NCCL on the right transport ----------------------------------------------------------


@mark("nccl_transport")
def test_nccl_runs_on_erdma_not_sockets(cluster, check):
    check.judge(network_expected(cluster.expect))
    allreduce(cluster, check)
    log, artefact = cluster.collective.transport_log()
    check.command(artefact)
    hostnames = cluster.hostnames()
    check.judge(judge_nccl_network_used(log, hostnames, cluster.expect))
    # the device byte counters confirm the all-reduce moved its data over the ERIs
    watch = cluster.collective.counters
    for node in hostnames:
        for result in watch.commands(node):
            check.command(result)
    devices = {n: cluster.collective.ib_devices(n) for n in hostnames}
    size = cluster.inventory.benchmarks.nccl.args.e
    check.judge(judge_nccl_traffic(watch.deltas(), devices, size))


# -- the collectives beyond all-reduce: one launch, each its own requirement -------------


def selected(cluster):
    """The collectives the inventory runs (`benchmarks.nccl.collectives.run`)."""
    return cluster.inventory.benchmarks.nccl.collectives.run


def collective(cluster, check, key):
    """The collective's run of the phase (every selected collective in one launch, once);
    nodes that stopped answering during it are named."""
    run = cluster.collectives.run(key, check)
    check.suspect(*run.result.silent_nodes)
    return run


def eris(cluster, check, run):
    """Each node's ERIs NCCL was told to use; the counter reads around the collective's
    launch kept as evidence."""
    hostnames = cluster.hostnames()
    for node in hostnames:
        for result in run.counter_reads.get(node, ()):
            check.command(result)
    return {n: cluster.collective.ib_devices(n) for n in hostnames}


def collective_blame(cluster, check, key):
    """Asked only on a failure: the ib_write_bw pairs' suspects, else the node the collective
    alone on halves of the cluster leaves."""

    def suspects() -> str:
        found = cluster.perftest("ib_write_bw").localization.suspects
        halving = None if found else cluster.collectives.bisection(key, check)
        check.suspect(*(found or halving.suspects))
        return nccl_suspects(found, halving)

    return suspects


@pytest.mark.collectives
@mark("nccl_all_gather")
def test_all_gather(cluster, check):
    check.judge(judge_collective_selected(selected(cluster), "all_gather"))
    run = collective(cluster, check, "all_gather")
    check.judge(judge_collective_run(run))
    check.judge(judge_collective_correct(run))
    check.judge(judge_collective_transport(run, cluster.hostnames(), cluster.expect))
    check.judge(judge_collective_traffic(run, eris(cluster, check, run)))
    blame = collective_blame(cluster, check, "all_gather")
    check.judge(judge_collective_busbw(run, cluster.expect, blame))


@pytest.mark.collectives
@mark("nccl_reduce_scatter")
def test_reduce_scatter(cluster, check):
    check.judge(judge_collective_selected(selected(cluster), "reduce_scatter"))
    run = collective(cluster, check, "reduce_scatter")
    check.judge(judge_collective_run(run))
    check.judge(judge_collective_correct(run))
    check.judge(judge_collective_transport(run, cluster.hostnames(), cluster.expect))
    check.judge(judge_collective_traffic(run, eris(cluster, check, run)))
    blame = collective_blame(cluster, check, "reduce_scatter")
    check.judge(judge_collective_busbw(run, cluster.expect, blame))


@pytest.mark.collectives
@mark("nccl_alltoall")
def test_alltoall(cluster, check):
    check.judge(judge_collective_selected(selected(cluster), "alltoall"))
    run = collective(cluster, check, "alltoall")
    check.judge(judge_collective_run(run))
    check.judge(judge_collective_correct(run))
    check.judge(judge_collective_transport(run, cluster.hostnames(), cluster.expect))
    check.judge(judge_collective_traffic(run, eris(cluster, check, run)))
    blame = collective_blame(cluster, check, "alltoall")
    check.judge(judge_collective_busbw(run, cluster.expect, blame))


@pytest.mark.collectives
@mark("nccl_sendrecv")
def test_sendrecv(cluster, check):
    check.judge(judge_collective_selected(selected(cluster), "sendrecv"))
    run = collective(cluster, check, "sendrecv")
    check.judge(judge_collective_run(run))
    check.judge(judge_collective_correct(run))
    check.judge(judge_collective_transport(run, cluster.hostnames(), cluster.expect))
    check.judge(judge_collective_traffic(run, eris(cluster, check, run)))
    blame = collective_blame(cluster, check, "sendrecv")
    check.judge(judge_collective_busbw(run, cluster.expect, blame))


# -- each ERI's rail alone ---------------------------------------------------------------


def rail_suspects(cluster, check):
    """Asked only on a slow rail: the ib_write_bw pairs' suspects, else the node that rail
    alone on halves of the cluster leaves."""

    def suspects(device):
        found = cluster.perftest("ib_write_bw").localization.suspects
        if not found:
            paths = cluster.collectives.paths
            found = paths.bisection(device, lambda run: rail_passes(run, cluster.expect), check)
            found = found.suspects
        check.suspect(*found)
        return found

    return suspects


@pytest.mark.collectives
@mark("nccl_rail")
def test_each_rail_alone(cluster, check):
    paths = cluster.collectives.paths
    check.judge(judge_rails_present(paths.rail_devices()))
    runs = paths.rails()
    for run in runs.values():
        if run.launch is not None:
            check.command(run.launch)
    check.judge(judge_nccl_rails(runs, cluster.expect, rail_suspects(cluster, check)))


# -- the network alone (P2P, SHM and NVLS off) -------------------------------------------


def network_only_suspects(cluster, check):
    """Asked only on a failure: the ib_write_bw pairs' suspects, else the node the
    network-only run on halves of the cluster leaves."""

    def suspects():
        found = cluster.perftest("ib_write_bw").localization.suspects
        if not found:
            passes = lambda run: network_only_passes(run, cluster.expect)  # noqa: E731
            found = cluster.collectives.paths.bisection("network_only", passes, check).suspects
        check.suspect(*found)
        return found

    return suspects


@pytest.mark.collectives
@mark("nccl_network_only")
def test_network_only(cluster, check):
    check.judge(judge_network_only_expected(cluster.expect))
    run = cluster.collectives.paths.network_only()
    if run.launch is not None:
        check.command(run.launch)
    check.judge(judge_network_only(run, cluster.expect, network_only_suspects(cluster, check)))
