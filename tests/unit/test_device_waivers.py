"""A waiver naming a device (`check[node07 erdma_1]`) covers a failure of that device only:
the record's subject is the node, or a pair with it, and every measurement its judge failed
names that device. No waiver covers a record with a measurement not measured."""

from __future__ import annotations

import contextlib
from datetime import date

from pytest_hpcnet.inventory.models import Waiver
from pytest_hpcnet.report.recording import Check, CheckFailed, find_waiver
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    NotMeasured,
    combine,
    failing,
    not_measured,
)

WAIVER = Waiver(check="erdma_eri_bw[node07 erdma_1]", reason="rma", by="QA", expires=date.max)


def bw(device: str, value: float) -> dict:
    return {
        "name": "bw_avg",
        "value": value,
        "unit": "Gbit/s",
        "threshold": 64.0,
        "comparison": ">=",
        "subject": device,
        "outcome": "pass" if value >= 64.0 else "fail",
    }


def test_a_device_waiver_covers_a_pair_whose_only_miss_is_that_device():
    measured = [bw("erdma_0", 78.0), bw("erdma_1", 12.0)]
    assert find_waiver([WAIVER], "erdma_eri_bw", "node07->node08", measured) is WAIVER
    assert find_waiver([WAIVER], "erdma_eri_bw", "node03->node07", measured) is WAIVER


def test_a_device_waiver_does_not_cover_another_device_or_node():
    assert find_waiver([WAIVER], "erdma_eri_bw", "node07->node08", [bw("erdma_0", 12.0)]) is None
    both = [bw("erdma_0", 12.0), bw("erdma_1", 12.0)]
    assert find_waiver([WAIVER], "erdma_eri_bw", "node07->node08", both) is None
    assert find_waiver([WAIVER], "erdma_eri_bw", "node05->node08", [bw("erdma_1", 1.0)]) is None
    assert find_waiver([WAIVER], "mtu", "node07", [bw("erdma_1", 1.0)]) is None


def test_a_device_waiver_does_not_cover_a_failure_with_no_measurement_of_it():
    """A failure no measurement explains (a device missing) is not the waived device's."""
    assert find_waiver([WAIVER], "erdma_eri_bw", "node07->node08", [bw("erdma_1", 70.0)]) is None
    assert find_waiver([WAIVER], "erdma_eri_bw", "node07->node08", []) is None


def test_node_and_requirement_waivers_still_match():
    node = Waiver(check="mtu[node07]", reason="r", by="QA", expires=date.max)
    whole = Waiver(check="mtu", reason="r", by="QA", expires=date.max)
    assert find_waiver([node], "mtu", "node07") is node
    assert find_waiver([whole], "mtu", "node01") is whole
    gpu = Waiver(check="gpu_health[node03 GPU 7]", reason="r", by="QA", expires=date.max)
    ecc = {
        "name": "ecc_uncorrected",
        "value": 3,
        "unit": "errors",
        "threshold": 0,
        "comparison": "==",
        "subject": "GPU 7",
        "outcome": "fail",
    }
    assert find_waiver([gpu], "gpu_health", "node03", [ecc]) is gpu


def recorded(verdict) -> list[dict]:
    """The measurements a check records of a verdict, as the evidence holds them."""
    check = Check("gpu_compute", "GPUs under load", "n1", "node", "t::x[n1]", None)
    with contextlib.suppress(CheckFailed, NotMeasured):
        check.judge(verdict)
    return check.measured


def test_a_gpu_waiver_does_not_cover_another_gpus_error_or_missing_samples():
    """`gpu_compute[n1 GPU 3]` covers GPU 3's miss only, not GPU 6's load error (a failure
    with no figure) nor GPU 5's missing samples (not measured)."""
    waiver = Waiver(check="gpu_compute[n1 GPU 3]", reason="rma", by="QA", expires=date.max)
    slow = failing(
        "GPU 3 slow",
        measurements=(Measurement("bf16_tflops", 300.0, "TFLOPS", 600.0, ">=", "", "GPU 3"),),
    )
    error = failing("GPU 6: load error", subject="GPU 6")
    missing = not_measured("GPU 5: no samples", subject="GPU 5")
    assert find_waiver([waiver], "gpu_compute", "n1", recorded(slow)) is waiver
    assert find_waiver([waiver], "gpu_compute", "n1", recorded(combine([slow, error]))) is None
    assert find_waiver([waiver], "gpu_compute", "n1", recorded(combine([slow, missing]))) is None


def test_no_waiver_covers_a_failure_beside_a_part_not_measured():
    """combine(fail, not_measured) is a failure that also was not measured whole: neither a
    device waiver nor the node's nor the requirement's covers it."""
    both = combine(
        [
            failing(
                "erdma_0 slow",
                measurements=(Measurement("bw_avg", 12.0, "Gbit/s", 64.0, ">=", "", "erdma_0"),),
            ),
            not_measured("erdma_1: run errored", subject="erdma_1"),
        ]
    )
    measured = recorded(both)
    for check in ("erdma_eri_bw[node07 erdma_0]", "erdma_eri_bw[node07]", "erdma_eri_bw"):
        waiver = Waiver(check=check, reason="rma", by="QA", expires=date.max)
        assert find_waiver([waiver], "erdma_eri_bw", "node07", measured) is None
