"""fio JSON parser against the published corpus (fio 2.1 .. 3.33)."""

from __future__ import annotations

import pytest

from pytest_hpcnet.probes.fio import parse_fio_json
from tests.corpus import corpus_files

KIB = 1024 / 1e6  # one KiB/s in MB/s

# file -> (version, jobs, aggregate read MB/s, aggregate write MB/s,
#          (first job name, its clat mean in usec for its active direction))
SAMPLES = {
    "fioplot-fio3.1-floppy-seq-write.json": (
        "fio-3.1", 1, 0.0, 12 * KIB, ("iotest", 328236.970161111)),
    "fioplot-fio3.6-ceph-rbd-hdd-randread-16jobs.json": (
        "fio-3.6-31-g4386", 1, 7.50484, 0.0, ("random-read", 8672.610435452)),
    "pkb-fio-2.1.4-seq-rand.json": (
        "fio-2.1.4", 5, (129836 + 1269 + 1292) * KIB, (68118 + 6443) * KIB,
        ("sequential_write", 477734.84)),
    "pkb-fio-2.17-randread-pd.json": (
        "fio-2.17", 2, 129386 * KIB, 39312 * KIB,
        ("rand_16k_read_100%-io-depth-1-num-jobs-2", 238.357679)),
}  # fmt: skip

ERRORS = {
    "fioplot-fio3.33-error22-text-prefix.json": (
        "fio: pid=0, err=22/file:filesetup.c:1155, func=total_file_size, error=Invalid argument"
    ),
}


@pytest.mark.parametrize("path", corpus_files("fio_json"), ids=lambda p: p.name)
def test_fio_sample(path):
    result = parse_fio_json(path.read_text())
    if path.name in ERRORS:
        assert not result.ok
        assert ERRORS[path.name] in result.error.splitlines()
        assert result.jobs[0].error == 22
        return
    assert path.name in SAMPLES, f"no expectation for new sample {path.name}"
    version, jobs, read_bw, write_bw, (name, clat_us) = SAMPLES[path.name]
    assert result.error is None, result.error
    assert result.fio_version == version
    assert len(result.jobs) == jobs
    assert result.read_bw_mb_s == pytest.approx(read_bw)
    assert result.write_bw_mb_s == pytest.approx(write_bw)
    first = result.jobs[0]
    assert first.name == name
    active = first.read if first.read.io_bytes else first.write
    assert active.clat_mean_us == pytest.approx(clat_us)


def test_io_bytes_units_differ_between_fio2_and_fio3():
    files = {p.name: p for p in corpus_files("fio_json")}
    assert files, "corpus missing: tests/fixtures/samples"
    fio2 = parse_fio_json(files["pkb-fio-2.17-randread-pd.json"].read_text())
    assert fio2.jobs[0].read.io_bytes == 1294256 * 1024  # printed in KiB
    fio3 = parse_fio_json(files["fioplot-fio3.6-ceph-rbd-hdd-randread-16jobs.json"].read_text())
    assert fio3.jobs[0].read.io_bytes == 450478080  # printed in bytes
