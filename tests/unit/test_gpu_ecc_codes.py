"""The codes a memory-health failure carries on a Hopper GPU, whose `retired_pages.pending`
is `[N/A]` (it remaps rows instead): only the faults it has, so a reset-class failure is
not made a reboot by a figure the GPU does not have."""

from __future__ import annotations

from pathlib import Path

from pytest_hpcnet.probes.gpu import parse_query_gpu
from pytest_hpcnet.requirements.gpu import judge_ecc
from pytest_hpcnet.requirements.verdict import FAIL

FIXTURES = Path(__file__).parents[1] / "fixtures"


def test_hopper_ecc_failure_carries_only_its_own_codes():
    query = parse_query_gpu((FIXTURES / "gpu" / "query-8gpu-ecc-gpu2.csv").read_text())
    verdict = judge_ecc("node01", query)
    failed = {(m.subject, m.name, m.code) for m in verdict.measurements if m.outcome == FAIL}
    assert {(s, c) for s, _, c in failed} == {
        ("GPU 2", "HPCNET-GPU-ECC-DBE"),
        ("GPU 2", "HPCNET-GPU-ROW-REMAP-PENDING"),
    }
    retired = [m for m in verdict.measurements if m.name == "retired_pages_pending"]
    assert len(retired) == 8 and all(m.value is None and m.outcome is None for m in retired)
