"""Emulated ib_write_bw / ib_write_lat on lab nodes, run the way the plugin runs them.

They measure the real lab link: the `slow` fault (tc tbf) lowers the bandwidth for real,
`rdma-slow` and `latency` are applied by the emulated tools. Every test heals what it
injects and leaves no perftest process in any node namespace.
"""

from __future__ import annotations

import pytest

from pytest_hpcnet.lab import faults
from pytest_hpcnet.probes.perftest_parsers import parse_bandwidth, parse_latency
from pytest_hpcnet.transport.fanout import Transport
from tests.lab.test_lab_bench_support import heal_all, leftovers, perftest_pair

pytestmark = pytest.mark.lab


@pytest.fixture
def lab(lab4):
    """The session lab, healed and checked for leftover benchmark processes afterwards."""
    transport = Transport(_inventory(lab4))
    try:
        yield lab4, transport
    finally:
        transport.close()
        heal_all(lab4)
    assert leftovers(lab4) == []


def _inventory(state):
    from pytest_hpcnet.inventory.loader import load_inventory

    return load_inventory(state.inventory)


def _inject(state, kind: str, node: str, arg: str | None = None) -> None:
    faults.inject(kind, node, arg, state.state_dir)


def test_bandwidth_and_latency_parse_with_sane_values(lab):
    state, transport = lab
    bw = perftest_pair(transport, state, "ib_write_bw", qps=2)
    assert bw.error is None, bw.error
    assert bw.bandwidth.unit_printed == "Gb/sec" and bw.bandwidth.header.qps == 2
    assert bw.bandwidth.header.device == "erdma_0" and bw.bandwidth.msg_size == 65536
    assert 1.0 < bw.value < 400.0  # veth inside one host
    assert bw.bandwidth.peak_gbps is None  # duration mode prints 0.00 like perftest
    server = parse_bandwidth(bw.server_output)
    assert server.ok and server.avg_gbps == pytest.approx(bw.value)
    lat = perftest_pair(transport, state, "ib_write_lat")
    assert lat.error is None, lat.error
    result = lat.latency
    assert result.rows[0].iterations == 500 and result.msg_size == 2
    assert 0 < result.t_min_us <= result.t_avg_us <= result.t_max_us < 1e6
    assert result.t_min_us <= result.p99_us <= result.p999_us <= result.t_max_us
    assert parse_latency(lat.server_output).ok


def test_help_says_emulation_and_mb_units_and_sweep(lab):
    state, transport = lab
    first = transport.run("node01", "ib_write_bw --help | head -1; ib_write_lat -h | head -1")
    assert first.stdout.count("hpcnet lab emulation of perftest") == 2
    run = perftest_pair(transport, state, "ib_write_bw", duration_s=None, size=4096)
    assert run.error is None and run.bandwidth.unit_printed == "Gb/sec"
    assert run.bandwidth.rows[0].iterations == 5000 and run.bandwidth.peak_gbps > 0
    mb = transport.run(
        "node02",
        "(timeout 20 ib_write_bw -p 18700 -s 8192 -n 200 >/dev/null 2>&1 &); sleep 0.5; "
        "timeout 20 ib_write_bw -p 18700 -s 8192 -n 200 198.18.0.12",
    )
    parsed = parse_bandwidth(mb.stdout)
    assert parsed.ok and parsed.unit_printed == "MB/sec", mb.stdout
    sweep = perftest_pair(transport, state, "ib_write_lat", all_sizes=True)
    sizes = [row.msg_size for row in sweep.latency.rows]
    assert sweep.error is None and sizes[0] == 2 and sizes[-1] == 2**23 and len(sizes) == 23


def test_slow_fault_lowers_bandwidth_for_real(lab):
    state, transport = lab
    healthy = perftest_pair(transport, state, "ib_write_bw", "node03", "node04").value
    _inject(state, "slow", "node04", "200mbit")
    slowed = perftest_pair(transport, state, "ib_write_bw", "node03", "node04").value
    assert slowed < 0.25 and slowed < healthy / 4, (healthy, slowed)
    faults.heal("node04", state.state_dir)
    _inject(state, "rdma-slow", "node03", "300mbit")
    paced = perftest_pair(transport, state, "ib_write_bw", "node03", "node04").value
    assert paced < 0.35, paced


def test_latency_fault_adds_emulated_delay(lab):
    state, transport = lab
    _inject(state, "latency", "node02", "2")
    run = perftest_pair(transport, state, "ib_write_lat", latency_iterations=50)
    # node02 delays each pong by 2 ms: RTT + 2 ms, one-way (RTT/2) + 1 ms
    assert run.error is None and run.latency.t_avg_us > 1000, run.latency


def test_error_outputs_parse_as_errors(lab):
    state, transport = lab
    _inject(state, "port-down", "node02")
    down = perftest_pair(transport, state, "ib_write_bw")
    assert down.error and "Couldn't connect to 198.18.0.12:" in down.error, down.error
    assert "Port number 1 state is Down" in down.server_output
    assert "Couldn't set the link layer" in parse_bandwidth(down.server_output).error
    nodev = transport.run("node01", "ib_write_lat -d erdma_9 198.18.0.12")
    assert nodev.exit_status == 1
    assert "IB device erdma_9 not found" in parse_latency(nodev.stdout + nodev.stderr).error
    faults.heal("node02", state.state_dir)
    _inject(state, "no-rdma", "node01")
    none = transport.run("node01", "ib_write_bw -d erdma_0 198.18.0.12")
    assert "Did not detect devices" in parse_bandwidth(none.stdout + none.stderr).error
