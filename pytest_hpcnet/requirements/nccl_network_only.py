"""Judge of the network-only run (`nccl_network_only`): all_reduce_perf across every node with
`NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0`, so the traffic between a node's
own GPUs crosses its ERIs too: every hop of the ring leaves its rank through the node's ERIs,
which carry the hops of all R ranks on the node. Its busbw at the largest size (all-reduce
busbw = algbw x 2(n-1)/n, nccl-tests doc/PERFORMANCE.md) is held to the node's rated line
rate x the profile's fraction / R: `erdma.per_instance_gbps / 8 x nccl.network_only_fraction
/ R` GB/s. A slow or miswired ERI shows here even on one node pair; a failure names the node
(`ib_write_bw` suspects, else the node the run on halves of the cluster leaves)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.requirements.erdma import reported_first
from pytest_hpcnet.requirements.judges import at_least
from pytest_hpcnet.requirements.nccl_rail import judge_pinned_run
from pytest_hpcnet.requirements.verdict import (
    FAIL,
    Measurement,
    Verdict,
    not_applicable,
    not_measured,
    passing,
)

CODE = "HPCNET-NCCL-NETWORK-ONLY"
SOURCE = "expect.erdma.per_instance_gbps / 8 x expect.nccl.network_only_fraction / ranks per node"
FIX = (
    "check the suspect node's ERIs (ib_write_bw on each, ports, PCIe links, NCCL_IB_HCA); "
    "a node that stays slow: a ticket"
)


def judge_network_only_expected(expect: Expectations) -> Verdict:
    """A network-only bound is asked for (`expect.nccl.network_only_fraction`); else not
    applicable (nothing runs)."""
    if expect.nccl.network_only_fraction is None:
        return not_applicable("no network-only run (expect.nccl.network_only_fraction unset)")
    return passing()


def network_only_bound(run: Any, expect: Expectations) -> float | None:
    """The busbw floor of the run launched, GB/s; None where a term is unknown."""
    rated, fraction = expect.erdma.per_instance_gbps, expect.nccl.network_only_fraction
    ranks = run.ranks_per_node
    if rated is None or fraction is None or not ranks:
        return None
    return rated / 8 * fraction / ranks


def judge_network_only(
    run: Any, expect: Expectations, suspects: Callable[[], Sequence[str]]
) -> Verdict:
    """The network-only run complete and ok, its largest-size busbw at least the node's line
    rate share (`network_only_bound`); a failure names the suspect node."""
    ran = judge_pinned_run(run)
    if not ran:
        return ran
    result = run.result
    bound = network_only_bound(run, expect)
    basis = (
        f"line rate x fraction / {run.ranks_per_node} ranks per node; all-reduce busbw = "
        "algbw x 2(n-1)/n (nccl-tests doc/PERFORMANCE.md)"
    )
    value = result.busbw_at_max_size_gbs
    found = (
        Measurement("network_only_avg_busbw", result.avg_busbw_gbs, "GB/s"),
        Measurement("network_only_busbw_largest", value, "GB/s", bound, ">=", SOURCE, basis=basis),
    )
    if bound is None:
        verdict = not_measured(
            f"network-only busbw {value} GB/s: no bound (expect.erdma.per_instance_gbps unset)"
        )
        return reported_first(verdict, *found)
    verdict = at_least(
        value,
        bound,
        f"network-only bus bandwidth, largest size {value} GB/s < {bound:.4g} GB/s",
        SOURCE,
        expect.nccl.max_busbw_gbs,
    )
    if verdict.outcome != FAIL:
        return reported_first(verdict, *found)
    nodes = tuple(suspects())
    where = ", ".join(nodes) or "no suspect node"
    failed = Verdict(
        outcome=FAIL,
        reason=f"{where}: {verdict.reason} over {len(result.hosts)} nodes",
        fix=FIX,
        subject=nodes[0] if len(nodes) == 1 else "",
        code=CODE,
    )
    return reported_first(failed, *found)


def network_only_passes(run: Any, expect: Expectations) -> bool:
    """A network-only run is complete, ok and meets its bound where one is set (what its
    bisection asks of a half)."""
    if not judge_pinned_run(run):
        return False
    bound = network_only_bound(run, expect)
    value = run.result.busbw_at_max_size_gbs
    return bound is None or (value is not None and value >= bound)
