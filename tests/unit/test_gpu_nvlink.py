"""NVLink state and errors: the parsers on published outputs, the lab emulation, the judge."""

from __future__ import annotations

from pathlib import Path

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import parse_query_gpu, query_gpu_command
from pytest_hpcnet.probes.gpu_nvlink import (
    ERRORS_COMMAND,
    STATUS_COMMAND,
    parse_nvlink_errors,
    parse_nvlink_status,
)
from pytest_hpcnet.requirements.gpu_nvlink import judge_gpu_nvlink
from tests.unit.test_lab_gpu_load_tools import lab_node

FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu_load"
H200 = Expectations(gpu_load={"nvlink_links": 18})


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_published_status_outputs():
    b300 = parse_nvlink_status(
        text("nvidia-smi-nvlink-status-b300-sxm6-x7-18links-53.125GBs-drv610-dell-xe9780.txt")
    )
    assert len(b300.gpus) == 7 and not b300.problems
    assert all(len(g.active) == 18 and set(g.links.values()) == {53.125} for g in b300.gpus)
    pcie = parse_nvlink_status(
        text("nvidia-smi-nvlink-s-h100-pcie-x2-bridge-12of18-active-26.562GBs-drv555-hpe.txt")
    )
    assert pcie.gpu(1).inactive == [4, 5, 10, 11, 16, 17] and len(pcie.gpu(1).active) == 12
    down = parse_nvlink_status(
        text("nvidia-smi-nvlink-s-i6-a100-sxm4-80gb-all-links-inActive-azure-nhc.txt")
    )
    assert down.gpu(6).all_inactive and down.gpu(6).name == "NVIDIA A100-SXM4-80GB"
    mixed = parse_nvlink_status(
        text(
            "nvidia-smi-nvlink-s-rtxa6000-x3-nvlink-bridge-pair-4links-14GBs-third-inActive-siboehm.txt"
        )
    )
    assert [len(g.active) for g in mixed.gpus] == [4, 4, 0] and mixed.gpu(2).all_inactive
    cut = parse_nvlink_status(
        text("nvidia-smi-nvlink-s-v100-sxm2-links-3-5-inactive-excerpt-azhpc-diagnostics-73.txt")
    )
    assert cut.gpu(3).inactive == [3, 5] and cut.problems == ("elided by the author: ....",)
    assert parse_nvlink_status("NVIDIA-SMI has failed because it couldn't communicate").error


def test_published_error_counters():
    errors = parse_nvlink_errors(
        text("nvidia-smi-nvlink-e-h100-sxm-18links-zero-errors-elided-uuid-masked-stas00.txt")
    )
    assert errors.gpus[0][17] == {"replay": 0, "recovery": 0, "crc": 0}
    assert errors.problems == ("elided by the author: [...]",)


def test_an_elided_output_is_not_measured_never_a_pass():
    status = parse_nvlink_status(
        text("nvidia-smi-nvlink-status-h100-sxm5-x8-tab-indent-snipped-rhel-ai.txt")
    )
    errors = parse_nvlink_errors(
        text("nvidia-smi-nvlink-e-h100-sxm-18links-zero-errors-elided-uuid-masked-stas00.txt")
    )
    verdict = judge_gpu_nvlink("n1", status, errors, None, H200)
    assert verdict.outcome == "not_measured" and "elided by the author" in verdict.reason


def test_lab_emulation_healthy_and_faulted(tmp_path):
    (tmp_path / "ok").mkdir()
    (tmp_path / "bad").mkdir()
    healthy = lab_node(tmp_path / "ok", {})
    faulted = lab_node(tmp_path / "bad", {"nvlink-down": "3", "nvlink-errors": "6"})
    for run, outcome in ((healthy, "pass"), (faulted, "fail")):
        status = parse_nvlink_status(run(STATUS_COMMAND))
        errors = parse_nvlink_errors(run(ERRORS_COMMAND))
        query = parse_query_gpu(run(query_gpu_command()))
        verdict = judge_gpu_nvlink("node01", status, errors, query, H200)
        assert verdict.outcome == outcome, verdict.reason
    assert verdict.reason.startswith(
        "node01 GPU 3 (00000000:5D:00.0, serial 1654124006923): NVLink link 4, 5 inactive; "
        "node01 GPU 6 (00000000:BA:00.0, serial 1654124006926): "
    )
    assert "NVLink link 2 counted errors: replay 40, recovery 1, crc 12" in verdict.reason
    subjects = {m.subject for m in verdict.measurements if m.name == "nvlink_active"}
    assert subjects == {f"GPU {i}" for i in range(8)}


