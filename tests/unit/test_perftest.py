"""Unit tests of the perftest (ib_write_bw / ib_write_lat) builders and parsers."""

from __future__ import annotations

import shlex

import pytest

from pytest_hpcnet.campaigns.perftest.rounds import options_for, run_round
from pytest_hpcnet.campaigns.schedule import Pair
from pytest_hpcnet.inventory.bench_settings import PerftestSettings
from pytest_hpcnet.probes.perftest import (
    PerftestOptions,
    client_command,
    largest_size,
    server_command,
)
from pytest_hpcnet.probes.perftest_parsers import MB_PER_SEC_TO_GBPS, parse_bandwidth, parse_latency
from pytest_hpcnet.transport.fanout import CommandResult
from tests.corpus import corpus_files

AREA = "perftest"


# ----------------------------------------------------------------- command builders


def test_server_command_is_bounded_and_carries_options():
    opts = PerftestOptions(
        device="erdma_0", gid_index=1, port=18515, size=65536, qps=4, duration_s=10, rdma_cm=True
    )
    cmd = server_command(opts)
    argv = shlex.split(cmd)
    assert argv[:4] == ["timeout", "-k", "5", "120"]
    assert argv[4] == "ib_write_bw"
    for flag, value in (("-d", "erdma_0"), ("-x", "1"), ("-p", "18515"), ("-s", "65536")):
        assert argv[argv.index(flag) + 1] == value
    assert argv[argv.index("-q") + 1] == "4"
    assert argv[argv.index("-D") + 1] == "10"
    assert {"-F", "-R", "--report_gbits"} <= set(argv)


def test_client_command_targets_server_last_and_quotes_everything():
    opts = PerftestOptions(device="mlx5_0; rm -rf /", all_sizes=True, extra_args=("--tos", "a b"))
    argv = shlex.split(client_command(opts, "10.0.0.2"))
    assert argv[-1] == "10.0.0.2"
    assert argv[argv.index("-d") + 1] == "mlx5_0; rm -rf /"
    assert "-a" in argv and "-s" not in argv
    assert argv[argv.index("--tos") + 1] == "a b"
    assert int(argv[3]) > 120  # client bound longer than the server's


def test_latency_tool_gets_no_report_gbits():
    argv = shlex.split(server_command(PerftestOptions(binary="ib_write_lat", size=2)))
    assert "--report_gbits" not in argv
    assert argv[4] == "ib_write_lat"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": 64, "all_sizes": True},
        {"duration_s": 5, "all_sizes": True},
        {"duration_s": 5, "iterations": 100},
    ],
)
def test_conflicting_options_are_refused(kwargs):
    with pytest.raises(ValueError):
        PerftestOptions(**kwargs)


def test_client_needs_target():
    with pytest.raises(ValueError):
        client_command(PerftestOptions(), "")


# ----------------------------------------------------------------- bandwidth parser


def test_gbits_single_size_with_header_facts(fixture_text):
    r = parse_bandwidth(fixture_text(AREA, "bw-client-erdma-gbits-s65536.txt"))
    assert r.ok and r.error is None
    assert r.avg_gbps == pytest.approx(180.77)
    assert r.peak_gbps == pytest.approx(181.20)
    assert r.msg_size == 65536
    assert r.unit_printed == "Gb/sec"
    h = r.header
    assert (h.device, h.link_type, h.qps, h.mtu, h.gid_index, h.rdma_cm) == (
        "erdma_0",
        "Ethernet",
        4,
        1024,
        1,
        False,
    )
    assert h.test == "RDMA_Write BW Test"
    assert r.rows[0].msg_rate_mpps == pytest.approx(0.344786)


def test_mbsec_old_layout_without_msgrate_is_converted(fixture_text):
    r = parse_bandwidth(fixture_text(AREA, "bw-old-layout-no-msgrate-mbsec.txt"))
    assert r.ok
    assert r.avg_gbps == pytest.approx(3254.88 * 2**20 * 8 / 1e9)
    assert r.rows[0].msg_rate_mpps is None
    assert r.header.mtu == 2048 and r.header.link_type == "IB"


def test_mb_conversion_constant():
    assert pytest.approx(0.008388608) == MB_PER_SEC_TO_GBPS


def test_all_sizes_keeps_rows_headline_is_largest_and_warnings_condensed(fixture_text):
    r = parse_bandwidth(fixture_text(AREA, "bw-all-sizes-gbits-cpufreq.txt"))
    assert [row.msg_size for row in r.rows] == [2, 1024, 1048576]
    assert r.msg_size == 1048576 and r.avg_gbps == pytest.approx(184.10)
    assert len(r.warnings) == 1 and "3 warning lines" in r.warnings[0]


