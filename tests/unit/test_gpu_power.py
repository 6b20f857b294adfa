"""GPU power limits: the recorded H200's limits read from the real field layout, a capped GPU
fails naming it, a limit above the GPU's maximum or unreadable is not measured, and the
floor is the profile's figure or else the GPU's own default."""

from __future__ import annotations

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import parse_query_gpu
from pytest_hpcnet.requirements.gpu_power import judge_power_limit
from tests.corpus import sample

FIELDS = "index, pci.bus_id, enforced.power.limit [W], power.default_limit [W], power.max_limit [W]"


def recorded(field: str) -> str:
    """The recorded H200's value of `field` (samples/nvidia_smi/query-gpu-all-fields.tsv)."""
    for line in sample("nvidia_smi", "query-gpu-all-fields.tsv").read_text().splitlines():
        name, _, rest = line.partition("\t")
        if name == field:
            return rest.split("|")[1]
    raise KeyError(field)


def query(*rows: str):
    return parse_query_gpu(FIELDS + "\n" + "\n".join(rows) + "\n")


def row(index: int, enforced: str, default: str = "700.00 W", maximum: str = "700.00 W") -> str:
    return f"{index}, 00000000:{0x18 + index:02X}:00.0, {enforced}, {default}, {maximum}"


def test_the_recorded_limits_parse_and_pass():
    values = [
        recorded(f) for f in ("enforced.power.limit", "power.default_limit", "power.max_limit")
    ]
    found = query(f"0, 00000000:18:00.0, {', '.join(values)}")
    gpu = found.gpus[0]
    assert (gpu.power_limit_w, gpu.power_default_limit_w, gpu.power_max_limit_w) == (700, 700, 700)
    verdict = judge_power_limit("node01", found, Expectations())
    assert verdict.outcome == "pass"
    (m,) = verdict.measurements
    assert (m.value, m.bound, m.ceiling, m.source) == (
        700,
        700,
        700,
        "nvidia-smi power.default_limit",
    )


def test_a_capped_gpu_fails_naming_it_and_only_it():
    verdict = judge_power_limit(
        "node02", query(row(0, "700.00 W"), row(3, "500.00 W")), Expectations()
    )
    assert verdict.outcome == "fail"
    assert "GPU 3 (00000000:1B:00.0) power limit 500 W, below 700 W" in verdict.reason
    assert "GPU 0" not in verdict.reason
    assert verdict.code == "HPCNET-GPU-POWER-CAP"
    assert [m.outcome for m in verdict.measurements] == ["pass", "fail"]


def test_the_profile_figure_is_the_floor_where_set():
    expect = Expectations.model_validate({"gpu": {"power_limit_w": 700}})
    lowered_default = query(row(0, "600.00 W", default="600.00 W"))
    assert judge_power_limit("n", lowered_default, Expectations()).outcome == "pass"
    verdict = judge_power_limit("n", lowered_default, expect)
    assert verdict.outcome == "fail"
    assert verdict.measurements[0].source == "expect.gpu.power_limit_w"


def test_above_the_maximum_or_unreadable_is_not_measured():
    above = judge_power_limit("n", query(row(0, "900.00 W")), Expectations())
    assert above.outcome == "not_measured" and "above its maximum" in above.reason
    unread = judge_power_limit("n", query(row(0, "[N/A]")), Expectations())
    assert unread.outcome == "not_measured" and "unreadable ([N/A])" in unread.reason
    no_default = judge_power_limit("n", query(row(0, "700.00 W", default="[N/A]")), Expectations())
    assert no_default.outcome == "not_measured"
