"""A bound that a zero, empty or missing measurement would satisfy is a usage error at load."""

from __future__ import annotations

import pytest

from pytest_hpcnet.inventory.loader import InventoryError, load_inventory

GOOD = """\
cluster: {name: c, region: cn-test}
nodes:
  - {name: n1, host: 198.18.0.11}
"""

ADMITS_ANYTHING = {
    "tolerance-of-minus-100-percent": (
        "expect: {ib_write_bw: {reference: {value: 80, lower: -1}}}\n",
        "expect.ib_write_bw.reference.lower",
    ),
    "cpfs-aggregate-tolerance": (
        "expect: {cpfs: {aggregate_lower: -1}}\n",
        "expect.cpfs.aggregate_lower",
    ),
    "memlock-floor-zero": ("expect: {gpu: {memlock_min_kib: 0}}\n", "expect.gpu.memlock_min_kib"),
    "zero-bandwidth-floor": ("expect: {ib_write_bw: {min_gbps: 0}}\n", "expect.ib_write_bw"),
    "zero-busbw-floor": ("expect: {nccl: {min_avg_busbw_gbs: 0}}\n", "expect.nccl"),
}


@pytest.mark.parametrize("case", sorted(ADMITS_ANYTHING))
def test_a_bound_that_admits_anything_is_refused_naming_its_key(tmp_path, case):
    text, key = ADMITS_ANYTHING[case]
    path = tmp_path / "inv.yaml"
    path.write_text(GOOD + text)
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    assert key in str(info.value) and "\n" not in str(info.value)


def test_a_real_tolerance_still_gives_its_bound(tmp_path):
    path = tmp_path / "inv.yaml"
    path.write_text(GOOD + "expect: {ib_write_bw: {reference: {value: 80, lower: -0.2}}}\n")
    assert load_inventory(path).expect.ib_write_bw.bound_gbps == pytest.approx(64.0)
