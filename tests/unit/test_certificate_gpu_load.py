"""The certificate's "GPUs under load" table: one row per GPU from the load records."""

from __future__ import annotations

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.report.certificate.gpu import gpu_load_section
from pytest_hpcnet.report.certificate.page import _environment
from pytest_hpcnet.report.records import CheckRecord
from pytest_hpcnet.requirements import gpu_load as judges
from tests.recorded import as_record as recorded
from tests.unit.test_gpu_load import cluster, gpu, node_load


def as_record(check_id: str, verdict) -> CheckRecord:
    """What `Check.judge` records of a verdict (its measurements, the node's reason)."""
    fix = f" (fix: {verdict.fix})" * (verdict.outcome != "pass")
    message = f"{verdict.subject}: {verdict.reason}{fix}"
    return recorded(verdict, check_id, verdict.subject, message=message)


def records():
    bad = node_load("n2", [gpu(0), gpu(1, checksum="cd" * 8, bf16=500.0), gpu(2), gpu(3)])
    missing = judges.NodeLoad("n3", missing="no load engine", fix=judges.INSTALL_TORCH)
    peers = cluster(n2=bad, n3=missing)
    expect = Expectations()
    out = []
    for load in peers.values():
        out.append(as_record("gpu_compute", judges.judge_gpu_compute(load, peers, expect)))
        out.append(as_record("gpu_correctness", judges.judge_gpu_correctness(load, peers)))
        out.append(as_record("gpu_bandwidth", judges.judge_gpu_bandwidth(load, peers, expect)))
    return out


def test_one_row_per_gpu_with_its_figures_and_problems():
    section = gpu_load_section(records())
    rows = section["rows"]
    assert [(r["node"], r["gpu"]) for r in rows] == [
        (n, f"GPU {i}") for n in ("n1", "n2") for i in range(4)
    ]
    first = rows[0]
    assert (first["bf16_tflops"], first["hbm_gbs"], first["sm_clock_mhz"]) == (780.0, 4300.0, 1980)
    assert first["throttle"] == "power cap (reported)" and first["checksum"] == "agrees"
    assert not first["problems"]
    one = rows[5]
    assert one["checksum"].startswith("differs (cdcd") and len(one["problems"]) == 2
    assert one["problems"][0].startswith("n2 GPU 1 (00000000:11:00.0, serial 1001): bf16 GEMM")
    assert "fix:" not in one["problems"][-1]
    assert not rows[4]["problems"] and not rows[6]["problems"]
    assert {(n, c) for n, c, _ in section["unmeasured"]} == {
        ("n3", "GPU compute under load (TFLOPS, clocks, throttling)"),
        ("n3", "GPU results agree across the cluster (checksum)"),
        ("n3", "GPU memory and host-link bandwidth under load"),
    }


def test_template_renders_the_table_and_nothing_without_load_records():
    template = _environment().get_template("certificate_gpu.html.j2")
    html = template.render(gpu_load=gpu_load_section(records()))
    assert '<section id="gpus-under-load">' in html and html.count("<tr>") == 9
    assert "not measured: n3: no load engine" in html
    assert gpu_load_section([]) is None
    assert "gpus-under-load" not in template.render(gpu_load=None)


def test_nvlink_and_dcgm_columns():
    from pytest_hpcnet.probes.gpu_dcgm import parse_dcgm_json
    from pytest_hpcnet.requirements.gpu_dcgm import judge_gpu_dcgm
    from tests.unit.test_gpu_dcgm import text

    run = parse_dcgm_json(text("dcgm-4.2.3-gb10-r1-json-software-fail-persistence-sram.json"))
    dcgm = as_record("gpu_dcgm", judge_gpu_dcgm("n1", run, None, 1))
    rows = gpu_load_section([*records(), dcgm])["rows"]
    first = rows[0]
    assert first["dcgm"] == "fail: software"
    (problem,) = first["problems"]
    assert problem.startswith("n1 GPU 0: DCGM software failed: Persistence Mode: Persistence mode")


def test_gpu_to_gpu_and_fabric_columns():
    from pytest_hpcnet.probes.gpu_fabric import parse_fabric
    from pytest_hpcnet.requirements.gpu_fabric import judge_gpu_fabric
    from pytest_hpcnet.requirements.gpu_p2p import judge_gpu_p2p
    from tests.unit.test_gpu_fabric import STUCK
    from tests.unit.test_gpu_p2p import H100, node, slow_pair

    slow = node("n1", slow_pair(H100, 2, 5, "190.20"))
    peers = {"n1": slow, "n0": node("n0")}
    p2p = as_record("gpu_p2p", judge_gpu_p2p(slow, peers, Expectations()))
    fabric = as_record(
        "gpu_fabric", judge_gpu_fabric("n1", parse_fabric(STUCK + "fabricmanager active\n"), None)
    )
    rows = {(r["node"], r["gpu"]): r for r in gpu_load_section([*records(), p2p, fabric])["rows"]}
    assert all(" -> " not in gpu for _, gpu in rows)  # a pair is its source GPU's cell
    assert rows[("n1", "GPU 2")]["p2p"] == "190.2 (NVLink)"
    assert rows[("n1", "GPU 0")]["p2p"] == "395.08 (NVLink)"
    (problem,) = rows[("n1", "GPU 2")]["problems"]
    assert problem.startswith("n1 GPU 2 (00000000:3A:00.0) -> GPU 5 (00000000:AB:00.0) over NVLink")
    html = (
        _environment()
        .get_template("certificate_gpu.html.j2")
        .render(gpu_load=gpu_load_section([*records(), p2p, fabric]))
    )
    assert "<th>GPU-to-GPU GB/s (slowest)</th>" in html and "<th>Fabric</th>" in html
