"""A perftest output is measured only when it is the one run its command asked for:
one table, the test, message size and iteration count asked, no tool error after the
table, no last line cut mid-number, and ASCII digits only (review findings 1 and 4)."""

from __future__ import annotations

import pytest

from pytest_hpcnet.campaigns.perftest.rounds import PairRun, _parsed_run, _section
from pytest_hpcnet.campaigns.schedule import Pair
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.perftest import PerftestOptions, expected_run
from pytest_hpcnet.probes.perftest_parsers import parse_bandwidth, parse_latency
from pytest_hpcnet.probes.sections import MARK
from pytest_hpcnet.requirements.judges import judge_ib_write_bw
from pytest_hpcnet.transport.fanout import CommandResult

AREA = "perftest"
BW = "bw-client-erdma-gbits-s65536.txt"
LAT = "lat-avg-stdev-no-percentiles.txt"
WRITE_BW = expected_run(PerftestOptions(binary="ib_write_bw", size=65536))


@pytest.fixture
def bw_text(fixture_text):
    return fixture_text(AREA, BW)


def test_the_fixture_as_asked_is_measured(bw_text):
    r = parse_bandwidth(bw_text, expected=WRITE_BW)
    assert r.ok and r.not_measured is None and r.avg_gbps == pytest.approx(180.77)


def test_expected_run_from_the_options():
    e = expected_run(PerftestOptions(binary="ib_write_lat", size=2, iterations=1000))
    assert (e.test, e.kind, e.size, e.iterations) == ("RDMA_Write Latency Test", "lat", 2, 1000)
    e = expected_run(PerftestOptions(binary="/usr/bin/ib_read_bw", all_sizes=True))
    assert (e.test, e.size, e.largest) == ("RDMA_Read BW Test", None, 2**23)
    assert expected_run(PerftestOptions(extra_args=("-s", "8"))).size is None


def test_a_second_table_is_not_measured(bw_text):
    r = parse_bandwidth(bw_text + bw_text, expected=WRITE_BW)
    assert not r.ok and r.error is None and r.avg_gbps is None
    assert "2 runs in one output" in r.not_measured
    assert not parse_bandwidth(bw_text + bw_text).ok  # without `expected` too


def test_another_message_size_is_not_measured(bw_text):
    asked = expected_run(PerftestOptions(size=4096))
    r = parse_bandwidth(bw_text, expected=asked)
    assert not r.ok and "rows of 65536 bytes, 4096 asked" in r.not_measured


@pytest.mark.parametrize("title", ["RDMA_Read BW Test", "Send BW Test", "Atomic BW Test"])
def test_another_test_type_is_not_measured(bw_text, title):
    r = parse_bandwidth(bw_text.replace("RDMA_Write BW Test", title), expected=WRITE_BW)
    assert not r.ok and title in r.not_measured


def test_a_latency_table_for_bandwidth_is_not_measured(fixture_text):
    lat = fixture_text(AREA, LAT)
    r = parse_bandwidth(lat, expected=WRITE_BW)
    assert not r.ok and r.error is None and "latency table" in r.not_measured


def test_a_bandwidth_table_for_latency_is_not_measured(bw_text):
    asked = expected_run(PerftestOptions(binary="ib_write_lat", size=65536))
    r = parse_latency(bw_text, expected=asked)
    assert not r.ok and r.error is None and "bandwidth table" in r.not_measured


def test_another_iteration_count_is_not_measured(fixture_text):
    lat = fixture_text(AREA, LAT)
    row = parse_latency(lat).rows[0]
    same = expected_run(PerftestOptions(binary="ib_write_lat", size=2, iterations=row.iterations))
    assert parse_latency(lat, expected=same).ok
    other = expected_run(PerftestOptions(binary="ib_write_lat", size=2, iterations=7))
    r = parse_latency(lat, expected=other)
    assert not r.ok and "7 asked" in r.not_measured


@pytest.mark.parametrize(
    "line",
    [
        " Failed to complete run",
        "Couldn't read remote address",
        " Completion with error at client",
    ],
)
def test_a_tool_error_after_the_table_is_not_measured(bw_text, line):
    r = parse_bandwidth(bw_text + line + "\n", expected=WRITE_BW)
    assert not r.ok and r.error is None and "tool error after the table" in r.not_measured
    assert not parse_bandwidth(bw_text + line + "\n").ok


