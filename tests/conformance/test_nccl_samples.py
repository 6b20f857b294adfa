"""nccl-tests parser against the published corpus (all_reduce_perf, alltoall_perf)."""

from __future__ import annotations

import pytest

from pytest_hpcnet.probes.nccl import NcclExpected, parse_nccl
from tests.corpus import corpus_files

# file -> (rows, avg busbw GB/s, busbw at largest size, largest size, total #wrong,
#          oob failed, ranks, hosts)
TABLES = {
    "alltoall-rtx5090-single-gpu-issue287.txt": (
        1, 0.0, 0.0, 33554432, 0, False, 1, ("GENOA-01",)),
    "cscs-alps-gh200-2node-nccl-tests-2.18.2.txt": (
        8, 14.9966, 22.86, 134217728, 0, False, 2, ("nid007106", "nid007109")),
    "error-wrong-results-oob-failed-gh200-issue369.txt": (
        25, 4.79995, 22.87, 134217728, 128, True, 2, ("gpu-1-1", "gpu-1-7")),
    "gcp-a3mega-h100-2node-16gpu.txt": (
        31, 70.742, 338.82, 8589934592, 0, False, 16, ("ztan-mig-235z", "ztan-mig-gq73")),
    "mpirun-tag-output-prefixed-rtx5090-socket.txt": (
        8, 1.57614, 2.30, 134217728, 0, False, 2, ("lab",)),
    "pkb-k80-2node.txt": (
        11, 0.565546, 0.61, 1073741824, None, False, 2, ("pkb-2b6a393d-2", "pkb-2b6a393d-3")),
    "rccl-tests-r9700-2node-collective-starting.txt": (
        25, 3.51213, 10.77, 134217728, 0, False, 2, ("corona", "bootes")),
    "superbench-a100x8-single-node.txt": (
        34, 68.4048, 235.26, 8589934592, None, False, 8, ("localhost",)),
    "superbench-alltoall-a100x8.txt": (
        34, 58.6481, 224.31, 8589934592, None, False, 8, ("localhost",)),
    "h200-nccl-tests-2.19.6-g1-debug-info-socket-fallback-c0.txt": (
        1, 0.0, 0.0, 67108864, None, False, 1, ("vm",)),
}  # fmt: skip

# file -> (a line of the error, ranks listed before the failure)
ERRORS = {
    "error-cuda-device-busy-8gpu-2node-issue369.txt": (
        "gpu-1-1: Test CUDA failure common.cu:1304 "
        "'CUDA-capable device(s) is/are busy or unavailable'",
        8,
    ),
    "h200-nccl-tests-2.19.6-mpirun-np2-one-gpu-failure.txt": (
        ".. vm pid 1559: Test failure common.cu:1454",
        0,
    ),
}
# nccl-tests' `-J` JSON file is not what the launcher reads: an error, never a pass
UNREAD = {"h200-nccl-tests-2.19.6-g1-json.json"}


@pytest.mark.parametrize("path", corpus_files("nccl_allreduce"), ids=lambda p: p.name)
def test_nccl_sample(path):
    result = parse_nccl(path.read_text())
    if path.name in ERRORS:
        line, ranks = ERRORS[path.name]
        assert result.error is not None and not result.ok
        assert line in result.error.splitlines() and result.reason.startswith(line)
        assert result.rows == () and len(result.ranks) == ranks
        return
    if path.name in UNREAD:
        assert not result.ok and result.reason.startswith("unparseable output")
        return
    assert path.name in TABLES, f"no expectation for new sample {path.name}"
    rows, avg, busbw, size, wrong, oob_failed, ranks, hosts = TABLES[path.name]
    assert result.error is None, result.error
    assert len(result.rows) == rows
    assert result.avg_busbw_gbs == pytest.approx(avg)
    assert result.busbw_at_max_size_gbs == pytest.approx(busbw)
    assert result.max_size_bytes == size
    assert result.total_wrong == wrong
    assert result.oob_failed is oob_failed
    assert len(result.ranks) == ranks
    assert result.hosts == hosts
    assert result.ok is (not oob_failed)


def test_versions_are_read():
    files = {p.name: p for p in corpus_files("nccl_allreduce")}
    assert files, "corpus missing: tests/fixtures/samples"
    cscs = parse_nccl(files["cscs-alps-gh200-2node-nccl-tests-2.18.2.txt"].read_text())
    assert (cscs.tests_version, cscs.nccl_version) == ("2.18.2", 23007)
    rccl = parse_nccl(files["rccl-tests-r9700-2node-collective-starting.txt"].read_text())
    assert rccl.tests_version == "develop:33cc4df"
    oob = parse_nccl(files["error-wrong-results-oob-failed-gh200-issue369.txt"].read_text())
    assert len(oob.failures) == 2 and oob.oob_values == 4
    wrong_row = next(r for r in oob.rows if r.size_bytes == 1048576)
    assert (wrong_row.oop_wrong, wrong_row.ip_wrong) == (96, 32)


def test_validation_off_sample_fails_when_validation_was_asked():
    files = {p.name: p for p in corpus_files("nccl_allreduce")}
    assert files, "corpus missing: tests/fixtures/samples"
    text = files["h200-nccl-tests-2.19.6-g1-debug-info-socket-fallback-c0.txt"].read_text()
    asked = NcclExpected(max_bytes=64 * 2**20, ranks=1, nodes=1)
    assert parse_nccl(text, asked).ok
    r = parse_nccl(text, NcclExpected(max_bytes=64 * 2**20, ranks=1, nodes=1, validation=True))
    assert not r.ok and "validation: 0" in r.reason
