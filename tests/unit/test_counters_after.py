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


def test_a_snapshot_cut_inside_a_section_is_not_read_as_zero_counters():
    """Counters cut short (no end line) are not a snapshot: the delta says not read."""
    from pytest_hpcnet.campaigns.counters import parse_snapshot
    from pytest_hpcnet.probes.sections import MARK
    from pytest_hpcnet.transport.fanout import CommandResult

    whole = (
        f"{MARK} begin rdma\n/sys/class/infiniband/erdma_0/ports/1/hw_counters/x 5\n\n"
        f"{MARK} end rdma 0\n{MARK} begin links\n[]\n\n{MARK} end links 0\n"
    )
    cut = whole.split(f"{MARK} end rdma")[0]

    def result(stdout: str) -> CommandResult:
        return CommandResult("node01", "snapshot", 0, stdout, "", 0.1, 0.0)

    assert parse_snapshot(result(whole)) is not None
    assert parse_snapshot(result(cut)) is None
