"""A device or counter read before the benchmark and not after it is never a pass."""

from __future__ import annotations

from pytest_hpcnet.probes.counters import CounterSnapshot, counter_delta
from pytest_hpcnet.requirements.erdma import judge_counter_deltas

BEFORE = CounterSnapshot(
    "sysfs",
    {
        "erdma_0/1": {"rx_dropped": 0, "hw_tx_bytes_cnt": 10},
        "erdma_1/1": {"rx_dropped": 0, "hw_tx_bytes_cnt": 10},
    },
)


def test_all_counters_read_twice_and_still_pass():
    after = CounterSnapshot("sysfs", {k: dict(v) for k, v in BEFORE.values.items()})
    assert judge_counter_deltas({"n1": counter_delta(BEFORE, after)})


def test_a_device_gone_after_the_benchmark_fails_naming_it():
    after = CounterSnapshot("sysfs", {"erdma_0/1": {"rx_dropped": 0, "hw_tx_bytes_cnt": 99}})
    verdict = judge_counter_deltas({"n1": counter_delta(BEFORE, after)})
    assert not verdict and "erdma_1/1" in verdict.reason and "after" in verdict.reason


def test_a_counter_file_empty_after_the_benchmark_fails():
    after = CounterSnapshot(
        "sysfs",
        {
            "erdma_0/1": {"hw_tx_bytes_cnt": 99},
            "erdma_1/1": {"rx_dropped": 0, "hw_tx_bytes_cnt": 9},
        },
        ("erdma_0/1 rx_dropped: unreadable value ''",),
    )
    verdict = judge_counter_deltas({"n1": counter_delta(BEFORE, after)})
    assert not verdict and "rx_dropped" in verdict.reason
