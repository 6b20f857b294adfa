"""The collectives beyond all-reduce: parsed from real recorded outputs, held to the run
launched, split per collective from one launch, and judged (tests/fixtures/nccl_collectives)."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.nccl.collectives import CollectiveRun
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.counters import CounterDelta
from pytest_hpcnet.probes.nccl import NcclExpected, parse_nccl
from pytest_hpcnet.probes.nccl_collectives import (
    BY_KEY,
    debug_read_command,
    sequence_command,
    sibling_binary,
    split_debug,
    split_sequence,
)
from pytest_hpcnet.probes.nccl_debug import parse_nccl_debug
from pytest_hpcnet.requirements.nccl_collectives import (
    collective_passes,
    judge_collective_busbw,
    judge_collective_correct,
    judge_collective_run,
    judge_collective_selected,
    judge_collective_traffic,
)
from pytest_hpcnet.transport.results import CommandResult

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_collectives"
ALLTOALL = (
    FIXTURES / "nccl-tests-2.18.3-alltoall-2node-np16-1K-8G-inplace-wrong-na.txt"
).read_text()
ALL_GATHER = (
    FIXTURES / "nccl-tests-2.18.5-all-gather-gb10-2node-np2-16G-single-row.txt"
).read_text()
SENDRECV = (FIXTURES / "li-plus-sendrecv-a100x8-g8-128M-1G-table-only.txt").read_text()
REDUCE_SCATTER = (
    FIXTURES / "superbench-reduce-scatter-a100x8-g8-old-redop-no-root.txt"
).read_text()
ALLTOALL_RUN = NcclExpected(
    max_bytes=8 * 2**30,
    ranks=16,
    nodes=2,
    validation=True,
    min_bytes=1024,
    step_factor=2,
    gpus_per_process=1,
    collective="alltoall_perf",
    hosts=(("node14", "R6KD-CX8aaS-GPU-14"), ("node15", "R6KD-CX8aaS-GPU-15")),
)
GATHER_RUN = NcclExpected(
    max_bytes=16 * 2**30,
    ranks=2,
    nodes=2,
    validation=True,
    min_bytes=16 * 2**30,
    step_factor=2,
    gpus_per_process=1,
    collective="all_gather_perf",
)


def _launch(stdout: str = "", status: int | None = 0) -> CommandResult:
    return CommandResult("node14", "mpirun ...", status, stdout, "", 1.0, 0.0)


def _run(key: str, text: str, expected: NcclExpected) -> CollectiveRun:
    launch = _launch(text)
    return CollectiveRun(
        BY_KEY[key], parse_nccl(text, expected), launch, expected, parse_nccl_debug(""), launch
    )


def test_real_alltoall_two_nodes_is_one_whole_run_with_in_place_unchecked():
    parsed = parse_nccl(ALLTOALL, ALLTOALL_RUN)
    assert parsed.ok, parsed.reason
    assert parsed.collective == "alltoall_perf" and len(parsed.ranks) == 16
    assert parsed.busbw_at_max_size_gbs == 32.65 and parsed.avg_busbw_gbs == 8.9909
    assert parsed.total_wrong == 0 and parsed.wrong_na == 24  # every in-place cell N/A


def test_a_table_of_another_collective_is_not_the_run_launched():
    as_gather = parse_nccl(ALLTOALL, replace(ALLTOALL_RUN, collective="all_gather_perf"))
    assert not as_gather.ok and "alltoall_perf's, all_gather_perf launched" in as_gather.error
    assert not as_gather.failed  # not measured, never a failure
    gather = parse_nccl(ALL_GATHER, GATHER_RUN)
    assert gather.ok, gather.reason
    assert gather.busbw_at_max_size_gbs == 22.94 and gather.total_wrong == 0
    other = parse_nccl(ALL_GATHER, replace(GATHER_RUN, collective="alltoall_perf"))
    assert "all_gather_perf's, alltoall_perf launched" in other.error


def test_in_place_na_is_left_unchecked_only_where_nccl_tests_prints_it():
    """alltoall's in-place #wrong is N/A; the same cells in an all-gather are not a checked
    run."""
    text = ALLTOALL.replace("alltoall_perf", "all_gather_perf")
    parsed = parse_nccl(text, replace(ALLTOALL_RUN, collective="all_gather_perf"))
    assert not parsed.ok and "#wrong N/A in 24 of 48 cells" in parsed.error


def test_sendrecv_busbw_is_algbw_and_its_cut_table_is_no_run():
    parsed = parse_nccl(SENDRECV, NcclExpected(collective="sendrecv_perf", ranks=8))
    assert "busbw" not in (parsed.error or "")  # factor 1 holds on every row
    assert "no '# Out of bounds values' and '# Avg bus bandwidth' footer" in parsed.error
    as_gather = parse_nccl(SENDRECV, NcclExpected(collective="all_gather_perf", ranks=8))
    assert "is not algbw x 0.875" in as_gather.error  # (n-1)/n would not give those figures


def test_old_reduce_scatter_holds_its_factor():
    expected = NcclExpected(collective="reduce_scatter_perf", ranks=8, validation=False)
    parsed = parse_nccl(REDUCE_SCATTER, expected)
    assert parsed.ok, parsed.reason
    assert parsed.busbw_at_max_size_gbs == 231.52


def test_judges_on_the_real_alltoall():
    run = _run("alltoall", ALLTOALL, ALLTOALL_RUN)
    assert judge_collective_run(run).ok
    correct = judge_collective_correct(run)
    assert correct.ok and correct.measurements[0].value == 0
    expect = Expectations()
    unset = judge_collective_busbw(run, expect, lambda: "no suspect")
    assert unset.outcome == "not_measured" and "none published" in unset.reason
    found = {m.name: m for m in unset.measurements}
    assert found["avg_busbw"].value == 8.9909 and found["busbw_largest"].value == 32.65
    assert "(n-1)/n" in found["avg_busbw"].basis
    bounds = expect.nccl.collectives.alltoall.model_copy(
        update={"min_avg_busbw_gbs": 5.0, "min_busbw_largest_gbs": 40.0}
    )
    expect.nccl.collectives.alltoall = bounds
    slow = judge_collective_busbw(run, expect, lambda: "suspect node: node15")
    assert (
        slow.outcome == "fail" and "alltoall_perf bus bandwidth at the largest size" in slow.reason
    )
    assert slow.reason.endswith("over 2 nodes; suspect node: node15")
    assert "ib_write_bw" in slow.fix  # the default code (HPCNET-NCCL-ALLTOALL) and a fix
    assert not collective_passes(run, expect)
    expect.nccl.collectives.alltoall = bounds.model_copy(update={"min_busbw_largest_gbs": 30.0})
    assert judge_collective_busbw(run, expect, lambda: "").ok and collective_passes(run, expect)


def test_a_failed_launch_names_its_collective():
    run = _run("sendrecv", "", NcclExpected(collective="sendrecv_perf"))
    verdict = judge_collective_run(run)
    assert not verdict.ok and "sendrecv_perf" in verdict.reason
    assert "all_reduce_perf" not in verdict.reason


def test_one_sequence_split_per_collective(tmp_path):
    """The launch node's sequence runs each launch in turn between its markers; a launch
    that fails leaves the others run, and the sequence exits with the first failure."""
    command = sequence_command(
        [
            ("all_gather_perf", "echo gather table"),
            ("alltoall_perf", "echo to stderr >&2; exit 3"),
            ("sendrecv_perf", "echo sendrecv table"),
        ]
    )
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=False)
    assert done.returncode == 3
    parts = split_sequence(done.stdout)
    assert list(parts) == ["all_gather_perf", "alltoall_perf", "sendrecv_perf"]
    assert parts["all_gather_perf"].text == "gather table\n"
    assert parts["alltoall_perf"].text == "to stderr\n" and parts["alltoall_perf"].exit_status == 3
    assert parts["sendrecv_perf"].exit_status == 0


def test_a_cut_sequence_leaves_its_last_collective_unfinished():
    text = "#hpcnet-collective begin all_gather_perf\n# nThread 1\n"
    assert split_sequence(text)["all_gather_perf"].exit_status is None


def test_each_collective_reads_its_own_debug_files(tmp_path):
    base = str(tmp_path / "hpcnet-nccl-abc")
    Path(f"{base}.alltoall_perf.debug.n1.7").write_text(
        "n1:7:7 [0] NCCL INFO Using network Socket\n"
    )
    Path(f"{base}.all_gather_perf.debug.n1.8").write_text("n1:8:8 [0] NCCL INFO Using network IB\n")
    out = subprocess.run(["bash", "-c", debug_read_command(base)], capture_output=True, text=True)
    found = split_debug(out.stdout)
    assert "Socket" in found["alltoall_perf"] and "IB" in found["all_gather_perf"]
    assert not list(tmp_path.iterdir())  # read once, removed


@pytest.mark.parametrize(
    ("all_reduce", "want"),
    [
        ("all_reduce_perf", "alltoall_perf"),
        ("/opt/nccl-tests/build/all_reduce_perf_mpi", "/opt/nccl-tests/build/alltoall_perf_mpi"),
    ],
)
def test_sibling_binary(all_reduce, want):
    assert sibling_binary(all_reduce, "alltoall_perf") == want


def test_a_collective_the_inventory_leaves_out_is_not_applicable():
    assert judge_collective_selected(["alltoall"], "alltoall").ok
    left_out = judge_collective_selected([], "sendrecv")
    assert (
        left_out.outcome == "not_applicable"
        and "benchmarks.nccl.collectives.run" in left_out.reason
    )


def test_wrong_values_carry_the_collectives_own_code():
    wrong = ALLTOALL.replace("       0  ", "       3  ", 1)
    run = _run("alltoall", wrong, ALLTOALL_RUN)
    verdict = judge_collective_correct(run)
    assert verdict.outcome == "fail" and verdict.code == "HPCNET-NCCL-ALLTOALL-WRONG"
    assert "ticket" in verdict.fix


def _traffic(run: CollectiveRun, moved: dict[str, dict[str, int]]) -> CollectiveRun:
    """`run` with each node's ERIs' byte counters moved by `moved` (node -> device -> bytes,
    half sent, half received) between the counter reads around its launch."""
    deltas = {
        node: CounterDelta(
            {
                f"{d}/1": {"hw_tx_bytes_cnt": b // 2, "hw_rx_bytes_cnt": b - b // 2}
                for d, b in by_device.items()
            }
        )
        for node, by_device in moved.items()
    }
    return replace(run, traffic=deltas)


def test_every_eri_moves_the_collectives_share_or_the_run_fails_naming_it():
    """alltoall of 8 GiB over 2 nodes: each node's ERIs carry S(n-1)/n = 4 GiB of one
    operation, 2 GiB on each of two ERIs; an ERI that moved nothing fails, named."""
    run = _run("alltoall", ALLTOALL, ALLTOALL_RUN)
    devices = {"node14": ["erdma_0", "erdma_1"], "node15": ["erdma_0", "erdma_1"]}
    share = 2 * 2**30
    healthy = _traffic(run, {n: dict.fromkeys(d, share) for n, d in devices.items()})
    verdict = judge_collective_traffic(healthy, devices)
    assert verdict.ok, verdict.reason
    found = {m.name: m for m in verdict.measurements}
    assert (
        found["min_bytes_per_eri"].value == share
        and "S(n-1)/n" in found["min_bytes_per_eri"].source
    )
    idle = _traffic(
        run, {"node14": dict.fromkeys(devices["node14"], share), "node15": {"erdma_0": share,
              "erdma_1": 0}}
    )  # fmt: skip
    failed = judge_collective_traffic(idle, devices)
    assert failed.outcome == "fail" and "node15 erdma_1: 0 bytes over RDMA" in failed.reason
    assert "node14" not in failed.reason and "node15 erdma_0" not in failed.reason
    assert failed.code == "HPCNET-NCCL-ALLTOALL-TRAFFIC"
    unread = judge_collective_traffic(run, devices)  # no counter reads around the launch
    assert unread.outcome == "not_measured" and "counters" in unread.reason


def test_sendrecv_share_is_the_whole_buffer():
    run = _run("sendrecv", SENDRECV, NcclExpected(collective="sendrecv_perf", max_bytes=2**30))
    devices = {"a": ["erdma_0"], "b": ["erdma_0"]}
    short = _traffic(run, {"a": {"erdma_0": 2**30 - 1}, "b": {"erdma_0": 2**30}})
    verdict = judge_collective_traffic(short, devices)
    assert verdict.outcome == "fail" and "a erdma_0" in verdict.reason
    assert "b erdma_0" not in verdict.reason
