"""Halving a failing collective down to the node that makes it fail."""

from __future__ import annotations

import pytest

from pytest_hpcnet.campaigns.nccl.bisection import bisect, runs_needed


def slow(*bad: str):
    """A trial that fails whenever a subset holds one of `bad`."""
    return lambda nodes: not any(n in bad for n in nodes)


NODES = [f"n{i:02d}" for i in range(1, 17)]


@pytest.mark.parametrize("count", [3, 4, 5, 6, 7, 8, 13, 16])
def test_one_slow_node_is_found_within_the_budget(count):
    nodes = NODES[:count]
    for bad in nodes:
        found = bisect(nodes, slow(bad), runs_needed(count))
        assert found.suspects == (bad,), (bad, found)
        assert len(found.trials) <= runs_needed(count)
        assert all(len(subset) >= 2 for subset, _ in found.trials)  # always across the network


def test_every_trial_is_recorded_with_its_outcome():
    found = bisect(NODES[:4], slow("n02"), 4)
    assert found.trials == [
        (("n01", "n02"), False),
        (("n03", "n04"), True),
        (("n01", "n03"), True),
        (("n02", "n03"), False),
    ]


def test_two_slow_nodes_in_different_halves_name_nobody():
    found = bisect(NODES[:8], slow("n01", "n08"), 6)
    assert found.suspects == ()
    assert found.reason.startswith("both halves fail")


def test_failure_that_needs_both_halves_names_nobody():
    whole = set(NODES[:8])
    found = bisect(NODES[:8], lambda nodes: set(nodes) != whole, 6)
    assert found.suspects == () and found.reason.startswith("both halves pass")


def test_two_nodes_cannot_be_split():
    found = bisect(NODES[:2], slow("n01"), 4)
    assert found.suspects == () and found.trials == []
    assert "cannot be split" in found.reason


def test_budget_is_never_exceeded():
    found = bisect(NODES, slow("n05"), 3)
    assert len(found.trials) <= 3 and found.suspects == ()
    assert found.reason.startswith("run budget (3) spent")


def test_runs_needed_grows_with_the_log_of_the_nodes():
    assert [runs_needed(n) for n in (2, 3, 4, 8, 16, 1000)] == [2, 4, 4, 6, 8, 20]
