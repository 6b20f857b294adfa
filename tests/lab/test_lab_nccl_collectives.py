"""The collectives phase on 4 lab nodes through the real Open MPI mpirun: two faults, each
failing exactly its node and its collectives, and nothing else.

`nccl-incast node03` slows alltoall and all-gather (the bisection of all-gather names
node03), leaving all-reduce, reduce-scatter and sendrecv within bounds; `nccl-socket-one
node02 alltoall` puts node02 on sockets for alltoall only: its transport fails, and its ERI
moved nothing during alltoall's launch (every other node's ERI moved alltoall's share, and
every ERI every other collective's). Bounds are a third of a healthy
run's figures on this host (measured first), so the test does not hang on the lab's speed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.cluster import Cluster
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import faults
from pytest_hpcnet.requirements.judges import judge_nccl
from pytest_hpcnet.requirements.nccl_collectives import (
    judge_collective_busbw,
    judge_collective_correct,
    judge_collective_run,
    judge_collective_traffic,
    judge_collective_transport,
)
from pytest_hpcnet.transport.fanout import Transport
from tests.lab.test_lab_bench_support import heal_all, leftovers

pytestmark = pytest.mark.lab

SMALL = {"b": "1M", "e": "2M", "f": 2, "n": 2, "w": 1}


def _inventory(lab4, bounds=None):
    inventory = load_inventory(lab4.inventory)
    nccl = inventory.benchmarks.nccl
    args = nccl.args.model_copy(update=SMALL)
    everything = ["all_gather", "reduce_scatter", "alltoall", "sendrecv"]
    collectives = nccl.collectives.model_copy(update={"args": args, "run": everything})
    inventory.benchmarks.nccl = nccl.model_copy(update={"args": args, "collectives": collectives})
    for key, (avg, top) in (bounds or {}).items():
        setattr(
            inventory.expect.nccl.collectives,
            key,
            getattr(inventory.expect.nccl.collectives, key).model_copy(
                update={"min_avg_busbw_gbs": avg, "min_busbw_largest_gbs": top}
            ),
        )
    return inventory


def _phase(inventory):
    transport = Transport(inventory)
    try:
        cluster = Cluster(inventory, transport)
        return cluster, cluster.collectives.phase(), transport
    except BaseException:
        transport.close()
        raise


def test_incast_and_socket_one_fail_exactly_their_node_and_collectives(lab4):
    state_dir = Path(lab4.state_dir)
    cluster, healthy, transport = _phase(_inventory(lab4))
    transport.close()
    assert all(r.result.ok for r in healthy.runs.values()), {
        k: r.result.reason for k, r in healthy.runs.items()
    }
    bounds = {
        k: (r.result.avg_busbw_gbs / 3, r.result.busbw_at_max_size_gbs / 3)
        for k, r in healthy.runs.items()
    }
    faults.inject("nccl-incast", "node03", "20", state_dir)
    faults.inject("nccl-socket-one", "node02", "alltoall", state_dir)
    inventory = _inventory(lab4, bounds)
    try:
        cluster, faulted, transport = _phase(inventory)
        hostnames = cluster.hostnames()
        expect = inventory.expect
        outcomes = {}
        for key, run in faulted.runs.items():
            assert judge_collective_run(run).ok, (key, run.result.reason)
            assert judge_collective_correct(run).ok, key
            transport_verdict = judge_collective_transport(run, hostnames, expect)
            busbw = judge_collective_busbw(run, expect, lambda: "")
            outcomes[key] = (transport_verdict, busbw)
        devices = {n: cluster.collective.ib_devices(n) for n in hostnames}
        traffic = {k: judge_collective_traffic(r, devices) for k, r in faulted.runs.items()}
        idle = traffic["alltoall"]
        assert idle.outcome == "fail" and "node02 erdma_0: 0 bytes" in idle.reason, idle.reason
        assert all(n not in idle.reason for n in ("node01", "node03", "node04"))
        assert all(traffic[k].ok for k in ("all_gather", "reduce_scatter", "sendrecv")), traffic
        socket = outcomes["alltoall"][0]
        assert not socket.ok and "node02" in socket.reason, socket.reason
        assert all(n not in socket.reason for n in ("node01", "node03", "node04"))
        assert all(outcomes[k][0].ok for k in ("all_gather", "reduce_scatter", "sendrecv"))
        slow = {k for k, (_, busbw) in outcomes.items() if busbw.outcome == "fail"}
        assert slow == {"all_gather", "alltoall"}, {k: v[1].reason for k, v in outcomes.items()}
        halving = cluster.collectives.bisection("all_gather")
        assert halving.suspects == ("node03",), halving
        result, command = cluster.nccl()  # the all-reduce is not an incast pattern
        assert judge_nccl(result, expect, command).ok, result.reason
    finally:
        transport.close()
        heal_all(lab4)
    assert leftovers(lab4) == []
