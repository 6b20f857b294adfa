"""The network-only run: held to the node's rated line rate x the profile's fraction / ranks
per node at its largest size, a slow run naming its suspect node."""

from __future__ import annotations

from pathlib import Path

from pytest_hpcnet.campaigns.nccl.paths import NETWORK_ONLY, NETWORK_ONLY_ENV, PinnedRun
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.nccl import NcclExpected, parse_nccl
from pytest_hpcnet.requirements.nccl_network_only import (
    judge_network_only,
    judge_network_only_expected,
    network_only_bound,
    network_only_passes,
)
from pytest_hpcnet.transport.results import CommandResult

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
TEXT = (FIXTURES / "allreduce-2node-tag-output-warn.txt").read_text()
LAUNCHED = NcclExpected(max_bytes=2**30, ranks=4, nodes=2, validation=True)


def _run() -> PinnedRun:
    launch = CommandResult("node01", "mpirun ...", 0, TEXT, "", 1.0, 0.0)
    return PinnedRun(NETWORK_ONLY, parse_nccl(TEXT, LAUNCHED), launch, LAUNCHED)


def _expect(fraction: float | None, rated: float | None = 160.0) -> Expectations:
    expect = Expectations()
    expect.nccl.network_only_fraction = fraction
    expect.erdma.per_instance_gbps = rated
    return expect


def test_p2p_shm_and_nvls_are_off():
    assert NETWORK_ONLY_ENV == {
        "NCCL_P2P_DISABLE": "1",
        "NCCL_SHM_DISABLE": "1",
        "NCCL_NVLS_ENABLE": "0",
    }


def test_unset_fraction_runs_nothing_and_unset_rate_is_not_measured():
    assert judge_network_only_expected(_expect(None)).outcome == "not_applicable"
    assert judge_network_only_expected(_expect(0.5)).ok
    unrated = judge_network_only(_run(), _expect(0.5, None), lambda: ())
    assert unrated.outcome == "not_measured" and "per_instance_gbps" in unrated.reason


def test_the_bound_is_line_rate_times_fraction_per_rank():
    # 160 Gbit/s = 20 GB/s per node, x 0.8, over 2 ranks per node: 8 GB/s per rank
    assert network_only_bound(_run(), _expect(0.8)) == 8.0
    verdict = judge_network_only(_run(), _expect(0.8), lambda: ("node07",))
    assert verdict.ok, verdict.reason  # 25.77 GB/s at 1 GiB
    asked = []

    def suspects():
        asked.append(1)
        return ("node07",)

    slow = judge_network_only(_run(), _expect(0.8, 800.0), suspects)  # 40 GB/s per rank
    assert slow.outcome == "fail" and slow.reason.startswith("node07: network-only")
    assert slow.subject == "node07" and slow.code == "HPCNET-NCCL-NETWORK-ONLY" and asked
    found = {m.name: m for m in slow.measurements}
    assert found["network_only_busbw_largest"].value == 25.77
    assert found["network_only_busbw_largest"].bound == 40.0
    assert not network_only_passes(_run(), _expect(0.8, 800.0))
    assert network_only_passes(_run(), _expect(0.8))
