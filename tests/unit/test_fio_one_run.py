"""A fio JSON output is measured only as one whole run: every job's `error` an integer,
one JSON document, nothing after it, each job once (review findings 3 and 4)."""

from __future__ import annotations

import json

import pytest

from pytest_hpcnet.inventory.expectations import CpfsExpect
from pytest_hpcnet.probes.fio import FioResult, parse_fio_json
from pytest_hpcnet.requirements.cpfs import judge_node_throughput

NAME = "fio3-seq-read-group-reporting.json"


@pytest.fixture
def whole(fixture_text):
    return fixture_text("fio", NAME)


def _with_job(text: str, **fields) -> str:
    data = json.loads(text)
    data["jobs"][0].update(fields)
    return json.dumps(data) + "\n"


def _judged(result) -> str:
    return judge_node_throughput("n1", "read", result, None, CpfsExpect()).outcome


def test_the_whole_run_is_measured(whole):
    r = parse_fio_json(whole)
    assert r.ok and r.not_measured is None and r.read_bw_mb_s > 0


@pytest.mark.parametrize("error", ["EIO", "5", "0", 1.5, None, True, [5], {"errno": 5}])
def test_an_error_field_that_is_no_integer_is_not_measured(whole, error):
    r = parse_fio_json(_with_job(whole, error=error))
    assert not r.ok and r.error is None and "is not an integer" in r.not_measured
    assert r.read_bw_mb_s is None and _judged(r) == "not_measured"


def test_a_non_zero_integer_error_is_still_the_tool_failing(whole):
    r = parse_fio_json(_with_job(whole, error=5))
    assert not r.ok and r.error and r.not_measured is None


def test_two_json_documents_are_not_measured(whole):
    r = parse_fio_json(whole + whole)
    assert not r.ok and "two JSON documents" in r.not_measured and _judged(r) == "not_measured"


def test_an_io_u_error_after_the_json_is_not_measured(whole):
    line = "fio: io_u error on file /mnt/cpfs/hpcnet-seq.0.0: Input/output error: read offset=0"
    r = parse_fio_json(whole + line + "\n")
    assert not r.ok and "text after the JSON: fio: io_u error" in r.not_measured
    assert _judged(r) == "not_measured"


def test_one_job_counted_twice_is_not_measured(whole):
    data = json.loads(whole)
    data["jobs"].append(data["jobs"][0])
    r = parse_fio_json(json.dumps(data))
    assert not r.ok and "counted twice" in r.not_measured and r.read_bw_mb_s is None


@pytest.mark.parametrize("value", ["１２３４５６", "١٢٣٤٥٦", "1_000", "nan", "-inf"])
def test_a_string_figure_in_other_digits_is_never_a_figure(whole, value):
    data = json.loads(whole)
    read = data["jobs"][0]["read"]
    read.pop("bw_bytes", None)
    read["bw"] = value
    r = parse_fio_json(json.dumps(data))
    assert not r.ok and r.read_bw_mb_s is None


def test_json_nested_too_deep_never_raises():
    r = parse_fio_json('{"jobs": ' + "[" * 100000)
    assert not r.ok


@pytest.mark.parametrize(
    "text",
    [
        '{"jobs": [{"jobname": "j", "error": 0, "read": {"bw": 10, '
        '"clat_ns": {"percentile": 5}}}]}',
        '{"jobs": [{"jobname": "j", "error": 0, "read": {"bw": 1' + "0" * 400 + "}}]}",
        '{"filesystems": 5}',
        '{"filesystems": [{"children": 5, "target": 5}]}',
        None,
        5,
    ],
)
def test_odd_json_never_raises(text):
    from pytest_hpcnet.probes.fio import parse_mount

    assert isinstance(parse_fio_json(text), FioResult)  # the property: it returns
    assert parse_mount(text, "/mnt").target is None


def test_run_fio_leaves_an_output_that_is_not_one_run_not_measured(whole):
    from pytest_hpcnet.campaigns.storage import run_fio
    from pytest_hpcnet.inventory.bench_settings import FioSettings
    from pytest_hpcnet.transport.fanout import CommandResult

    io_u = "fio: io_u error on file /mnt/cpfs/x.0.0: Input/output error: read offset=0\n"

    class Fake:
        def run_on_all(self, command, nodes=None, timeout_s=None, together=False):
            return {n: CommandResult(n, "fio", 1, whole + io_u, "", 1.0, 0.0) for n in nodes}

    run = run_fio(Fake(), ["n1"], "/mnt/cpfs", FioSettings(runtime_s=1))["n1"]
    assert run.error is None and "io_u error" in run.read.not_measured
    verdict = judge_node_throughput("n1", "read", run.read, run.error, CpfsExpect())
    assert verdict.outcome == "not_measured"
