"""An NCCL output that cannot be read, or is not the run asked for, is not measured: never a
pass, never a failure; the parsers never raise (findings 1-3 of the NCCL review). Variants of
real outputs: PROVENANCE.md in tests/fixtures/nccl."""

from __future__ import annotations

import json

import pytest

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.nccl import NcclExpected, parse_nccl
from pytest_hpcnet.probes.nccl_debug import split_nccl_log
from pytest_hpcnet.probes.nccl_json import parse_nccl_json
from pytest_hpcnet.requirements import judges
from pytest_hpcnet.transport.fanout import CommandResult
from tests.conftest import FIXTURES
from tests.corpus import sample

GCP = sample("nccl_allreduce", "gcp-a3mega-h100-2node-16gpu.txt").read_text()
GCP_HOSTS = (("node01", "ztan-mig-235z"), ("node02", "ztan-mig-gq73"))
GCP_RUN = NcclExpected(
    max_bytes=8 * 2**30,
    ranks=16,
    nodes=2,
    validation=True,
    min_bytes=8,
    step_factor=2,
    gpus_per_process=1,
    op="sum",
    collective="all_reduce_perf",
    hosts=GCP_HOSTS,
)
"""What the GCP sample's mpirun launched: -np 16 -npernode 8 on 2 nodes, -b 8 -e 8G -f 2."""
REAL_JSON = sample("nccl_allreduce", "h200-nccl-tests-2.19.6-g1-json.json").read_text()
JSON_RUN = NcclExpected(
    max_bytes=256 * 2**20,
    ranks=1,
    nodes=1,
    validation=True,
    min_bytes=2**20,
    step_factor=2,
    gpus_per_process=1,
    op="sum",
    collective="all_reduce_perf",
    hosts=(("n1", "vm"),),
)
EXPECT = Expectations.model_validate(
    {"nccl": {"min_avg_busbw_gbs": 10.0, "min_busbw_largest_gbs": 12.0}}
)
OK = CommandResult("node01", "mpirun ... all_reduce_perf", 0, "", "", 1.0, 0.0)
ROW8 = "           8             2     float     sum      -1    135.8    0.00    0.00      0"


def not_measured(result, launched=GCP_RUN) -> None:
    """Every NCCL judge reads the result as not measured (never a pass, never a failure)."""
    for verdict in (
        judges.judge_nccl_run(result, OK, launched),
        judges.judge_nccl_avg_busbw(result, EXPECT, OK, launched),
        judges.judge_nccl_largest_busbw(result, EXPECT, OK, launched),
        judges.judge_nccl_correct(result, OK, launched),
        judges.judge_nccl(result, EXPECT, OK, launched),
    ):
        assert verdict.outcome == "not_measured", verdict


def test_the_real_runs_pass_as_launched():
    assert parse_nccl(GCP, GCP_RUN).ok
    assert judges.judge_nccl(parse_nccl(GCP, GCP_RUN), EXPECT, OK, GCP_RUN)
    assert parse_nccl_json(REAL_JSON, JSON_RUN).ok


# -- finding 1: INFO lines inside rank 0's table -------------------------------------------


def test_info_lines_cutting_a_row_are_not_measured_never_a_failure():
    text = (FIXTURES / "nccl" / "real-gcp-a3mega-info-interleaved.txt").read_text()
    for shown in (text, split_nccl_log(text)[1]):  # with and without the INFO lines
        result = parse_nccl(shown, GCP_RUN)
        assert not result.ok and "unreadable row" in result.reason
        assert not result.failed
        not_measured(result)


def test_a_real_failure_is_still_a_failure():
    text = (FIXTURES / "nccl" / "real-gcp-a3mega-then-nccl-failure-segv.txt").read_text()
    result = parse_nccl(text, GCP_RUN)
    assert result.failed
    verdict = judges.judge_nccl_run(result, OK, GCP_RUN)
    assert verdict.outcome == "fail" and "common.cu:1279" in verdict.reason


