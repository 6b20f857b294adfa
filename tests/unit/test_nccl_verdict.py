"""Issue 23, findings 3-5: an NCCL run that failed, ranks that do not add up, or correctness
that was not checked is never a pass. Crafted variants of real outputs: PROVENANCE.md in
tests/fixtures/nccl."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.nccl import NcclExpected, NcclResult, parse_nccl
from pytest_hpcnet.probes.nccl_json import parse_nccl_json
from pytest_hpcnet.report.recording import Check
from pytest_hpcnet.report.verdict import NOT_APPLICABLE
from pytest_hpcnet.requirements import judges
from pytest_hpcnet.requirements.verdict import NotMeasured
from pytest_hpcnet.suites import test_nccl as suite
from pytest_hpcnet.transport.fanout import CommandResult
from tests.conftest import FIXTURES
from tests.corpus import sample

NCCL = FIXTURES / "nccl"
GCP = sample("nccl_allreduce", "gcp-a3mega-h100-2node-16gpu.txt").read_text()
GCP_RUN = NcclExpected(max_bytes=8 * 2**30, ranks=16, nodes=2, validation=True)
"""What the GCP sample's mpirun launched: -np 16 -npernode 8 on 2 nodes, -e 8G, -c 1."""
REAL_JSON = sample("nccl_allreduce", "h200-nccl-tests-2.19.6-g1-json.json").read_text()
JSON_RUN = NcclExpected(max_bytes=256 * 2**20, ranks=1, nodes=1, validation=True)
EXPECT = Expectations.model_validate(
    {"nccl": {"min_avg_busbw_gbs": 10.0, "min_busbw_largest_gbs": 12.0}}
)


def fixture(name: str) -> str:
    return (NCCL / name).read_text()


def launch(status: int | None = 0, stdout: str = "") -> CommandResult:
    return CommandResult("node01", "mpirun ... all_reduce_perf", status, stdout, "", 1.0, 0.0)


def edited_json(change) -> str:
    data = json.loads(REAL_JSON)
    change(data)
    return json.dumps(data)


def test_the_real_runs_are_ok():
    assert parse_nccl(GCP, GCP_RUN).ok
    good = parse_nccl_json(REAL_JSON, JSON_RUN)
    assert good.ok and judges.judge_nccl_run(good, launch(0), JSON_RUN)
    assert judges.judge_nccl_correct(good, launch(0), JSON_RUN)


# -- finding 3: a run that failed ----------------------------------------------------------


def test_failure_after_a_complete_table_fails_every_judge():
    text = fixture("real-gcp-a3mega-then-nccl-failure-segv.txt")
    result = parse_nccl(text, GCP_RUN)
    assert result.rows and result.max_size_bytes == 8 * 2**30  # the table is whole
    assert not result.ok
    died = launch(139, text)
    for verdict in (
        judges.judge_nccl_run(result, died, GCP_RUN),
        judges.judge_nccl_avg_busbw(result, EXPECT, died, GCP_RUN),
        judges.judge_nccl_largest_busbw(result, EXPECT, died, GCP_RUN),
        judges.judge_nccl_correct(result, died, GCP_RUN),
        judges.judge_nccl(result, EXPECT, died, GCP_RUN),
    ):
        assert not verdict and not judges.is_not_measured(verdict)
        assert "Test NCCL failure common.cu:1279" in verdict.reason
        assert "exit status 139" in verdict.reason and "\n" not in verdict.reason


def test_launcher_exit_status_is_judged_even_when_the_output_is_clean():
    result = parse_nccl(GCP, GCP_RUN)
    assert judges.judge_nccl_run(result, launch(0), GCP_RUN)
    for failed in (launch(1), launch(None), _timed_out()):
        verdict = judges.judge_nccl_run(result, failed, GCP_RUN)
        assert not verdict and "launcher" in verdict.reason, verdict.reason
        assert not judges.judge_nccl_avg_busbw(result, EXPECT, failed, GCP_RUN)


def _timed_out() -> CommandResult:
    return CommandResult("node01", "mpirun", None, "", "", 600.0, 0.0, timed_out=True)


def test_json_errors_fail_the_run_with_a_complete_file():
    text = edited_json(lambda d: d.update(errors=["Test NCCL failure common.cu:1279 'x'"]))
    result = parse_nccl_json(text, JSON_RUN)
    assert len(result.rows) == 9 and not result.ok
    verdict = judges.judge_nccl_run(result, launch(0), JSON_RUN)
    assert not verdict and "common.cu:1279" in verdict.reason
    assert not judges.judge_nccl_avg_busbw(result, EXPECT, launch(0), JSON_RUN)


# -- finding 4: ranks checked, not counted -------------------------------------------------