@pytest.mark.parametrize("name", ["bw-nan-average.txt", "bw-negative-average.txt"])
def test_nonsense_bandwidth_is_unparseable(fixture_text, name):
    r = parse_bandwidth(fixture_text(AREA, name))
    assert not r.ok
    if "negative" in name:  # unreadable: not measured, never a failure
        assert r.error is None and "negative or implausible value" in r.not_measured
    else:
        assert r.error.startswith("unparseable output:")
    assert r.avg_gbps is None


def test_header_without_rows_is_unparseable(fixture_text):
    r = parse_bandwidth(fixture_text(AREA, "bw-header-no-rows.txt"))
    assert r.error.startswith("unparseable output: header but no result rows")
    assert r.header.device == "erdma_0"


@pytest.mark.parametrize(
    ("name", "first_line"),
    [
        ("bw-device-not-found.txt", "IB device erdma_9 not found"),
        ("bw-no-ib-devices.txt", "No IB devices found"),
    ],
)
def test_device_errors_carry_tool_lines(fixture_text, name, first_line):
    r = parse_bandwidth(fixture_text(AREA, name))
    assert not r.ok
    assert r.error.splitlines() == [first_line, "Unable to find the Infiniband/RoCE device"]


def test_bare_output_number_uses_given_unit(fixture_text):
    text = fixture_text(AREA, "bw-bare-output-bandwidth.txt")
    assert parse_bandwidth(text, bare_unit="Gb/sec").avg_gbps == pytest.approx(181.22)
    assert parse_bandwidth(text).avg_gbps == pytest.approx(181.22 * MB_PER_SEC_TO_GBPS)


@pytest.mark.parametrize("text", ["", "   \n", "garbage\x00\x01 here", "#bytes\n 1 2 3"])
def test_odd_text_never_raises(text):
    r = parse_bandwidth(text)
    assert r.error is not None and not r.ok
    assert parse_latency(text).error is not None


def test_duration_mode_peak_zero_is_not_reported_as_peak():
    text = (
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
        " 65536      4159603          0.00               363.47             0.693268\n"
        "---------------------------------------------------------------------------------------\n"
    )
    r = parse_bandwidth(text)
    assert r.ok and r.peak_gbps is None and r.avg_gbps == pytest.approx(363.47)
    assert any("duration" in p for p in r.problems)


def test_interleaved_identical_rows_are_deduplicated():
    block = (
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
        " 8388608    20000            24056.74            24056.72\t\t   0.003007\n"
    )
    r = parse_bandwidth(block + "************************************\n" + block)
    assert len(r.rows) == 1
    assert any("interleaved" in p for p in r.problems)


# ----------------------------------------------------------------- latency parser


def test_old_latency_layout_uses_typical(fixture_text):
    r = parse_latency(fixture_text(AREA, "lat-old-layout-typical-only.txt"))
    assert r.ok
    assert r.t_avg_us == pytest.approx(1.09) and r.t_typical_us == pytest.approx(1.09)
    assert r.p99_us is None and r.t_min_us == pytest.approx(1.05)
    assert len(r.rows) == 2 and r.msg_size == 2
    assert any("t_typical used" in p for p in r.problems)


def test_latency_without_percentiles(fixture_text):
    r = parse_latency(fixture_text(AREA, "lat-avg-stdev-no-percentiles.txt"))
    assert r.t_avg_us == pytest.approx(8.31)
    assert r.rows[0].t_stdev_us == pytest.approx(0.42)
    assert r.p99_us is None and r.p999_us is None
    assert r.header.gid_index == 1 and r.header.rdma_cm is True


def test_latency_error_lines(fixture_text):
    r = parse_latency(fixture_text(AREA, "lat-client-couldnt-connect.txt"))
    assert r.error.splitlines()[0] == "Couldn't connect to 172.16.1.12:18515"
    assert r.t_avg_us is None


def test_latency_bare_number_and_zero():
    assert parse_latency("2.404708\n").t_avg_us == pytest.approx(2.404708)
    assert parse_latency("0.000000\n").error.startswith("unparseable output")
    assert parse_latency("-nan\n").error.startswith("unparseable output")


# ----------------------------------------------------------------- fail closed
# Real outputs (tests/fixtures/perftest/PROVENANCE.md) cut where killed runs stop.


def test_bw_table_cut_before_the_last_requested_size_is_an_error(fixture_text):
    text = fixture_text(AREA, "real-dc-roce-bw-all-sizes-cut-after-1MiB.txt")
    r = parse_bandwidth(text, expected_size=largest_size(PerftestOptions(all_sizes=True)))
    assert not r.ok and r.avg_gbps is None
    assert "1048576" in r.error and "8388608" in r.error and "\n" not in r.error


def test_bw_table_without_closing_rule_is_an_error_even_without_a_size(fixture_text):
    r = parse_bandwidth(fixture_text(AREA, "real-dc-roce-bw-all-sizes-cut-after-1MiB.txt"))
    assert not r.ok and "closing" in r.error


