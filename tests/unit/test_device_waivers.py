"""A waiver naming a device (`check[node07 erdma_1]`) covers a failure of that device only:
the record's subject is the node, or a pair with it, and every measurement that misses its
bound names that device."""

from __future__ import annotations

from datetime import date

from pytest_hpcnet.inventory.models import Waiver
from pytest_hpcnet.report.recording import find_waiver

WAIVER = Waiver(check="erdma_eri_bw[node07 erdma_1]", reason="rma", by="QA", expires=date.max)


def bw(device: str, value: float) -> dict:
    return {
        "name": "bw_avg",
        "value": value,
        "unit": "Gbit/s",
        "threshold": 64.0,
        "comparison": ">=",
        "subject": device,
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
    }
    assert find_waiver([gpu], "gpu_health", "node03", [ecc]) is gpu