def test_two_independent_tables_fail_naming_nccl_tests_without_mpi():
    text = fixture("real-issue290-h100x8-twice-no-mpi.txt")
    launched = NcclExpected(max_bytes=4 * 2**30, ranks=16, nodes=2, validation=True)
    result = parse_nccl(text, launched)
    assert result.tables == (8, 8) and len(result.ranks) == 16
    assert result.hosts == ("node005", "node006")
    assert not result.ok and "without MPI" in result.reason
    # a result parsed without the launch is held to it by the judge
    loose = parse_nccl(text)
    verdict = judges.judge_nccl_run(loose, launch(0), launched)
    assert not verdict and "2 separate result tables" in verdict.reason
    assert "without MPI" in verdict.reason
    assert not judges.judge_nccl_avg_busbw(loose, EXPECT, launch(0), launched)


def test_a_rank_listed_twice_and_one_missing_fail():
    text = fixture("real-gcp-a3mega-rank14-twice.txt")
    assert len(parse_nccl(text).ranks) == 16  # sixteen lines, as launched
    result = parse_nccl(text, GCP_RUN)
    assert not result.ok
    assert "rank 14 listed twice" in result.reason and "rank 15 missing" in result.reason
    verdict = judges.judge_nccl_run(parse_nccl(text), launch(0), GCP_RUN)
    assert not verdict and "rank 14 listed twice" in verdict.reason


def test_ranks_on_fewer_hosts_than_launched_fail_in_the_judge():
    verdict = judges.judge_nccl_run(parse_nccl(GCP), launch(0), NcclExpected(ranks=16, nodes=4))
    assert not verdict and "2 hosts, 4 nodes launched" in verdict.reason


def test_json_ranks_are_checked_too():
    def twice(d):
        d["config"]["devices"].append(dict(d["config"]["devices"][0], pid=9))

    result = parse_nccl_json(edited_json(twice), NcclExpected(ranks=2, nodes=1))
    assert not result.ok and "rank 0 listed twice" in result.reason


# -- finding 5: correctness checked, or said not to be -------------------------------------


def test_validation_off_is_not_measured_never_a_pass():
    text = sample(
        "nccl_allreduce", "h200-nccl-tests-2.19.6-g1-debug-info-socket-fallback-c0.txt"
    ).read_text()
    launched = NcclExpected(max_bytes=64 * 2**20, ranks=1, nodes=1, validation=False)
    result = parse_nccl(text, launched)
    assert result.ok and result.total_wrong is None
    verdict = judges.judge_nccl_correct(result, launch(0), launched)
    assert not verdict and judges.is_not_measured(verdict)
    assert verdict.outcome == "not_measured"
    assert not verdict.reason.startswith(NOT_APPLICABLE) and "-c 0" in verdict.reason


def test_in_place_wrong_all_na_under_c1_is_not_validated():
    text = fixture("real-gcp-a3mega-inplace-wrong-na.txt")
    loose = parse_nccl(text)
    assert loose.total_wrong == 0 and (loose.wrong_na, loose.wrong_cells) == (31, 62)
    verdict = judges.judge_nccl_correct(loose, launch(0), None)
    assert not verdict and judges.is_not_measured(verdict) and "N/A" in verdict.reason
    result = parse_nccl(text, GCP_RUN)
    assert not result.ok and "N/A" in result.reason and "-c 1" in result.reason


def test_wrong_counts_do_not_cancel_and_a_negative_count_fails_closed():
    result = parse_nccl(fixture("real-gcp-a3mega-wrong-5-minus-5.txt"), GCP_RUN)
    assert not result.ok and result.total_wrong != 0
    assert "5 at 8 bytes (sum, out-of-place)" in result.wrong_found
    assert "-5 at 8 bytes (sum, in-place)" in result.reason
    for verdict in (
        judges.judge_nccl_correct(result, launch(0), GCP_RUN),
        judges.judge_nccl_avg_busbw(result, EXPECT, launch(0), GCP_RUN),
    ):
        assert not verdict and not judges.is_not_measured(verdict)


def test_a_positive_count_fails_naming_size_and_op():
    row = "     1048576        262144     float     sum      -1    203.2    5.16    9.68      0"
    assert row in GCP
    text = GCP.replace(row, row[:-1] + "3")
    result = parse_nccl(text)
    assert result.total_wrong == 3 and result.wrong_found == (
        "3 at 1048576 bytes (sum, out-of-place)",
    )
    verdict = judges.judge_nccl_correct(result, launch(0), None)
    assert not verdict and "3 wrong values" in verdict.reason
    assert "1048576 bytes (sum, out-of-place)" in verdict.reason


@pytest.mark.parametrize(
    ("value", "shown"),
    [(math.nan, "nan"), (-1.0, "-1"), (2.5, "2.5"), ("x", "x"), (None, "N/A"), ("drop", "missing")],
)
def test_json_nwrong_that_is_not_a_count_fails_closed(value, shown):
    def change(d):
        cell = d["results"][4]["in_place"]
        if value == "drop":
            cell.pop("nwrong")
        else:
            cell["nwrong"] = value

    result = parse_nccl_json(edited_json(change), JSON_RUN)
    assert not result.ok
    assert result.total_wrong is None if value is not None else result.wrong_na == 1
    assert "16777216 bytes (sum, in-place)" in result.reason, result.reason
    assert shown in result.reason
    assert not judges.judge_nccl_correct(result, launch(0), JSON_RUN)