def test_bw_duration_run_without_its_footer_is_an_error(fixture_text):
    r = parse_bandwidth(fixture_text(AREA, "real-bnxt-bw-duration-no-closing-rule.txt"))
    assert not r.ok and r.error is not None and "65536" in r.error


@pytest.mark.parametrize(
    "name", ["real-cx5-lat-no-closing-rule.txt", "real-a100-lat-all-sizes-cut-after-4096.txt"]
)
def test_lat_table_without_closing_rule_is_an_error(fixture_text, name):
    r = parse_latency(fixture_text(AREA, name))
    assert not r.ok and r.t_avg_us is None and "closing" in r.error


def test_lat_table_cut_before_the_last_requested_size_is_an_error(fixture_text):
    text = fixture_text(AREA, "real-a100-lat-all-sizes-cut-after-4096.txt")
    r = parse_latency(text, expected_size=8388608)
    assert not r.ok and "4096" in r.error and "8388608" in r.error


def test_complete_tables_pass_with_their_requested_size():
    files = {p.name: p for p in corpus_files("ib_write_bw")}
    files.update({p.name: p for p in corpus_files("ib_write_lat")})
    assert files, "corpus missing: tests/fixtures/samples"
    bw = files["dc-cx-roce-client-gbits-all-sizes.txt"].read_text()
    assert parse_bandwidth(bw, expected_size=8388608).ok
    single = files["bnxt-re-broadcom-duration-gbits-q3.txt"].read_text()
    assert parse_bandwidth(single, expected_size=65536).ok
    assert not parse_bandwidth(single, expected_size=1048576).ok  # -s 1M asked, 64 KiB ran
    lat = files["a100-cx6-hdr-ib-client-all-sizes-cpufreq.txt"].read_text()
    assert parse_latency(lat, expected_size=8388608).ok


def test_largest_size_asked():
    assert largest_size(PerftestOptions(all_sizes=True)) == 8388608
    assert largest_size(PerftestOptions(size=4096)) == 4096
    assert largest_size(PerftestOptions()) == 65536  # ib_write_bw's default -s
    assert largest_size(PerftestOptions(binary="ib_write_lat")) == 2
    assert largest_size(PerftestOptions(extra_args=("--size", "8"))) is None  # not ours to tell


def test_terminal_colour_codes_are_stripped_before_parsing():
    # the escapes `nvidia-smi topo -m` prints (samples/nvidia_smi) around the bnxt row
    files = {p.name: p for p in corpus_files("ib_write_bw")}
    assert files, "corpus missing: tests/fixtures/samples"
    plain = files["bnxt-re-broadcom-duration-gbits-q3.txt"].read_text()
    row = " 65536      4159603          0.00               363.47             0.693268"
    assert row in plain
    coloured = plain.replace(row, "\x1b[4m" + row + "\x1b[0m")
    r = parse_bandwidth(coloured)
    assert r.ok and r.avg_gbps == parse_bandwidth(plain).avg_gbps


def test_pair_round_holds_the_client_output_to_the_size_it_asked():
    # perftest_rounds passes largest_size(options): -s 1M asked, the output shows 64 KiB
    files = {p.name: p for p in corpus_files("ib_write_bw")}
    assert files, "corpus missing: tests/fixtures/samples"
    output = files["bnxt-re-broadcom-duration-gbits-q3.txt"].read_text()

    class Fake:
        def run_on_all(self, command, nodes=None, timeout_s=None, together=False):
            return {n: CommandResult(n, "cmd", 0, output, "", 1.0, 0.0) for n in nodes}

    pair, addresses = Pair("n1", "n2"), {"n1": "10.0.0.1", "n2": "10.0.0.2"}

    def measured(size: int):
        settings = PerftestSettings(size=size)

        def side(node: str, port: int) -> PerftestOptions:
            return options_for(settings, "ib_write_bw", port, "erdma_0", None)

        return run_round(Fake(), [pair], 1, "ib_write_bw", settings, addresses, side)[pair]

    assert measured(65536).value == pytest.approx(363.47)
    short = measured(1048576)
    # another size than asked: not measured (never a failure), its figure withheld
    assert short.value is None and short.error is None
    assert "rows of 65536 bytes, 1048576 asked" in short.not_measured