def test_a_last_row_cut_mid_number_is_not_measured(bw_text):
    lines = bw_text.splitlines(keepends=True)
    row = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("65536"))
    cut = "".join(lines[:row]) + lines[row].split("180.77")[0] + "180.7"
    r = parse_bandwidth(cut, expected=WRITE_BW)
    assert not r.ok and r.avg_gbps is None


@pytest.mark.parametrize("parse", [parse_bandwidth, parse_latency])
def test_a_bare_number_without_line_end_is_not_measured(parse):
    whole = parse("181.22\n")
    assert whole.ok
    r = parse("181.2")  # `--output=bandwidth` cut after four digits of 181.22
    assert not r.ok and "mid-line" in r.not_measured


@pytest.mark.parametrize(
    "digits", ["１８０.７７", "١٨٠.٧٧", "nan", "inf", "-180.77", "1e300x", "1_80.77"]
)
def test_odd_digits_in_a_cell_never_give_a_figure(bw_text, digits):
    r = parse_bandwidth(bw_text.replace("180.77", digits), expected=WRITE_BW)
    assert not r.ok and r.avg_gbps is None


def test_full_width_message_size_is_no_row(bw_text):
    r = parse_bandwidth(bw_text.replace(" 65536      5000", " ６５５３６      5000"))
    assert not r.ok and not r.rows


def test_pair_run_of_another_run_is_not_measured_never_failed(bw_text):
    run = _parsed_run(Pair("a", "b"), 1, "ib_write_bw", bw_text + bw_text, WRITE_BW, "", ())
    assert isinstance(run, PairRun)
    assert run.error is None and run.value is None
    assert run.not_measured.startswith("not measured: 2 runs in one output")
    verdict = judge_ib_write_bw(run, Expectations())
    assert verdict.outcome == "not_measured"
    good = _parsed_run(Pair("a", "b"), 1, "ib_write_bw", bw_text, WRITE_BW, "", ())
    assert good.value == pytest.approx(180.77) and good.not_measured is None


def _sectioned(output: str) -> CommandResult:
    # what `sections_script` prints: begin line, the output, `echo`, end line
    stdout = f"{MARK} begin p1\n{output}\n{MARK} end p1 0\n"
    return CommandResult("n1", "cmd", 0, stdout, "", 1.0, 0.0)


def test_a_section_cut_mid_row_keeps_its_missing_line_end(bw_text):
    whole = _section(_sectioned(bw_text), "p1")
    assert whole.stdout == bw_text
    row_end = bw_text.index("0.344786") + len("0.344")
    cut = _section(_sectioned(bw_text[:row_end]), "p1")
    assert cut.stdout == bw_text[:row_end]
    run = _parsed_run(Pair("a", "b"), 1, "ib_write_bw", cut.stdout, WRITE_BW, "", ())
    assert run.value is None and run.error is None and "mid-line" in run.not_measured


def test_a_header_with_bytes_not_first_never_raises():
    text = (
        " #iterations #bytes BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n"
        " 5000 7.95 1.0 1.0 0.1\n"
        "---------------------------------------------------------------------------------------\n"
    )
    assert not parse_bandwidth(text).ok
    lat = text.replace(
        "BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]", "t_avg[usec] t_x[usec] t_y[usec]"
    )
    assert not parse_latency(lat).ok


def test_a_client_output_the_transport_truncated_is_not_measured(bw_text):
    import dataclasses

    from pytest_hpcnet.campaigns.perftest.rounds import _pair_run

    ok = CommandResult("a", "cmd", 0, bw_text, "", 1.0, 0.0)
    cut = dataclasses.replace(ok, truncated=True)
    whole = _pair_run(Pair("a", "b"), 1, "ib_write_bw", ok, ok, ok, (), WRITE_BW)
    assert whole.value == pytest.approx(180.77)
    run = _pair_run(Pair("a", "b"), 1, "ib_write_bw", ok, cut, ok, (), WRITE_BW)
    assert run.value is None and run.error is None and "truncated" in run.not_measured