def test_a_launch_that_timed_out_is_not_measured_one_that_exited_non_zero_fails():
    result = parse_nccl(GCP, GCP_RUN)
    timed_out = CommandResult("node01", "mpirun", None, "", "", 600.0, 0.0, timed_out=True)
    assert judges.judge_nccl_run(result, timed_out, GCP_RUN).outcome == "not_measured"
    exited = CommandResult("node01", "mpirun", 1, "", "x", 6.0, 0.0)
    assert judges.judge_nccl_run(result, exited, GCP_RUN).outcome == "fail"


# -- finding 2: JSON `okay` and in-place cells ----------------------------------------------


def edited(change) -> str:
    data = json.loads(REAL_JSON)
    change(data)
    return json.dumps(data)


@pytest.mark.parametrize("okay", ["yes", 1, None, 0, "", "ok", [], {}])
def test_json_okay_that_is_not_true_or_false_is_not_measured(okay):
    result = parse_nccl_json(edited(lambda d: d["out_of_bounds"].update(okay=okay)), JSON_RUN)
    assert not result.ok and result.oob_failed is None
    not_measured(result, JSON_RUN)


@pytest.mark.parametrize("okay", ["true", True])
def test_json_okay_true_is_read(okay):
    result = parse_nccl_json(edited(lambda d: d["out_of_bounds"].update(okay=okay)), JSON_RUN)
    assert result.ok and result.oob_failed is False


@pytest.mark.parametrize("key", ["time", "alg_bw", "bus_bw"])
@pytest.mark.parametrize("value", ["fast", "1.5", None, True, [1.0], -1.0, 1e300])
def test_json_in_place_cell_that_is_not_a_number_is_not_measured(key, value):
    text = edited(lambda d: d["results"][3]["in_place"].update({key: value}))
    result = parse_nccl_json(text, JSON_RUN)
    assert not result.ok
    not_measured(result, JSON_RUN)


@pytest.mark.parametrize("value", ["fast", 12])
def test_json_in_place_half_that_is_not_an_object_is_not_measured(value):
    result = parse_nccl_json(edited(lambda d: d["results"][2].update(in_place=value)), JSON_RUN)
    assert not result.ok
    not_measured(result, JSON_RUN)


# -- finding 3: the text parser's numbers, a cut last row, two runs, the run asked ---------


@pytest.mark.parametrize("digit", ["８", "²", "٣", "߈", "𝟖"])
def test_a_size_with_a_non_ascii_digit_never_raises_and_is_not_measured(digit):
    text = GCP.replace(ROW8, ROW8.replace("           8 ", f"           {digit} ", 1))
    result = parse_nccl(text, GCP_RUN)
    assert not result.ok
    not_measured(result)
    parse_nccl(text.replace("  2     float", f"  {digit}     float"))  # the count too


@pytest.mark.parametrize("cell", ["nan", "inf", "-1", "1e300", "1.2e3", "１３５.８", "١٣٥"])
@pytest.mark.parametrize("column", [5, 6, 7])  # time, algbw, busbw (out-of-place)
def test_numeric_cells_that_are_not_plain_numbers_are_not_measured(cell, column):
    row = "     1048576        262144     float     sum      -1    203.2    5.16    9.68      0"
    assert row in GCP
    tokens = row.split()
    tokens[column] = cell
    text = GCP.replace(row, "  ".join(tokens))
    result = parse_nccl(text, GCP_RUN)
    assert not result.ok, cell
    not_measured(result)


def test_numeric_cells_must_follow_from_size_and_time():
    row = "     1048576        262144     float     sum      -1    203.2    5.16    9.68      0"
    for edit in (
        "    203.2    0.00    9.68",
        "    203.2    5.16    0.00",
        "    0.0    5.16    9.68",
    ):
        text = GCP.replace(row, row.replace("    203.2    5.16    9.68", edit))
        result = parse_nccl(text, GCP_RUN)
        assert not result.ok, edit
        not_measured(result)


def test_an_average_that_is_not_the_rows_average_is_not_measured():
    text = GCP.replace("# Avg bus bandwidth    : 70.742", "# Avg bus bandwidth    : 7.742")
    result = parse_nccl(text, GCP_RUN)
    assert not result.ok and "not the rows' average" in result.reason
    not_measured(result)