def test_every_eri_localized_to_node_and_device():
    """node03's erdma_1 fails with both partners while its erdma_0 and every other node's
    devices pass: the schedule names `node03 erdma_1`, not node03 as a whole."""
    from pytest_hpcnet.campaigns.perftest.devices import localize_devices, missing_device, worst
    from pytest_hpcnet.campaigns.perftest.rounds import PairRun

    names = ["node01", "node02", "node03", "node04"]
    devices = {n: ["erdma_0", "erdma_1"] for n in names}

    def runs(pair, bad1):
        return {
            "erdma_0": PairRun(pair, 1, device="erdma_0"),
            "erdma_1": PairRun(pair, 1, device="erdma_1", error="slow" if bad1 else None),
        }

    pairs = [Pair("node01", "node03"), Pair("node03", "node02"), Pair("node02", "node04")]
    every = [(p, runs(p, "node03" in p.key)) for p in pairs]
    every.append((Pair("node04", "node01"), runs(Pair("node04", "node01"), False)))
    ok = lambda run: run.error is None  # noqa: E731
    assert localize_devices(every, names, devices, ok) == ["node03 erdma_1"]
    assert worst(every[0][1], ok).device == "erdma_1"
    assert worst(every[2][1], ok).device == "erdma_0"
    lacking = missing_device(Pair("node01", "node02"), 1, 1, {**devices, "node02": ["erdma_0"]})
    assert lacking.error == "node02 has no ERI 1 (erdma_0)" and lacking.device == "erdma_1"


def test_all_at_once_rounds_cover_every_node_of_an_odd_cluster():
    from pytest_hpcnet.campaigns.perftest.devices import instance_rounds
    from pytest_hpcnet.campaigns.schedule import schedule_rounds

    for n in (2, 3, 5, 8, 9):
        nodes = [f"n{i}" for i in range(n)]
        rounds = schedule_rounds(nodes, "matchings", 2)
        picked = instance_rounds(rounds)
        assert picked[0] == rounds[0] and len(picked) <= 2
        covered = [x for r in picked for p in r for x in (p.a, p.b)]
        assert set(covered) == set(nodes), (n, picked)
        for r in picked:  # each round's pairs are disjoint: they run at once
            inside = [x for p in r for x in (p.a, p.b)]
            assert len(inside) == len(set(inside))
    assert instance_rounds([]) == []


@pytest.mark.parametrize("value", ["nan", "inf", "-nan", "-inf"])
def test_a_non_finite_cell_is_an_error_never_a_raise(fixture_text, value):
    """`#iterations` (read as an int) or a rate printed as nan/inf: the run is unparseable."""
    bw = fixture_text(AREA, "bw-client-erdma-gbits-s65536.txt")
    for row in (" 65536      5000 ", "0.344786"):
        cut = parse_bandwidth(
            bw.replace(row, row.replace("5000", value).replace("0.344786", value))
        )
        assert not cut.ok and cut.avg_gbps is None
        assert cut.error.startswith("unparseable output: non-finite value in row")
    sized = bw.replace(" 65536      5000 ", f" {value}      5000 ")  # a row with no size
    assert parse_bandwidth(sized).error.startswith("unparseable output: non-finite value")
    lat = fixture_text(AREA, "lat-avg-stdev-no-percentiles.txt")
    first = lat.splitlines()[12]
    r = parse_latency(lat.replace(first, first.replace(first.split()[1], value, 1)))
    assert not r.ok and r.t_avg_us is None and "non-finite" in r.error


def test_one_pairs_unreadable_output_fails_that_pair_never_the_round(monkeypatch):
    """A parser that raises on one pair's output (it must not; belt and braces) makes that
    pair's run an error; the round's other pairs keep their measurements."""
    from pytest_hpcnet.campaigns.perftest import rounds as perftest_rounds

    good = {p.name: p for p in corpus_files("ib_write_bw")}
    output = good["bnxt-re-broadcom-duration-gbits-q3.txt"].read_text()
    real = perftest_rounds.parse_bandwidth

    def fragile(text, **kwargs):
        if "BROKEN" in text:
            raise ValueError("cannot convert float NaN to integer")
        return real(text, **kwargs)

    monkeypatch.setattr(perftest_rounds, "parse_bandwidth", fragile)

    class Fake:
        def run_on_all(self, command, nodes=None, timeout_s=None, together=False):
            return {
                n: CommandResult(n, "cmd", 0, "BROKEN" if n == "n3" else output, "", 1.0, 0.0)
                for n in nodes
            }

    settings = PerftestSettings(size=65536)
    pairs = [Pair("n1", "n2"), Pair("n3", "n4")]
    addresses = {f"n{i}": f"10.0.0.{i}" for i in range(1, 5)}

    def side(node: str, port: int) -> PerftestOptions:
        return options_for(settings, "ib_write_bw", port, "erdma_0", None)

    runs = run_round(Fake(), pairs, 1, "ib_write_bw", settings, addresses, side)
    assert runs[pairs[0]].value == pytest.approx(363.47)
    broken = runs[pairs[1]]
    assert broken.value is None and broken.error.startswith("unparseable output")
    assert "ValueError" in broken.error and broken.commands
