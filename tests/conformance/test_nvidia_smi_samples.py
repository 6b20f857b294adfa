"""Every recorded `nvidia-smi` sample (H200, driver 580.159.04) parses to known content.

A file the GPU parsers do not read (`-q`, XML, the default table, `-L`) must not be
misread as GPUs or a topology: each parser says it could not read it.
"""

from __future__ import annotations

import re

import pytest

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import QUERY_FIELDS, parse_query_gpu
from pytest_hpcnet.probes.gpu_host import parse_driver_version
from pytest_hpcnet.probes.gpu_topo import parse_topo
from pytest_hpcnet.requirements.gpu import (
    judge_count_model,
    judge_ecc,
    judge_mig,
    judge_pcie,
    judge_persistence,
    judge_throttle,
)
from tests.corpus import corpus_files, sample

H200_BUS = "00000000:00:06.0"
H200_EXPECT = Expectations.model_validate({"gpu": {"count": 1, "model": "NVIDIA H200"}})
NOT_OURS = {"smi-L.txt", "smi-q-health.txt", "smi-q.txt", "smi-q.xml", "smi.txt"}
KNOWN = NOT_OURS | {
    "help-query-gpu.txt",
    "nv-version.txt",
    "query-gpu-all-fields.tsv",
    "smi-query.csv",
    "smi-query-noheader.csv",
    "smi-topo.txt",
}


def all_fields() -> dict[str, tuple[str, str]]:
    """field -> (header line, value line) of each single-field query in the .tsv sample."""
    out = {}
    for line in sample("nvidia_smi", "query-gpu-all-fields.tsv").read_text().splitlines():
        field, _, recorded = line.partition("\t")
        header, value, _ = recorded.split("|")
        out[field] = (header, value)
    return out


@pytest.mark.parametrize("path", corpus_files("nvidia_smi"), ids=lambda p: p.name)
def test_every_sample_is_known(path):
    assert path.name in KNOWN, f"new sample {path.name}: add its expectation here"


@pytest.mark.parametrize("name", sorted(NOT_OURS))
def test_other_layouts_are_not_misread(name):
    text = sample("nvidia_smi", name).read_text()
    query = parse_query_gpu(text)
    assert query.gpus == () and query.error
    assert parse_topo(text).error


def test_query_csv_with_header_and_units():
    query = parse_query_gpu(sample("nvidia_smi", "smi-query.csv").read_text())
    assert query.error is None and len(query.gpus) == 1
    gpu = query.gpus[0]
    assert (gpu.index, gpu.name, gpu.bus_id) == (0, "NVIDIA H200", H200_BUS)
    assert gpu.uuid == "GPU-a6ebd82a-7904-3a98-169a-73c1367fec33"
    assert (gpu.driver_version, gpu.vbios_version) == ("580.159.04", "96.00.A5.00.1A")
    assert (gpu.pcie_gen, gpu.pcie_gen_max, gpu.pcie_width, gpu.pcie_width_max) == (5, 5, 16, 16)
    assert gpu.persistence_mode is True and gpu.ecc_mode is True and gpu.mig_mode is False
    assert (gpu.ecc_uncorrected_volatile, gpu.ecc_corrected_volatile) == (0, 0)
    assert gpu.retired_pages_pending is None  # [N/A]: Hopper remaps rows instead
    assert (gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (False, False)
    assert gpu.clock_events == 1 and gpu.clock_event_names == ("gpu_idle",)
    assert gpu.memory_total_mib == 143771 and gpu.raw("power.draw") == "78.89 W"
    for judge in (judge_ecc, judge_throttle, judge_pcie):
        assert judge("h200", query)
    assert judge_count_model("h200", query, H200_EXPECT)
    assert judge_persistence("h200", query, H200_EXPECT) and judge_mig("h200", query, H200_EXPECT)


def test_query_noheader_needs_its_fields():
    text = sample("nvidia_smi", "smi-query-noheader.csv").read_text()
    assert parse_query_gpu(text).error  # values where a header should be
    fields = (
        "index",
        "name",
        "driver_version",
        "pci.bus_id",
        "persistence_mode",
        "ecc.errors.uncorrected.volatile.total",
        "clocks_event_reasons.active",
    )
    gpu = parse_query_gpu(text, fields).gpus[0]
    assert (gpu.index, gpu.bus_id, gpu.ecc_uncorrected_volatile, gpu.clock_events) == (
        0,
        H200_BUS,
        0,
        1,
    )


def test_every_field_of_the_help_parses_alone():
    for field, (header, value) in all_fields().items():
        query = parse_query_gpu(f"{header}\n{value}\n")
        assert query.error is None and len(query.gpus) == 1, field
        assert query.gpus[0].raw(field) == value, field


def test_our_query_fields_are_real_and_typed():
    help_text = sample("nvidia_smi", "help-query-gpu.txt").read_text()
    recorded = all_fields()
    for field in QUERY_FIELDS:
        assert re.search(rf'^"{re.escape(field)}"', help_text, re.M), field
        assert field in recorded, field
    header = ", ".join(recorded[f][0] for f in QUERY_FIELDS)
    values = ", ".join(recorded[f][1] for f in QUERY_FIELDS)
    gpu = parse_query_gpu(f"{header}\n{values}\n").gpus[0]
    unavailable = {f for f in QUERY_FIELDS if recorded[f][1].startswith("[")}
    assert unavailable == {"retired_pages.pending"}
    assert (gpu.index, gpu.name, gpu.pstate, gpu.clock_events) == (0, "NVIDIA H200", "P0", 1)
    assert (gpu.memory_total_mib, gpu.pcie_gen, gpu.pcie_width) == (143771, 5, 16)
    assert gpu.uuid == "GPU-16eadc26-e4c7-8c5e-662a-891630473f81"  # another start: other UUID


def test_topo_with_ansi_header():
    topo = parse_topo(sample("nvidia_smi", "smi-topo.txt").read_text())
    assert topo.error is None and topo.devices == ("GPU0",)
    gpu = topo.row("GPU0")
    assert (gpu.cpu_affinity, gpu.numa_affinity, gpu.gpu_numa_id) == ("0-15", "0", "N/A")
    assert topo.link("GPU0", "GPU0") == "X" and topo.nearest_nics("GPU0") == ()


def test_proc_driver_version_open_module():
    driver = parse_driver_version(sample("nvidia_smi", "nv-version.txt").read_text())
    assert (driver.version, driver.open_module, driver.error) == ("580.159.04", True, None)
    assert driver.gcc == "gcc version 15.3.0 (GCC)"
