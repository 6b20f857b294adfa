"""nccl-tests `-J` JSON parser (probes/nccl_json.py): same NcclResult, same fail-closed rules."""

from __future__ import annotations

import json

import pytest

from pytest_hpcnet.probes.nccl import NcclExpected
from pytest_hpcnet.probes.nccl_json import parse_nccl_json
from tests.corpus import sample

REAL = sample("nccl_allreduce", "h200-nccl-tests-2.19.6-g1-json.json").read_text()


def _edited(change) -> str:
    data = json.loads(REAL)
    change(data)
    return json.dumps(data)


def test_real_file_as_a_result():
    r = parse_nccl_json(REAL, NcclExpected(max_bytes=256 * 2**20, ranks=1, validation=True))
    assert r.ok and r.error is None
    assert len(r.rows) == 9 and r.max_size_bytes == 268435456
    assert r.rows[0].oop_algbw_gbs == pytest.approx(200.793926)
    assert r.total_wrong == 0 and r.wrong_column == "#wrong"
    assert (r.oob_values, r.oob_failed, r.avg_busbw_gbs) == (0, False, 0.0)
    assert r.hosts == ("vm",) and r.ranks[0].gpu == "NVIDIA H200"
    assert (r.min_bytes_asked, r.max_bytes_asked, r.step_factor) == (1048576, 268435456, 2)
    assert r.collective == "all_reduce_perf" and r.nccl_version == 22803


def test_truncated_json_is_an_error():
    r = parse_nccl_json(REAL[: len(REAL) // 2])
    assert not r.ok and r.error.startswith("unparseable JSON") and "cut short" in r.error


def test_fewer_sizes_than_asked_is_an_error():
    r = parse_nccl_json(_edited(lambda d: d["results"].__delitem__(slice(5, None))))
    assert not r.ok and "output ends at 16777216 bytes (16 MiB) of 268435456" in r.error


def test_ranks_mismatch_and_missing_footer():
    r = parse_nccl_json(REAL, NcclExpected(ranks=2, nodes=2))
    assert "output shows 1 ranks, 2 launched" in r.error and "1 host, 2 nodes" in r.error
    r = parse_nccl_json(_edited(lambda d: d.pop("average_bus_bandwidth")))
    assert "no '# Avg bus bandwidth' footer" in r.error


def test_wrong_values_and_errors():
    def wrong(d):
        d["results"][3]["out_of_place"]["nwrong"] = 7.0
        d["out_of_bounds"] = {"count": 7, "okay": "false"}

    r = parse_nccl_json(_edited(wrong))
    assert r.total_wrong == 7 and r.oob_failed and not r.ok
    r = parse_nccl_json(_edited(lambda d: d.update(results=[], errors=["Test NCCL failure x"])))
    assert r.error == "Test NCCL failure x"
    r = parse_nccl_json(_edited(lambda d: d["results"][8]["out_of_place"].update(bus_bw="nan")))
    assert not r.ok and "1 unreadable result(s)" in r.error


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize(
    "where",
    [("out_of_place", "time"), ("in_place", "time"), ("in_place", "bus_bw"), (None, "count")],
)
def test_a_non_finite_cell_is_an_unreadable_result_never_a_raise(value, where):
    """NaN/Infinity (JSON Python reads) in a count, a time or a bandwidth: never dropped."""
    side, key = where

    def edit(d):
        item = d["results"][2]
        (item[side] if side else item)[key] = value

    r = parse_nccl_json(_edited(edit), NcclExpected(validation=True))
    assert not r.ok and "1 unreadable result(s)" in r.error
    edited = _edited(lambda d: d["config"]["devices"][0].update(device=value))
    assert parse_nccl_json(edited).ranks[0].device == 0
