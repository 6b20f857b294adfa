"""Unit tests of the nccl-tests output parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.cluster import Cluster
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.probes.nccl import NcclExpected, nccl_size, parse_nccl
from tests.corpus import corpus_files

AREA = "nccl"


def test_tag_output_prefixes_ranks_and_warn_lines(fixture_text):
    r = parse_nccl(fixture_text(AREA, "allreduce-2node-tag-output-warn.txt"))
    assert r.error is None and r.ok
    assert len(r.rows) == 6
    assert r.max_size_bytes == 1073741824
    assert r.busbw_at_max_size_gbs == pytest.approx(25.77)
    assert r.avg_busbw_gbs == pytest.approx(20.2613)
    assert r.total_wrong == 0 and r.wrong_column == "#wrong"
    assert r.oob_values == 0 and r.oob_failed is False
    assert [x.rank for x in r.ranks] == [0, 1, 2, 3]
    assert r.hosts == ("gpu-node-a", "gpu-node-b")
    assert r.ranks[2].gpu == "NVIDIA H800" and r.ranks[2].device == 0
    assert r.tests_version == "2.13.8" and r.nccl_version == 21903
    assert r.collective == "all_reduce_perf"
    assert len(r.warnings) == 1 and "GID index 1" in r.warnings[0]
    row = r.rows[1]
    assert (row.size_bytes, row.count, row.dtype, row.redop, row.root) == (
        4194304,
        1048576,
        "float",
        "sum",
        -1,
    )
    assert (row.oop_time_us, row.oop_algbw_gbs, row.ip_busbw_gbs) == (412.6, 10.17, 15.34)


def test_failure_without_table_carries_tool_lines(fixture_text):
    r = parse_nccl(fixture_text(AREA, "allreduce-nccl-failure-no-table.txt"))
    assert not r.ok and r.rows == ()
    lines = r.error.splitlines()
    assert "gpu-node-b: Test NCCL failure common.cu:961" in lines[0]
    assert any("NCCL WARN" in ln for ln in lines)
    assert len(r.ranks) == 2


def test_nan_busbw_at_largest_size_is_unparseable(fixture_text):
    r = parse_nccl(fixture_text(AREA, "allreduce-nan-busbw.txt"))
    assert r.error.startswith("unparseable output")
    assert r.avg_busbw_gbs is None
    assert any("average bus bandwidth" in p for p in r.problems)


def test_truncated_run_counts_wrong_and_is_an_error(fixture_text):
    r = parse_nccl(fixture_text(AREA, "allreduce-truncated-no-avg.txt"))
    assert r.error is not None and not r.ok
    assert "16 bytes" in r.error and "8589934592" in r.error and "Avg bus bandwidth" in r.error
    assert r.total_wrong == 4
    assert r.avg_busbw_gbs is None
    assert r.n_gpus_per_thread == 8


def test_old_layout_error_column_and_empty_redop():
    text = (
        "#       size         count    type   redop     time   algbw   busbw  error"
        "     time   algbw   busbw  error\n"
        "        1024            32   float            88.17    0.01    0.01    N/A"
        "    88.98    0.01    0.01    N/A\n"
        "        2048            64   float     sum    86.44    0.02    0.03  1e-07"
        "    86.65    0.02    0.03  2e-07\n"
        "# Avg bus bandwidth    : 0.02\n"
    )
    r = parse_nccl(text)
    assert r.wrong_column == "error" and r.total_wrong is None
    assert r.rows[0].redop is None and r.rows[0].root is None
    assert r.rows[1].redop == "sum" and r.rows[1].oop_wrong == pytest.approx(1e-07)
    assert r.busbw_at_max_size_gbs == pytest.approx(0.03)


def test_srun_label_prefix_and_asterisk_wrong():
    text = (
        "0: #  size  count  type  redop  root  time  algbw  busbw #wrong"
        "  time  algbw  busbw #wrong\n"
        "0:   8388608  2097152  float  sum  -1  100.0  83.89  83.89  2*  101.0  83.06  83.06  0\n"
        "0: # Out of bounds values : 2 FAILED\n"
        "0: # Avg bus bandwidth    : 83.4\n"
    )
    r = parse_nccl(text)
    assert len(r.rows) == 1 and r.total_wrong == 2
    assert r.oob_failed is True and not r.ok


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "12 34 garbage", "\x00\xff"])
def test_odd_text_is_an_error_not_an_exception(text):
    r = parse_nccl(text)
    assert r.error is not None and not r.ok


# --------------------------------------------------------------------------- fail closed
# Real outputs (tests/fixtures/nccl/PROVENANCE.md) cut where killed runs stop.

CSCS_RANKS = 2  # the CSCS sample ran 2 ranks on 2 nodes, -b 1M -e 128M


def test_cut_at_8mib_of_128mib_is_an_error_naming_both_sizes(fixture_text):
    r = parse_nccl(fixture_text(AREA, "real-cscs-gh200-cut-after-8MiB.txt"))
    assert not r.ok and r.error is not None
    assert "8388608" in r.error and "134217728" in r.error
    assert r.reason is not None and "\n" not in r.reason and "8388608" in r.reason


def test_cut_below_the_callers_max_bytes_is_an_error(fixture_text):
    text = fixture_text(AREA, "real-cscs-gh200-cut-after-8MiB.txt")
    r = parse_nccl(text, NcclExpected(max_bytes=nccl_size("8G")))
    assert not r.ok and "8589934592" in r.error


def test_full_table_below_the_callers_max_bytes_is_an_error():
    # the whole real run (footer and all) covered -e 128M; the caller launched -e 8G
    files = {p.name: p for p in corpus_files("nccl_allreduce")}
    assert files, "corpus missing: tests/fixtures/samples"
    text = files["cscs-alps-gh200-2node-nccl-tests-2.18.2.txt"].read_text()
    assert parse_nccl(text, NcclExpected(max_bytes=nccl_size("128M"))).ok
    r = parse_nccl(text, NcclExpected(max_bytes=nccl_size("8G")))
    assert not r.ok and "134217728" in r.reason and "8589934592" in r.reason


@pytest.mark.parametrize(
    "name", ["real-cscs-gh200-cut-before-footer.txt", "real-cscs-gh200-cut-before-avg.txt"]
)
def test_all_sizes_but_no_footer_is_not_ok(fixture_text, name):
    r = parse_nccl(fixture_text(AREA, name))
    assert r.max_size_bytes == 134217728  # every size is there, the end is not
    assert not r.ok and r.error is not None and "footer" in r.error
    assert "\n" not in r.reason


def test_row_cut_mid_line_is_an_error(fixture_text):
    text = fixture_text(AREA, "real-cscs-gh200-cut-before-footer.txt")
    cut = text[: text.index("22.50   22.50       0") + 8]  # killed while printing 64 MiB
    r = parse_nccl(cut)
    assert not r.ok and "33554432" in r.error


@pytest.mark.parametrize("launched", [1, 8, 16])
def test_rank_count_other_than_launched_is_an_error_naming_both(launched):
    files = {p.name: p for p in corpus_files("nccl_allreduce")}
    assert files, "corpus missing: tests/fixtures/samples"
    text = files["cscs-alps-gh200-2node-nccl-tests-2.18.2.txt"].read_text()
    assert parse_nccl(text, NcclExpected(ranks=CSCS_RANKS, nodes=2)).ok
    r = parse_nccl(text, NcclExpected(ranks=launched))
    assert not r.ok and f"{CSCS_RANKS} ranks" in r.reason and f"{launched} launched" in r.reason


def test_sixteen_ranks_when_eight_launched_is_an_error():
    files = {p.name: p for p in corpus_files("nccl_allreduce")}
    assert files, "corpus missing: tests/fixtures/samples"
    r = parse_nccl(files["gcp-a3mega-h100-2node-16gpu.txt"].read_text(), NcclExpected(ranks=8))
    assert not r.ok and "16 ranks" in r.reason and "8 launched" in r.reason


def test_ranks_on_fewer_hosts_than_nodes_launched_is_an_error():
    # mpirun put both ranks on the host "lab": 2 ranks as launched, but 1 host of 2
    files = {p.name: p for p in corpus_files("nccl_allreduce")}
    assert files, "corpus missing: tests/fixtures/samples"
    text = files["mpirun-tag-output-prefixed-rtx5090-socket.txt"].read_text()
    assert parse_nccl(text, NcclExpected(ranks=2, nodes=1)).ok
    r = parse_nccl(text, NcclExpected(ranks=2, nodes=2))
    assert not r.ok and "1 host" in r.reason and "2 nodes" in r.reason


def test_validation_asked_but_not_in_output_is_an_error():
    # PKB's run had validation: 0 (#wrong N/A): no proof that the results are right
    files = {p.name: p for p in corpus_files("nccl_allreduce")}
    assert files, "corpus missing: tests/fixtures/samples"
    text = files["pkb-k80-2node.txt"].read_text()
    assert parse_nccl(text).ok
    r = parse_nccl(text, NcclExpected(validation=True))
    assert not r.ok and "validation" in r.reason


def test_wrong_values_and_oob_give_a_one_line_reason():
    files = {p.name: p for p in corpus_files("nccl_allreduce")}
    assert files, "corpus missing: tests/fixtures/samples"
    r = parse_nccl(files["error-wrong-results-oob-failed-gh200-issue369.txt"].read_text())
    assert not r.ok and r.error is None
    assert r.reason is not None and "\n" not in r.reason


def test_nccl_size_reads_nccl_tests_suffixes():
    assert [nccl_size(s) for s in ("8", "1K", "128M", "8G", "8g")] == [
        8, 1024, 134217728, 8589934592, 8589934592
    ]  # fmt: skip
    assert nccl_size("lots") is None and nccl_size("") is None


def test_bisection_predicate_fails_on_wrong_values_even_above_the_bounds(ssh_home, tmp_path):
    # the localization predicate used to check only error/rows/bounds: a run with 128
    # wrong values and "Out of bounds values : 4 FAILED" passed as a healthy half
    files = {p.name: p for p in corpus_files("nccl_allreduce")}
    assert files, "corpus missing: tests/fixtures/samples"
    inventory = load_inventory(Path(__file__).parents[2] / "inventories" / "example.yaml")
    cluster = Cluster(inventory, transport=None)  # nccl_passes reads only the expectations
    bad = parse_nccl(files["error-wrong-results-oob-failed-gh200-issue369.txt"].read_text())
    good = parse_nccl(files["cscs-alps-gh200-2node-nccl-tests-2.18.2.txt"].read_text())
    assert cluster.nccl_passes(good)
    assert not cluster.nccl_passes(bad)


def test_terminal_colour_codes_are_stripped_before_parsing():
    # the escapes `nvidia-smi topo -m` prints around its header (samples/nvidia_smi)
    files = {p.name: p for p in corpus_files("nccl_allreduce")}
    assert files, "corpus missing: tests/fixtures/samples"
    plain = files["cscs-alps-gh200-2node-nccl-tests-2.18.2.txt"].read_text()
    lines = plain.splitlines(keepends=True)
    lines[9] = "\x1b[4m" + lines[9].rstrip("\n") + "\x1b[0m\n"  # the column header
    lines[11] = "\x1b[1;32m" + lines[11].rstrip("\n") + "\x1b[0m\n"  # the first row
    coloured = parse_nccl("".join(lines))
    assert coloured.ok and coloured.rows == parse_nccl(plain).rows


def test_open_mpi_launcher_warning_is_a_warning_not_a_failure(fixture_text):
    """Open MPI's rsh launcher prints this on a loaded machine (the child had exec'd first);
    the run is whole and correct, so it must not fail the all-reduce."""
    text = fixture_text(AREA, "real-cscs-gh200-cut-before-footer.txt")
    whole = parse_nccl(
        fixture_text("samples/nccl_allreduce", "cscs-alps-gh200-2node-nccl-tests-2.18.2.txt")
    )
    assert whole.ok, whole.reason
    line = (
        "[node01:26927] plm:rsh: Warning: setpgid(26933,26933) failed in parent "
        "with errno=Permission denied(13)"
    )
    warned = parse_nccl(
        fixture_text("samples/nccl_allreduce", "cscs-alps-gh200-2node-nccl-tests-2.18.2.txt")
        + line
        + "\n"
    )
    assert warned.ok, warned.reason
    assert warned.failures == () and warned.warnings[-1] == line
    assert not parse_nccl(text + line + "\n").ok  # a cut table stays an error


@pytest.mark.parametrize("value", ["nan", "inf", "-nan"])
def test_a_non_finite_cell_is_an_error_never_a_raise(value):
    """A #wrong count (summed as an int) or a bandwidth printed as nan/inf, in any row."""
    files = {p.name: p for p in corpus_files("nccl_allreduce")}
    text = files["cscs-alps-gh200-2node-nccl-tests-2.18.2.txt"].read_text()
    assert parse_nccl(text).ok
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("1048576 "))
    cells = row.split()
    for i in (8, 5, 11):  # out-of-place #wrong and time, an in-place bandwidth
        edited = text.replace(row, row.replace(f" {cells[i]} ", f" {value} ", 1))
        r = parse_nccl(edited)
        assert not r.ok and r.error.startswith("unparseable output: non-finite value in row")
    r = parse_nccl(text.replace(row, row.replace("1048576", value, 1)))  # a row with no size
    assert not r.ok and r.error.startswith("unparseable output: unreadable row")
