"""Unit tests of the nccl-tests output parser."""

from __future__ import annotations

import pytest

from pytest_hpcnet.probes.nccl import parse_nccl

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


def test_truncated_run_counts_wrong_and_notes_missing_average(fixture_text):
    r = parse_nccl(fixture_text(AREA, "allreduce-truncated-no-avg.txt"))
    assert r.error is None
    assert r.total_wrong == 4 and not r.ok
    assert r.avg_busbw_gbs is None
    assert any("Avg bus bandwidth" in p for p in r.problems)
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
