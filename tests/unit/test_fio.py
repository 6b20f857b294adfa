"""Unit tests of the fio builders, fio JSON parser and the mount check."""

from __future__ import annotations

import shlex

import pytest

from pytest_hpcnet.campaigns.storage import run_fio
from pytest_hpcnet.inventory.bench_settings import FioSettings
from pytest_hpcnet.probes.fio import (
    FioJobSpec,
    fio_cleanup_command,
    fio_command,
    fstype_allowed,
    mount_check_command,
    normalize_fstype,
    parse_fio_json,
    parse_mount,
)
from pytest_hpcnet.transport.fanout import CommandResult
from tests.corpus import corpus_files

AREA = "fio"


def test_fio_command_shape():
    spec = FioJobSpec(directory="/mnt/cpfs/my dir", rw="read", numjobs=8, size="10g")
    argv = shlex.split(fio_command(spec))
    assert argv[0] == "fio"
    for want in (
        "--directory=/mnt/cpfs/my dir",
        "--rw=read",
        "--bs=1m",
        "--direct=1",
        "--ioengine=libaio",
        "--numjobs=8",
        "--size=10g",
        "--runtime=60",
        "--time_based",
        "--group_reporting",
        "--output-format=json",
        "--name=hpcnet-seq",
    ):
        assert want in argv


def test_cleanup_removes_only_job_files():
    spec = FioJobSpec(directory="/mnt/cpfs/x y", name="hpcnet-seq")
    argv = shlex.split(fio_cleanup_command(spec))
    assert argv == [
        "find", "/mnt/cpfs/x y", "-maxdepth", "1", "-type", "f", "-name", "hpcnet-seq.*", "-delete"
    ]  # fmt: skip


@pytest.mark.parametrize(
    "kwargs", [{"rw": "randread"}, {"name": "a;b"}, {"directory": ""}, {"name": "a b"}]
)
def test_bad_job_specs_are_refused(kwargs):
    with pytest.raises(ValueError):
        FioJobSpec(**{"directory": "/mnt", **kwargs})


def test_group_reporting_seq_read(fixture_text):
    r = parse_fio_json(fixture_text(AREA, "fio3-seq-read-group-reporting.json"))
    assert r.ok and r.error is None
    assert r.read_bw_mb_s == pytest.approx(2500.0)
    assert r.write_bw_mb_s == 0.0
    job = r.jobs[0]
    assert job.rw == "read" and job.read.io_bytes == 150_000_000_000
    assert job.read.clat_mean_us == pytest.approx(6700.0)
    assert job.read.clat_p99_us == pytest.approx(12000.0)
    assert r.fio_version == "fio-3.35"


def test_two_jobs_per_job_and_aggregate(fixture_text):
    r = parse_fio_json(fixture_text(AREA, "fio3-two-jobs-read-write.json"))
    assert [j.name for j in r.jobs] == ["reader", "writer"]
    assert r.jobs[0].read.bw_mb_s == pytest.approx(1000.0)
    assert r.jobs[1].write.bw_mb_s == pytest.approx(500.0)
    assert (r.read_bw_mb_s, r.write_bw_mb_s) == (pytest.approx(1000.0), pytest.approx(500.0))


def test_job_error_carries_preamble_lines(fixture_text):
    r = parse_fio_json(fixture_text(AREA, "fio3-job-error-eio-with-prefix.json"))
    assert not r.ok
    assert r.error.splitlines()[1] == (
        "fio: pid=5123, err=5/file:io_u.c:1889, func=io_u error, error=Input/output error"
    )
    assert r.jobs[0].error == 5


def test_text_only_error(fixture_text):
    r = parse_fio_json(fixture_text(AREA, "fio-text-only-error.txt"))
    assert r.error.startswith("fio: unrecognized option '--directoy")
    assert r.jobs == ()


@pytest.mark.parametrize(
    ("name", "needle"),
    [("fio3-negative-bw.json", "bandwidth"), ("fio3-no-jobs.json", "without jobs")],
)
def test_nonsense_is_unparseable(fixture_text, name, needle):
    r = parse_fio_json(fixture_text(AREA, name))
    assert r.error.startswith("unparseable output") and needle in r.error
    assert not r.ok


def test_fio2_units_kib_and_usec():
    text = (
        '{"fio version": "fio-2.2.10", "jobs": [{"jobname": "j", "error": 0, '
        '"read": {"io_bytes": 1024, "bw": 2048, "iops": 2, "runtime": 500, '
        '"clat": {"mean": 123.5, "percentile": {"99.000000": 400}}}, '
        '"write": {"io_bytes": 0, "bw": 0, "iops": 0, "runtime": 0}}]}'
    )
    r = parse_fio_json(text)
    assert r.jobs[0].read.io_bytes == 1024 * 1024
    assert r.read_bw_mb_s == pytest.approx(2048 * 1024 / 1e6)
    assert r.jobs[0].read.clat_mean_us == 123.5 and r.jobs[0].read.clat_p99_us == 400


@pytest.mark.parametrize("text", ["", "{", "{ not json", "[1, 2]", '{"jobs": "x"}', "\x00"])
def test_odd_text_never_raises(text):
    assert parse_fio_json(text).error is not None


# ----------------------------------------------------------------- mount check


def test_findmnt_json_nfs4_counts_as_nfs(fixture_text):
    m = parse_mount(fixture_text(AREA, "findmnt-cpfs-nfs4.json"), "/mnt/cpfs/hpcnet")
    assert m.error is None
    assert m.target == "/mnt/cpfs" and m.fstype == "nfs4"
    assert m.source.endswith("cpfs.aliyuncs.com:/share")
    assert "vers=4.0" in m.options
    assert fstype_allowed(m.fstype)