def test_no_gpu_listed_by_nvlink_is_not_measured_never_a_pass():
    from pytest_hpcnet.probes.gpu_nvlink import NvlinkErrors, NvlinkStatus

    verdict = judge_gpu_nvlink("n1", NvlinkStatus(), NvlinkErrors(), None, H200)
    assert verdict.outcome == "not_measured" and "listed no GPU" in verdict.reason


# -- every link of every GPU, every counter kind, the SKU's per-link speed --------------------


def _status(gpus: int = 8, links: int = 18, speed: str = "26.562", name: str = "NVIDIA H200"):
    return "".join(
        f"GPU {g}: {name} (UUID: GPU-{g})\n"
        + "".join(f"\t Link {n}: {speed} GB/s\n" for n in range(links))
        for g in range(gpus)
    )


def _errors(gpus: int = 8, links=range(18), kinds=("Replay", "Recovery", "CRC")):
    return "".join(
        f"GPU {g}: NVIDIA H200 (UUID: GPU-{g})\n"
        + "".join(f"\t Link {n}: {k} Errors: 0\n" for n in links for k in kinds)
        for g in range(gpus)
    )


def _judge(status: str, errors: str, expect=H200):
    return judge_gpu_nvlink(
        "node03", parse_nvlink_status(status), parse_nvlink_errors(errors), None, expect
    )


EIGHT = Expectations(gpu={"count": 8}, gpu_load={"nvlink_links": 18})


def test_whole_listing_passes_against_the_sku_speed():
    verdict = _judge(_status(), _errors(), EIGHT)
    assert verdict.outcome == "pass", verdict.reason
    speeds = [m for m in verdict.measurements if m.name == "nvlink_gbs_min"]
    assert speeds and all(m.bound == 26.562 for m in speeds)


def test_error_listing_of_one_link_is_not_measured():
    verdict = _judge(_status(), _errors(links=range(1)), EIGHT)
    assert verdict.outcome == "not_measured"
    assert "node03 GPU 0 links 1-17: no replay, recovery, crc counter" in verdict.reason


def test_error_listing_of_replay_counters_only_is_not_measured():
    verdict = _judge(_status(), _errors(kinds=("Replay",)), EIGHT)
    assert verdict.outcome == "not_measured"
    assert "node03 GPU 3 links 0-17: no recovery, crc counter" in verdict.reason


def test_crc_flit_and_data_counters_are_read():
    errors = _errors(kinds=("Replay", "Recovery", "CRC Flit", "CRC Data"))
    assert parse_nvlink_errors(errors).gpus[0][3] == {
        "replay": 0,
        "recovery": 0,
        "crc_flit": 0,
        "crc_data": 0,
    }
    assert _judge(_status(), errors, EIGHT).outcome == "pass"
    noisy = errors.replace("Link 3: CRC Data Errors: 0", "Link 3: CRC Data Errors: 9", 1)
    assert "NVLink link 3 counted errors: crc_data 9" in _judge(_status(), noisy, EIGHT).reason


def test_every_link_at_a_tenth_of_the_sku_speed_fails():
    verdict = _judge(_status(speed="2.656"), _errors(), EIGHT)
    assert verdict.outcome == "fail"
    assert "below the SKU's 26.562 GB/s per link" in verdict.reason


def test_unknown_sku_speed_is_not_measured_not_the_node_mode():
    verdict = _judge(_status(name="NVIDIA Mystery GPU"), _errors(), EIGHT)
    assert verdict.outcome == "not_measured"
    assert "per-link NVLink speed bound unset" in verdict.reason


def test_link_missing_from_the_status_listing_is_not_measured():
    status = _status().replace("\t Link 17: 26.562 GB/s\n", "", 1)
    verdict = _judge(status, _errors(), EIGHT)
    assert verdict.outcome == "not_measured"
    assert "node03 GPU 0 link 17: not listed by nvidia-smi nvlink -s" in verdict.reason


def test_gpu_missing_by_expected_count_is_named():
    verdict = _judge(_status(gpus=7), _errors(gpus=7), EIGHT)
    assert verdict.outcome != "pass"
    assert "node03 GPU 7" in verdict.reason


def test_full_width_digits_are_not_read_as_numbers():
    status = _status().replace("Link 2: 26.562", "Link 2: ２６.562", 1)
    assert _judge(status, _errors(), EIGHT).outcome != "pass"
    errors = _errors().replace("Link 2: CRC Errors: 0", "Link 2: CRC Errors: ０", 1)
    assert _judge(_status(), errors, EIGHT).outcome != "pass"
