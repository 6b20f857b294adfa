"""The certificate's GPU section: built from the records alone, escaped, absent without GPUs."""

from __future__ import annotations

from pytest_hpcnet.report.certificate.gpu import gpu_section
from pytest_hpcnet.report.certificate.page import _environment
from pytest_hpcnet.report.records import CheckRecord, Measurement

MAP = "GPU0=erdma_0,GPU1=erdma_0,GPU10=erdma_1,GPU2=erdma_1"


def record(check_id: str, subject: str, verdict: str = "pass", message: str = "", **kw):
    measured = [Measurement(name=k, value=v) for k, v in kw.pop("measured", {}).items()]
    return CheckRecord(
        check_id=check_id,
        requirement=check_id,
        subject=subject,
        verdict=verdict,
        message=message,
        measured=measured,
        **kw,
    )


def records():
    versions = {"nvidia_driver": "580.159.04", "cuda": "13.0"}
    return [
        record(
            "gpu_inventory",
            "node02",
            measured={"gpus": 8, "model": "NVIDIA H200"},
            tool_versions=versions,
        ),
        record("gpu_health", "node02", "fail", "node02: GPU 3 (00000000:5D:00.0) <b>4</b> errors"),
        record("gpu_topology", "node02", measured={"nic_map": MAP}),
        record(
            "gpu_inventory",
            "node01",
            measured={"gpus": 8, "model": "NVIDIA H200"},
            tool_versions=versions,
        ),
        record("pcie_links", "node01", "skipped", "not applicable: expect.gpu.rdma_sysfs"),
        record("versions", "cluster", "fail", "nvidia_driver differs", kind="cluster"),
    ]


def test_section_per_node_with_health_and_nic_map():
    section = gpu_section(records())
    one, two = section["nodes"]
    assert (one["name"], one["gpus"], one["model"], one["driver"], one["cuda"]) == (
        "node01",
        8,
        "NVIDIA H200",
        "580.159.04",
        "13.0",
    )
    assert one["healthy"] and one["nic_map"] == {} and repr(two["gpus"]) == "8"  # 8.0 in JSON
    assert one["not_measured"] == ["not applicable: expect.gpu.rdma_sysfs"]
    assert not two["healthy"] and two["issues"] == [
        "GPU memory health (ECC, row remapping): node02: GPU 3 (00000000:5D:00.0) <b>4</b> errors"
    ]
    assert section["columns"] == ["GPU0", "GPU1", "GPU2", "GPU10"]
    assert two["nic_map"]["GPU10"] == "erdma_1"


def test_template_escapes_node_output_and_shows_the_map():
    html = _environment().get_template("certificate_gpu.html.j2").render(gpu=gpu_section(records()))
    assert "<b>4</b>" not in html and "&lt;b&gt;4&lt;/b&gt;" in html
    assert '<section id="gpus">' in html and html.count("erdma_1") == 2
    assert "not measured here: not applicable: expect.gpu.rdma_sysfs" in html


def test_no_gpu_measurement_no_section():
    cpu_only = [record("gpu_inventory", "node01", "skipped", "not applicable: no GPUs")]
    assert gpu_section(cpu_only) is None and gpu_section([]) is None
    template = _environment().get_template("certificate_gpu.html.j2")
    assert "<section" not in template.render(gpu=None)
    assert "<section" not in template.render()  # included before the builder's context entry