def test_findmnt_root_ext4_is_not_allowed(fixture_text):
    m = parse_mount(fixture_text(AREA, "findmnt-root-ext4.json"), "/mnt/cpfs")
    assert m.target == "/" and m.fstype == "ext4"
    assert not fstype_allowed(m.fstype)


def test_proc_mounts_longest_prefix_and_escapes(fixture_text):
    text = fixture_text(AREA, "proc-mounts-cpfs.txt")
    m = parse_mount(text, "/mnt/cpfs/data")
    assert (m.target, m.fstype) == ("/mnt/cpfs", "cpfs")
    local = parse_mount(text, "/mnt/cpfs local/x")
    assert (local.target, local.fstype) == ("/mnt/cpfs local", "xfs")
    assert parse_mount(text, "/mnt/cpfsX").target == "/"


def test_mount_errors():
    assert parse_mount("", "/x").error
    assert parse_mount("findmnt: command not found", "/x").error == "findmnt: command not found"
    assert parse_mount("/dev/vda1 /data ext4 rw 0 0", "/other").error == "no mount holds /other"


@pytest.mark.parametrize(
    ("fstype", "allowed"),
    [("nfs4", True), ("NFS", True), ("nfs3", True), ("cpfs", True), ("fuse.cpfs", True),
     ("alinas", True), ("cpfs-nfs", True), ("ext4", False), ("", False), (None, False),
     ("nfsd", False)],
)  # fmt: skip
def test_fstype_allowed(fstype, allowed):
    assert fstype_allowed(fstype) is allowed


def test_fstype_allowed_custom_list_and_normalize():
    assert fstype_allowed("lustre", ("lustre",))
    assert not fstype_allowed("nfs4", ("cpfs",))
    assert normalize_fstype(" NFS4 ") == "nfs"


def test_mount_check_command_quotes_path():
    assert shlex.split(mount_check_command("/mnt/a b"))[:4] == ["findmnt", "-J", "-T", "/mnt/a b"]


# ----------------------------------------------------------------- fail closed


def test_interrupted_run_is_an_error_not_a_throughput(fixture_text):
    r = parse_fio_json(fixture_text(AREA, "real-ceph-randread-terminating-on-signal-2.json"))
    assert not r.ok and r.error is not None
    assert "terminating on signal 2" in r.error and "\n" not in r.error
    assert r.jobs  # the figures are kept for the record, but are not a result


def test_runtime_shorter_than_asked_is_an_error():
    # PKB's real sequential_read job covered 2788 ms; the caller asked for 30 s
    files = {p.name: p for p in corpus_files("fio_json")}
    assert files, "corpus missing: tests/fixtures/samples"
    text = files["pkb-fio-2.1.4-seq-rand.json"].read_text()
    assert parse_fio_json(text).ok  # no runtime asked, none known from the JSON
    r = parse_fio_json(text, expected_runtime_s=30)
    assert not r.ok and "2.8 s of 30 s" in r.error and "sequential_read" in r.error


def test_runtime_as_long_as_asked_is_ok():
    files = {p.name: p for p in corpus_files("fio_json")}
    assert files, "corpus missing: tests/fixtures/samples"
    text = files["fioplot-fio3.6-ceph-rbd-hdd-randread-16jobs.json"].read_text()
    assert parse_fio_json(text, expected_runtime_s=60).ok  # 60025 ms
    assert not parse_fio_json(text, expected_runtime_s=120).ok


def test_time_based_runtime_in_the_json_is_checked_without_the_caller(fixture_text):
    # our own command line (--runtime=60 --time_based) is echoed in "job options"
    text = fixture_text(AREA, "fio3-seq-read-group-reporting.json")
    assert parse_fio_json(text).ok  # 60000 ms of 60 s
    short = text.replace('"runtime": 60000', '"runtime": 2800')
    assert short != text
    r = parse_fio_json(short)
    assert not r.ok and "2.8 s of 60 s" in r.error


def test_run_fio_holds_each_node_to_the_runtime_it_asked():
    # storage.run_fio passes benchmarks.fio.runtime_s: PKB's JSON carries no options
    files = {p.name: p for p in corpus_files("fio_json")}
    assert files, "corpus missing: tests/fixtures/samples"
    output = files["pkb-fio-2.1.4-seq-rand.json"].read_text()

    class Fake:
        def run_on_all(self, command, nodes=None, timeout_s=None, together=False):
            return {n: CommandResult(n, "fio", 0, output, "", 1.0, 0.0) for n in nodes}

    runs = run_fio(Fake(), ["n1"], "/mnt/cpfs", FioSettings(runtime_s=30))
    assert not runs["n1"].write.ok and "2.8 s of 30 s" in runs["n1"].write.error


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", '"nan"'])
@pytest.mark.parametrize("cell", ['"error": 0', '"runtime": 60000', '"iops": '])
def test_a_non_finite_cell_is_an_error_never_a_raise(fixture_text, value, cell):
    """fio `error`, `runtime` (read as ints) or a rate as NaN/Infinity: never a figure."""
    text = fixture_text(AREA, "fio3-two-jobs-read-write.json")
    assert parse_fio_json(text).ok
    start = text.index(cell)
    end = text.index(",", start)
    r = parse_fio_json(text[:start] + cell.split(":")[0] + ": " + value + text[end:])
    assert not r.ok and r.error.startswith("unparseable output: non-finite value in job")
