"""benchmarks/handover_time.py reads a run's phases from its own progress lines and the time
each line arrived; a real cluster's tool time from the settings and the profile."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "handover_time.py"
spec = importlib.util.spec_from_file_location("handover_time", SCRIPT)
assert spec is not None and spec.loader is not None
handover_time = importlib.util.module_from_spec(spec)
spec.loader.exec_module(handover_time)

LOG = [
    (0.2, "==== test session starts ===="),
    (4.0, "collected 80 items"),
    (4.5, "hpcnet: facts from 2 nodes ..."),
    (7.5, "hpcnet: facts from 2 nodes: 2 answered, 0 unreachable (3.0 s)"),
    (8.0, "hpcnet: ib_write_bw round 1/2: 1 pairs ..."),
    (12.0, "hpcnet: ib_write_bw round 1/2: 1 pairs: 1/1 pairs within bounds (4.0 s)"),
    (17.0, "hpcnet: ib_write_lat round 1/2: 1 pairs: 1/1 pairs within bounds (2.0 s)"),
    (20.0, "hpcnet: dcgmi diag -r 2 on 2 nodes: 2 answered, 0 lost (0.5 s)"),
    (25.0, "hpcnet: NCCL collectives (all_gather) on 2 nodes: finished (1.5 s)"),
    (26.0, "hpcnet: something new on 2 nodes: done (1.0 s)"),
    (30.0, "suites/test_tuning.py ..s        [100%]"),
    (31.5, "------------ hpcnet ------------"),
    (32.0, "==== 80 passed in 31.8s ===="),
    (33.0, "(exit 0)"),
]


def test_phases_sum_their_progress_lines_and_the_gaps_come_from_arrival_times():
    found = handover_time.phase_seconds(LOG)
    assert found["facts"] == 3.0
    assert found["perftest (ib_write_bw, ib_write_lat)"] == 6.0
    assert found["DCGM diagnostics"] == 0.5
    assert found["NCCL collectives"] == 1.5
    assert found[handover_time.OTHER] == 1.0  # a phase no row names is not lost
    assert found[handover_time.STARTUP] == 4.0
    assert found[handover_time.TESTS] == pytest.approx(30.0 - 4.0 - 12.0)
    assert found[handover_time.SESSION_END] == 1.5
    assert found[handover_time.CERTIFICATE] == 1.0
    assert found[handover_time.TOTAL] == 33.0


def test_the_fit_is_a_line_through_the_sizes():
    assert handover_time.fit([2, 4, 8], [12.0, 16.0, 24.0]) == pytest.approx((8.0, 2.0))


def test_a_real_clusters_tool_time_comes_from_the_settings_and_the_profile():
    rows = {name: s for name, s, _ in handover_time.real_seconds("ebmgn8v", 16)}
    assert rows["GPU load"] == 60  # benchmarks.gpu_load.seconds
    assert rows["DCGM diagnostics"] == 900  # level 3, about 15 minutes
    assert rows["CPFS (fio)"] == 60  # write then read, 30 s each
    # 2 rounds x 2 ERIs x 5 s, one all-ERIs round of 5 s, 4 latency runs of about 2 s
    assert rows["perftest (ib_write_bw, ib_write_lat)"] == 33
    # 25 passes over 8 B..8 GiB (about 2 x 8 GiB) at 20 GB/s, 2(r-1)/r of it on the wire
    assert 40 < rows["NCCL all-reduce"] < 46
    assert rows["NCCL collectives"] == pytest.approx(2 * rows["NCCL all-reduce"])
