"""The judge of the single-node all-reduce: each node's bus bandwidth at the largest size
against the profile's floor and the median of the other nodes' (with `min_peer_nodes` of
them), below its ceiling; a run that failed, fails; a figure with neither bound is not
judged (not measured)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import GPU_QUERY
from pytest_hpcnet.probes.gpu_load import GPU_ENGINES
from pytest_hpcnet.probes.nccl import NcclResult
from pytest_hpcnet.requirements.bounds import (
    NODES_MEDIAN,
    Bound,
    Ceiling,
    judge_figure,
    peer_bound,
)
from pytest_hpcnet.requirements.verdict import (
    FAIL,
    NOT_MEASURED,
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

SECTIONS = ("gpu_nccl_node", GPU_ENGINES.name, GPU_QUERY.name)
INSTALL_NCCL_TESTS = (
    "build nccl-tests (all_reduce_perf) against the node's CUDA and NCCL and put it on PATH, "
    "or leave the check out with scope.exclude: [gpu_nccl_node]"
)
FIX = "check the node's NVLink/NVSwitch (nvidia-smi nvlink -s, nvidia-fabricmanager) and PCIe"
VERSION_CODE = "HPCNET-NCCL-TESTS-VERSION"
FIX_VERSION = "build and install the same nccl-tests on every node"
VERSION_SOURCE = "the nccl-tests version most nodes ran (its output's header)"


def tests_version(
    node: str, result: NcclResult, peers: Mapping[str, tuple[NcclResult | None, str]]
) -> tuple[Measurement | None, str]:
    """The node's nccl-tests version against the version most nodes ran (its measurement),
    and why it differs ("" where it agrees, or no run names one)."""
    mine = result.tests_version
    counts = Counter(
        r.tests_version for r, _ in peers.values() if r is not None and r.tests_version
    )
    if not mine or not counts:
        return None, ""
    ranked = counts.most_common()
    top, count = ranked[0]
    even = len(ranked) > 1 and ranked[1][1] == count
    shown = "no majority" if even else top
    measured = Measurement("nccl_tests_version", mine, "", shown, "==", VERSION_SOURCE)
    if even:
        groups = "; ".join(f"{v} on {n} node(s)" for v, n in ranked)
        return measured, f"{node}: nccl-tests versions split with no majority ({groups})"
    if mine != top:
        total = sum(counts.values())
        return measured, f"{node}: nccl-tests {mine}, {count} of {total} nodes run {top}"
    return measured, ""


def judge_gpu_nccl_node(
    node: str,
    result: NcclResult | None,
    peers: Mapping[str, tuple[NcclResult | None, str]],
    expect: Expectations,
    missing: str = "",
) -> Verdict:
    """The node's own all-reduce: complete, validated, and within tolerance of its peers
    (every node's run, or None and why it did not run)."""
    kw = {"sections": SECTIONS, "subject": node}
    if missing or result is None:
        return not_measured(missing or "all_reduce_perf did not run", INSTALL_NCCL_TESTS, **kw)
    if not result.ok:
        if not result.rows and not result.failures:
            return not_measured(f"all_reduce_perf: {result.reason}", **kw)
        return failing(f"single-node all-reduce: {result.reason}", FIX, **kw)
    version, odd = tests_version(node, result, peers)
    if odd:
        kw["measurements"] = (version,)
        return failing(odd, FIX_VERSION, **kw).with_code(VERSION_CODE)
    value = result.busbw_at_max_size_gbs
    load = expect.gpu_load
    ceiling = Ceiling(load.max_node_busbw_gbs, "expect.gpu_load.max_node_busbw_gbs")
    others = [r.busbw_at_max_size_gbs for r, _ in peers.values() if r is not None and r.ok]
    peer, why = peer_bound(
        others, ceiling, load.peer_tolerance, load.min_peer_nodes, basis=NODES_MEDIAN
    )
    floor = load.min_node_busbw_gbs
    floor_bound = Bound(floor, "expect.gpu_load.min_node_busbw_gbs") if floor else None
    figure = judge_figure(
        "busbw_largest",
        value,
        "GB/s",
        (floor_bound, peer),
        ceiling,
        floor_key="expect.gpu_load.min_node_busbw_gbs",
        unjudged=why,
    )
    size = result.max_size_bytes or 0
    found = (figure.measurement, Measurement("size_largest", size, "B"))
    kw["measurements"] = found + ((version,) if version is not None else ())
    if figure.outcome == FAIL:
        return failing(
            f"single-node all-reduce busbw {value:g} GB/s at {size} B below "
            + " and ".join(b.source for b in (floor_bound, peer) if b and value < b.value),
            FIX,
            **kw,
        )
    if figure.outcome == NOT_MEASURED:
        return not_measured(f"single-node all-reduce: {figure.reason}", **kw)
    note = "" if floor is not None else " (no floor set: expect.gpu_load.min_node_busbw_gbs)"
    return passing(f"single-node all-reduce busbw {value:g} GB/s at {size} B{note}", **kw)