def test_json_without_validation_is_not_measured():
    def off(d):
        d["config"]["validation"] = 0
        for item in d["results"]:
            item["out_of_place"]["nwrong"] = item["in_place"]["nwrong"] = None

    launched = NcclExpected(max_bytes=256 * 2**20, ranks=1, nodes=1, validation=False)
    result = parse_nccl_json(edited_json(off), launched)
    assert result.ok and result.total_wrong is None
    assert judges.is_not_measured(judges.judge_nccl_correct(result, launch(0), launched))


# -- the suite asserts the judges' verdicts -------------------------------------------------


def fake_cluster(result: NcclResult, command: CommandResult, launched: NcclExpected | None):
    expect = EXPECT.model_copy(
        update={"erdma": EXPECT.erdma.model_copy(update={"nccl_network": "IB"})}
    )
    return SimpleNamespace(
        expect=expect,
        nodes=[SimpleNamespace(name="a"), SimpleNamespace(name="b")],
        nccl=lambda check: (result, command),
        collective=SimpleNamespace(launched=lambda: launched),
        perftest=lambda tool: SimpleNamespace(localization=SimpleNamespace(suspects=[])),
        nccl_bisection=lambda check: SimpleNamespace(suspects=[], trials=[], reason="off"),
    )


def fake_check() -> Check:
    return Check("nccl_busbw", "NCCL", "cluster", "cluster", "", None)


SUITE = (
    suite.test_average_bus_bandwidth,
    suite.test_bus_bandwidth_at_largest_size,
    suite.test_no_wrong_results,
    suite.test_nccl_runs_on_erdma_not_sockets,
)


@pytest.mark.parametrize("test", SUITE, ids=lambda t: t.__name__)
def test_suite_fails_a_run_that_failed_after_its_table(test):
    text = fixture("real-gcp-a3mega-then-nccl-failure-segv.txt")
    cluster = fake_cluster(parse_nccl(text, GCP_RUN), launch(139, text), GCP_RUN)
    with pytest.raises(AssertionError, match=r"common\.cu:1279"):
        test(cluster, fake_check())


@pytest.mark.parametrize("test", SUITE, ids=lambda t: t.__name__)
def test_suite_does_not_measure_two_independent_tables(test):
    # not the one job launched: not measured (INCOMPLETE), never a pass nor a failure
    text = fixture("real-issue290-h100x8-twice-no-mpi.txt")
    launched = NcclExpected(max_bytes=4 * 2**30, ranks=16, nodes=2, validation=True)
    cluster = fake_cluster(parse_nccl(text), launch(0, text), launched)
    with pytest.raises(NotMeasured, match="without MPI"):
        test(cluster, fake_check())


@pytest.mark.parametrize("test", SUITE[:3], ids=lambda t: t.__name__)
def test_suite_passes_the_real_run(test):
    cluster = fake_cluster(parse_nccl(GCP, GCP_RUN), launch(0, GCP), GCP_RUN)
    test(cluster, fake_check())


def test_suite_correctness_under_c0_is_not_measured():
    text = sample(
        "nccl_allreduce", "h200-nccl-tests-2.19.6-g1-debug-info-socket-fallback-c0.txt"
    ).read_text()
    launched = NcclExpected(max_bytes=64 * 2**20, ranks=1, nodes=1, validation=False)
    cluster = fake_cluster(parse_nccl(text, launched), launch(0, text), launched)
    with pytest.raises(NotMeasured, match=r"-c 0"):
        suite.test_no_wrong_results(cluster, fake_check())


# -- the campaign's -J path keeps what the printed output says ------------------------------


def test_json_result_keeps_a_failure_printed_after_the_file_was_written():
    from tests.unit.test_nccl_output import NEW_USAGE, FakeTransport, _nodes, campaign

    tail = "vm: Test NCCL failure common.cu:1279 'unhandled system error'\n"
    parsed, _, _ = campaign(FakeTransport(NEW_USAGE, tail, REAL_JSON), 1, "256M").launch(
        _nodes("n1")
    )
    assert len(parsed.rows) == 9 and not parsed.ok
    assert "common.cu:1279" in judges.judge_nccl_run(parsed).reason


def test_json_result_fails_when_the_printed_output_has_two_tables():
    from tests.unit.test_nccl_output import NEW_USAGE, FakeTransport, _nodes, campaign

    two = fixture("real-issue290-h100x8-twice-no-mpi.txt")
    parsed, _, _ = campaign(FakeTransport(NEW_USAGE, two, REAL_JSON), 1, "256M").launch(
        _nodes("n1")
    )
    assert not parsed.ok and "without MPI" in parsed.reason