def test_a_number_cut_at_the_end_of_the_output_is_not_a_measurement():
    last = GCP.index("# Avg bus bandwidth    : 70.742") + len("# Avg bus bandwidth    : 70.7")
    result = parse_nccl(GCP[:last], GCP_RUN)
    assert not result.ok and result.avg_busbw_gbs is None
    not_measured(result)
    row = GCP.index("  8589934592    2147483648")
    cut = GCP[: GCP.index("337.3", row) + 4]  # the largest row's in-place busbw cut mid-way
    result = parse_nccl(cut, GCP_RUN)
    assert not result.ok
    not_measured(result)


def test_two_runs_in_one_output_are_not_measured():
    result = parse_nccl(GCP + GCP, GCP_RUN)
    assert not result.ok
    not_measured(result)
    footer = GCP.index("# Out of bounds values")
    again = GCP[:footer] + GCP[GCP.index("           8 ") : footer] + GCP[footer:]
    result = parse_nccl(again, GCP_RUN)  # every row twice, one header
    assert not result.ok
    not_measured(result)


def test_a_repeated_row_is_not_measured():
    result = parse_nccl(GCP.replace(ROW8, ROW8 + "\n" + ROW8), GCP_RUN)
    assert not result.ok and "8 sizes" not in result.reason
    not_measured(result)


@pytest.mark.parametrize(
    "change",
    [
        {"op": "max"},
        {"min_bytes": 16},
        {"step_factor": 4},
        {"max_bytes": 4 * 2**30},
        {"gpus_per_process": 2},
        {"hosts": (("node01", "ztan-mig-235z"), ("node03", "other-host"))},
        {"ranks": 8},
    ],
    ids=lambda c: next(iter(c)),
)
def test_an_output_that_is_not_the_run_launched_is_not_measured(change):
    import dataclasses

    launched = dataclasses.replace(GCP_RUN, **change)
    result = parse_nccl(GCP, launched)
    assert not result.ok, change
    not_measured(result, launched)


def test_a_row_of_another_op_is_not_measured():
    text = GCP.replace("     float     sum ", "     float    prod ")
    result = parse_nccl(text, GCP_RUN)
    assert not result.ok and "op prod" in result.reason
    not_measured(result)


def test_the_rank_table_names_the_node_without_ranks():
    launched = NcclExpected(ranks=16, nodes=2, hosts=(("node01", "ztan-mig-235z"), ("node02",)))
    result = parse_nccl(GCP, launched)
    assert "ranks on ztan-mig-gq73, not a launched node" in result.reason
    assert "no rank on node02" in result.reason


def test_json_is_held_to_the_run_asked_too():
    import dataclasses

    for change in ({"op": "max"}, {"min_bytes": 8}, {"hosts": (("n1", "other"),)}):
        launched = dataclasses.replace(JSON_RUN, **change)
        result = parse_nccl_json(REAL_JSON, launched)
        assert not result.ok, change
        not_measured(result, launched)
    twice = edited(lambda d: d["results"].insert(2, d["results"][2]))
    assert not parse_nccl_json(twice, JSON_RUN).ok
    not_measured(parse_nccl_json(twice, JSON_RUN), JSON_RUN)
    size = edited(lambda d: d["results"][2].update(size=True))
    assert not parse_nccl_json(size, JSON_RUN).ok
    root = edited(lambda d: d["results"][2].update(root="²"))
    parse_nccl_json(root, JSON_RUN)  # never raises


def test_the_tools_failure_line_is_the_reason_whatever_the_launcher_printed_first():
    """mpirun's abort banner can reach the output before the crashed rank's own line; the
    reason names the rank's line (and so its node)."""
    from pytest_hpcnet.probes.nccl import NcclResult

    result = NcclResult(
        failures=(
            "Primary job terminated normally, but 1 process returned a non-zero exit code. "
            "Per user-direction, the job has been aborted.",
            "node03: Test NCCL failure common.cu:1279 'unhandled system error'",
        )
    )
    assert result.reason.startswith("node03: Test NCCL failure common.cu:1279")
