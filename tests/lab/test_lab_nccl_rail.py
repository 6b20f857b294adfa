"""Each ERI's rail on 4 two-ERI lab nodes through the real Open MPI mpirun: `nccl-rail-slow
node03 erdma_1` fails exactly the erdma_1 rail, named `node03 erdma_1` by that rail alone on
halves of the nodes; the erdma_0 rail passes, and the all-reduce over both ERIs, where the
slow rail is averaged away, stays within its bound. The bound is a third of the healthy
erdma_0 rail's average busbw on this host (measured in the same run; the table's two
decimals are too coarse at the lab's speed, the average line is not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.cluster import Cluster
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import faults
from pytest_hpcnet.requirements.nccl_rail import judge_nccl_rails, rail_passes
from pytest_hpcnet.transport.fanout import Transport
from tests.lab.test_lab_bench_support import heal_all, leftovers

pytestmark = pytest.mark.lab

SMALL = {"b": "1M", "e": "1M", "f": 2, "n": 2, "w": 0}


def test_one_slow_rail_is_named_with_its_node(lab2):
    inventory = load_inventory(lab2.inventory)
    nccl = inventory.benchmarks.nccl
    inventory.benchmarks.nccl = nccl.model_copy(update={"args": nccl.args.model_copy(update=SMALL)})
    faults.inject("nccl-rail-slow", "node03", "erdma_1@20", Path(lab2.state_dir))
    transport = Transport(inventory)
    try:
        cluster = Cluster(inventory, transport)
        paths = cluster.collectives.paths
        assert paths.rail_devices() == ["erdma_0", "erdma_1"]
        runs = paths.rails()
        assert all(r.result is not None and r.result.ok for r in runs.values()), runs
        assert {r.gpus for r in runs.values()} == {(0, 1, 2, 3), (4, 5, 6, 7)}
        healthy = runs["erdma_0"].result
        expect = inventory.expect
        expect.nccl.rail = expect.nccl.rail.model_copy(
            update={"min_avg_busbw_gbs": healthy.avg_busbw_gbs / 3}
        )

        def suspects(device):
            return paths.bisection(device, lambda run: rail_passes(run, expect)).suspects

        verdict = judge_nccl_rails(runs, expect, suspects)
        figures = {
            d: (r.result.avg_busbw_gbs, r.result.busbw_at_max_size_gbs) for d, r in runs.items()
        }
        assert verdict.outcome == "fail", figures
        assert verdict.reason.startswith("node03 erdma_1:"), verdict.reason
        assert "erdma_0" not in verdict.reason
        assert all(n not in verdict.reason for n in ("node01", "node02", "node04"))
        assert verdict.subject == "node03 erdma_1"
        both, _ = cluster.nccl()  # over both ERIs the slow rail is averaged away
        assert both.ok and both.avg_busbw_gbs >= healthy.avg_busbw_gbs / 3, both.avg_busbw_gbs
    finally:
        transport.close()
        heal_all(lab2)
    assert leftovers(lab2) == []
