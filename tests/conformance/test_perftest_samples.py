"""perftest parsers against the published corpus (ib_write_bw, ib_write_lat)."""

from __future__ import annotations

import pytest

from pytest_hpcnet.probes.perftest_parsers import MB_PER_SEC_TO_GBPS, parse_bandwidth, parse_latency
from tests.corpus import corpus_files

MB = MB_PER_SEC_TO_GBPS

# file -> (rows, msg_size, avg Gb/s, peak Gb/s or None, device, link type, qps)
BANDWIDTH = {
    "a100-cx6-hdr-ib-mbsec-all-sizes-cpufreq-per-row.txt": (
        23, 8388608, 23317.65 * MB, 23326.82 * MB, "mlx5_0", "IB", 1),
    "a100-cx6-hdr-ib-server-all-sizes-last-row-only.txt": (
        1, 8388608, 23317.65 * MB, 23326.82 * MB, "mlx5_0", "IB", 1),
    "bnxt-re-broadcom-duration-gbits-q3.txt": (1, 65536, 363.47, None, "bnxt_re0", "Ethernet", 3),
    "dc-cx-roce-client-gbits-all-sizes.txt": (23, 8388608, 97.56, 97.56, "mlx5_1", "Ethernet", 2),
    "dc-cx-roce-server-gbits-a.txt": (1, 8388608, 97.56, 97.56, "mlx5_1", "Ethernet", 2),
    "dgx-spark-roce-rdmacm-gbits-q4.txt": (1, 65536, 111.71, 111.72, "rocep1s0f1", "IB", 4),
    "gb200-cuda-dmabuf-gbits-bwmin-column.txt": (1, 65536, 368.48, 368.67, "mlx5_0", "Ethernet", 1),
    "k8s-sriov-cx5-roce-mbsec-cpufreq-warning.txt": (
        1, 65536, 11024.71 * MB, 11025.44 * MB, "mlx5_0", "Ethernet", 1),
}  # fmt: skip

BANDWIDTH_NOT_MEASURED = {
    # a loopback whose server and client tables land in one output: two runs, not the one
    # asked (the plugin reads each side's output on its own)
    "superbench-ib-loopback-8M-interleaved.txt": "2 runs in one output",
    "superbench-ib-loopback-all-sizes-interleaved.txt": "2 runs in one output",
}

BANDWIDTH_ERRORS = {
    "error-couldnt-connect-perftest-pr228.txt": "Couldn't connect to 192.168.125.211:18515",
    "error-no-device-k8s-rdma-shared-dev-plugin-169.txt": (
        "Unable to find the Infiniband/RoCE device"
    ),
    "error-rdmacm-client-modify-qp-rts-perftest-132.txt": "Failed to modify QP to RTS",
    "error-rdmacm-server-read-keys-perftest-132.txt": (
        "Failed to exchange data between server and clients"
    ),
}

# file -> (rows, t_avg, t_typical, p99, p99.9 at the smallest size, t_avg at the largest)
LATENCY = {
    "a100-cx6-hdr-ib-client-all-sizes-cpufreq.txt": (23, 1.88, 1.87, 2.03, 5.41, 348.34),
    "a100-cx6-hdr-ib-server-all-sizes-cpufreq.txt": (23, 1.88, 1.87, 2.04, 5.36, 348.39),
    "cx3-mlx4-ib-all-sizes-no-leading-rule.txt": (23, 0.90, 0.89, 0.95, 4.70, 2572.44),
    "dgx-spark-roce-rdmacm.txt": (1, 1.47, 1.47, 1.57, 1.93, 1.47),
    "k8s-sriov-cx5-roce-cpufreq-warning.txt": (1, 1.58, 1.58, 1.65, 2.13, 1.58),
    "output-latency-only-physical-qingcloud.txt": (0, 2.404708, None, None, None, None),
    "output-latency-only-vm-qingcloud.txt": (0, 1.846569, None, None, None, None),
}

# published without perftest's closing rule: as far as the text shows, cut short
UNCLOSED = {"cx3-mlx4-ib-all-sizes-no-leading-rule.txt"}


@pytest.mark.parametrize("path", corpus_files("ib_write_bw"), ids=lambda p: p.name)
def test_ib_write_bw_sample(path):
    result = parse_bandwidth(path.read_text())
    if path.name in BANDWIDTH_ERRORS:
        assert result.error is not None and not result.ok
        assert BANDWIDTH_ERRORS[path.name] in result.error.splitlines()
        assert result.avg_gbps is None
        return
    if path.name in BANDWIDTH_NOT_MEASURED:
        assert result.not_measured and BANDWIDTH_NOT_MEASURED[path.name] in result.not_measured
        assert result.avg_gbps is None and not result.ok
        return
    assert path.name in BANDWIDTH, f"no expectation for new sample {path.name}"
    rows, size, avg, peak, device, link, qps = BANDWIDTH[path.name]
    assert result.error is None, result.error
    assert len(result.rows) == rows
    assert result.msg_size == size
    assert result.avg_gbps == pytest.approx(avg, rel=1e-6)
    if peak is None:
        assert result.peak_gbps is None
    else:
        assert result.peak_gbps == pytest.approx(peak, rel=1e-6)
    assert (result.header.device, result.header.link_type, result.header.qps) == (
        device,
        link,
        qps,
    )


def test_bw_min_column_and_gid_index_are_read():
    files = {p.name: p for p in corpus_files("ib_write_bw")}
    r = parse_bandwidth(files["gb200-cuda-dmabuf-gbits-bwmin-column.txt"].read_text())
    assert r.rows[0].min_gbps == 0.0
    assert r.header.gid_index == 3 and r.header.mtu == 4096


@pytest.mark.parametrize("path", corpus_files("ib_write_lat"), ids=lambda p: p.name)
def test_ib_write_lat_sample(path):
    assert path.name in LATENCY, f"no expectation for new sample {path.name}"
    rows, t_avg, t_typ, p99, p999, t_avg_largest = LATENCY[path.name]
    result = parse_latency(path.read_text())
    assert len(result.rows) == rows
    if path.name in UNCLOSED:
        assert not result.ok and result.error.startswith("no closing rule after the 8388608")
        assert (result.rows[0].t_avg_us, result.rows[-1].t_avg_us) == (t_avg, t_avg_largest)
        return
    assert result.error is None, result.error
    assert result.t_avg_us == pytest.approx(t_avg)
    assert result.t_typical_us == (pytest.approx(t_typ) if t_typ is not None else None)
    assert result.p99_us == (pytest.approx(p99) if p99 is not None else None)
    assert result.p999_us == (pytest.approx(p999) if p999 is not None else None)
    if rows:
        largest = max(result.rows, key=lambda r: r.msg_size)
        assert largest.t_avg_us == pytest.approx(t_avg_largest)
        assert result.msg_size == 2
