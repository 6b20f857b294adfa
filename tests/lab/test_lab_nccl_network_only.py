"""The network-only run on 4 lab nodes through the real Open MPI mpirun: `nccl-net-slow
node02` fails exactly it, naming node02 (the run on halves of the nodes), while the normal
all-reduce runs whole and unslowed (at least 3x the network-only figure). The fraction puts
the bound at a third of the normal run's largest-size busbw on this host (measured in the
same test) against the lab's rated 2 Gbit/s."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.cluster import Cluster
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import faults
from pytest_hpcnet.requirements.judges import judge_nccl_run
from pytest_hpcnet.requirements.nccl_network_only import judge_network_only, network_only_passes
from pytest_hpcnet.transport.fanout import Transport
from tests.lab.test_lab_bench_support import heal_all, leftovers

pytestmark = pytest.mark.lab

ONE_SIZE = {"b": "1M", "e": "1M", "f": 2, "n": 2, "w": 0}


def test_a_node_slow_only_over_the_network_fails_only_the_network_only_run(lab4):
    inventory = load_inventory(lab4.inventory)
    nccl = inventory.benchmarks.nccl
    args = nccl.args.model_copy(update=ONE_SIZE)
    inventory.benchmarks.nccl = nccl.model_copy(update={"args": args})
    faults.inject("nccl-net-slow", "node02", "20", Path(lab4.state_dir))
    transport = Transport(inventory)
    try:
        cluster = Cluster(inventory, transport)
        expect = inventory.expect
        normal, command = cluster.nccl()
        assert judge_nccl_run(normal, command).ok, normal.reason
        line_gbs = expect.erdma.per_instance_gbps / 8
        expect.nccl.network_only_fraction = normal.busbw_at_max_size_gbs / 3 / line_gbs
        paths = cluster.collectives.paths
        run = paths.network_only()
        assert run.result is not None and run.result.ok, run.result

        def suspects():
            passes = lambda r: network_only_passes(r, expect)  # noqa: E731
            return paths.bisection("network_only", passes).suspects

        verdict = judge_network_only(run, expect, suspects)
        figures = (normal.busbw_at_max_size_gbs, run.result.busbw_at_max_size_gbs)
        assert verdict.outcome == "fail", figures
        assert verdict.reason.startswith("node02: network-only"), verdict.reason
        assert all(n not in verdict.reason for n in ("node01", "node03", "node04"))
        assert normal.busbw_at_max_size_gbs > 3 * run.result.busbw_at_max_size_gbs, figures
    finally:
        transport.close()
        heal_all(lab4)
    assert leftovers(lab4) == []
