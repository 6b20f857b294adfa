"""Per-GPU load figures in baselines and trends: one record per node carries one
measurement per GPU (`subject: GPU 3`), so each GPU is its own series and its own baseline
value, not the node's last GPU."""

from __future__ import annotations

from pytest_hpcnet.report.baseline import baseline_from_records, compare_to_baseline
from pytest_hpcnet.report.records import CheckRecord, Measurement
from pytest_hpcnet.report.trends import FIGURES, digest_run


def compute(values: list[float]) -> CheckRecord:
    """node01's gpu_compute record: bf16 TFLOPS per GPU."""
    return CheckRecord(
        check_id="gpu_compute",
        requirement="GPU compute under load",
        subject="node01",
        verdict="pass",
        measured=[
            Measurement(
                name="bf16_tflops", value=v, unit="TFLOPS", comparison=">=", subject=f"GPU {i}"
            )
            for i, v in enumerate(values)
        ],
    )


def test_each_gpu_is_compared_with_its_own_baseline():
    baseline = baseline_from_records([compute([400.0, 780.0])])  # GPU 0 was slow then
    assert baseline.get("gpu_compute", "bf16_tflops", "node01 GPU 0") == 400.0
    assert baseline.get("gpu_compute", "bf16_tflops", "node01 GPU 1") == 780.0
    now = compute([400.0, 400.0])  # GPU 1 lost half
    regressions = compare_to_baseline([now], baseline)
    assert [(r.subject, r.baseline) for r in regressions] == [("node01 GPU 1", 780.0)]
    assert [m.baseline for m in now.measured] == [400.0, 780.0]


def test_the_trends_carry_each_gpu_load_figure():
    figures = {(f.check_id, f.name) for f in FIGURES}
    assert {
        ("gpu_compute", "bf16_tflops"),
        ("gpu_compute", "tf32_tflops"),
        ("gpu_bandwidth", "hbm_gbs"),
        ("gpu_bandwidth", "h2d_gbs"),
        ("gpu_bandwidth", "d2h_gbs"),
        ("gpu_nccl_node", "busbw_largest"),
    } <= figures
    digest = digest_run([compute([780.0, 781.0])], None, None)
    assert [(p[2], p[3]) for p in digest.points] == [
        ("node01 GPU 0", 780.0),
        ("node01 GPU 1", 781.0),
    ]
