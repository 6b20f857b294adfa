"""Localization and the suite judge every pair of a faulted lab run the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.cluster import Cluster
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import faults
from pytest_hpcnet.report.recording import Check
from pytest_hpcnet.suites import test_rdma_perftest as suite
from pytest_hpcnet.transport.fanout import Transport
from tests.lab.test_lab_bench_support import heal_all, leftovers

pytestmark = pytest.mark.lab

SUITE_TESTS = {
    "ib_write_bw": suite.test_rdma_write_bandwidth,
    "ib_write_lat": suite.test_rdma_write_latency,
}


def suite_passes(tool: str, cluster: Cluster, pair) -> tuple[bool, str]:
    """(passed, message) of the shipped suite's test for one scheduled pair."""
    check = Check(tool, tool, f"{pair.a}->{pair.b}", "pair", "", None)
    try:
        SUITE_TESTS[tool](cluster, pair, check)
    except AssertionError as exc:
        return False, str(exc)
    return True, ""


def test_localization_and_suite_agree_on_every_pair_of_a_faulted_run(lab4):
    state_dir = Path(lab4.state_dir)
    faults.inject("slow", "node02", "50mbit", state_dir)  # below ib_write_bw's 1 Gbit/s
    faults.inject("latency", "node04", "5", state_dir)  # above ib_write_lat's 500 usec
    inventory = load_inventory(lab4.inventory)
    transport = Transport(inventory)
    try:
        cluster = Cluster(inventory, transport)
        for tool in SUITE_TESTS:
            campaign = cluster.perftest(tool)
            assert campaign.runs, tool
            verdicts = {}
            for pair in campaign.runs:
                passed, message = suite_passes(tool, cluster, pair)
                assert passed == campaign.passed[pair], (tool, pair, message)
                verdicts[pair] = passed
            # the fault splits the pairs, so agreement is tested on both outcomes
            assert any(verdicts.values()) and not all(verdicts.values()), (tool, verdicts)
    finally:
        transport.close()
        heal_all(lab4)
    assert leftovers(lab4) == []
