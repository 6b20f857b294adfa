"""Every cut of the load, NVLink, DCGM, GPU-to-GPU and fabric outputs: the parsers never
raise and no judge passes what was cut short (a prefix is never a pass)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.gpu_load import node_load
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import parse_query_gpu
from pytest_hpcnet.probes.gpu_dcgm import parse_dcgm_json
from pytest_hpcnet.probes.gpu_nvlink import parse_nvlink_errors, parse_nvlink_status
from pytest_hpcnet.requirements import gpu_load as judges
from pytest_hpcnet.requirements.gpu_dcgm import judge_gpu_dcgm
from pytest_hpcnet.requirements.gpu_nvlink import judge_gpu_nvlink
from pytest_hpcnet.transport.fanout import CommandResult

FIXTURES = Path(__file__).parents[1] / "fixtures"
LOAD = (FIXTURES / "gpu_load" / "load-8gpu-lab-faults-1-3-5-6.txt").read_text()
SAMPLES = (FIXTURES / "gpu_load" / "samples-8gpu-lab-hot-gpu6.csv").read_text()
QUERY = parse_query_gpu((FIXTURES / "gpu" / "query-8gpu-h200.csv").read_text())


def healthy_load() -> str:
    """The fixture's run with every GPU healthy (the faulted lines made like GPU 0's)."""
    lines = LOAD.splitlines()
    first = lines[1]
    same = [first.replace("gpu=0 ", f"gpu={i} ", 1) for i in range(8)]
    return "\n".join([lines[0], *same, lines[-1]]) + "\n"


def framed(load: str, samples: str, load_end: bool = True, samples_end: bool = True) -> str:
    out = f"@@hpcnet begin gpu_load\n{load}"
    out += "\n@@hpcnet end gpu_load 0\n" if load_end else ""
    if load_end:
        out += f"@@hpcnet begin gpu_samples\n{samples}"
        out += "\n@@hpcnet end gpu_samples 0\n" if samples_end else ""
    return out


def cool(samples: str) -> str:
    """The samples with GPU 6 as cool as the others (no slowdown)."""
    return samples.replace(
        "1230, 612.40, 91, 0x0000000000000048", "1980, 696.20, 62, 0x0000000000000004"
    )


def load_of(stdout: str):
    return node_load("node01", CommandResult("node01", "load", 0, stdout, "", 1.0, 0.0))


def outcomes(load) -> set[str]:
    peers = {"node01": load}
    return {
        judges.judge_gpu_compute(load, peers, Expectations()).outcome,
        judges.judge_gpu_bandwidth(load, peers, Expectations()).outcome,
        judges.judge_gpu_correctness(load, peers).outcome,
    }


def test_the_whole_healthy_output_passes():
    assert outcomes(load_of(framed(healthy_load(), cool(SAMPLES)))) == {"pass"}


@pytest.mark.parametrize("cut", range(0, 10))
def test_a_cut_load_output_is_never_a_pass(cut):
    lines = healthy_load().splitlines()
    load = load_of(framed("\n".join(lines[:cut]), "", load_end=False))
    assert "pass" not in outcomes(load)


def test_cut_samples_are_never_a_pass_of_what_reads_them():
    """The compute judge reads the samples; bandwidth and checksums read the program's own
    section only, which ended whole."""
    lines = cool(SAMPLES).splitlines()
    for cut in range(0, len(lines), 7):
        load = load_of(framed(healthy_load(), "\n".join(lines[:cut]), samples_end=False))
        verdict = judges.judge_gpu_compute(load, {"node01": load}, Expectations())
        assert verdict.outcome == "not_measured", cut
        assert "cut short" in verdict.reason


def test_every_prefix_of_nvlink_and_dcgm_outputs():
    h200 = Expectations(gpu_load={"nvlink_links": 18})
    folder = FIXTURES / "gpu_load"
    status = (
        folder / "nvidia-smi-nvlink-status-b300-sxm6-x7-18links-53.125GBs-drv610-dell-xe9780.txt"
    ).read_text()
    errors = "".join(
        f"GPU {g}: NVIDIA B300\n"
        + "".join(
            f"\t Link {n}: {k} Errors: 0\n"
            for n in range(18)
            for k in ("Replay", "Recovery", "CRC")
        )
        for g in range(7)
    )
    seven = parse_query_gpu(
        "\n".join((folder.parent / "gpu" / "query-8gpu-h200.csv").read_text().splitlines()[:8])
    )
    whole = judge_gpu_nvlink(
        "n", parse_nvlink_status(status), parse_nvlink_errors(errors), seven, h200
    )
    assert whole.outcome == "pass", whole.reason
    lines = status.splitlines()
    for cut in range(len(lines) - 1):
        cut_status = parse_nvlink_status("\n".join(lines[:cut]))
        verdict = judge_gpu_nvlink("n", cut_status, parse_nvlink_errors(errors), seven, h200)
        assert verdict.outcome != "pass", cut
    for name in (
        "dcgm-4.2.3-gb10-r1-json-software-fail-persistence-sram.json",
        "nvvs-3.1.0-json-8gpu-software-pass-null-entries-warning-prefix-dcgm-test.txt",
    ):
        text = (folder / name).read_text()
        for cut in range(0, len(text) - 1, 37):
            run = parse_dcgm_json(text[:cut])
            assert judge_gpu_dcgm("n", run, None, 1).outcome != "pass", (name, cut)


def test_every_prefix_of_gpu_to_gpu_and_fabric_outputs():
    """A GPU-to-GPU matrix cut before its SUM line (nvbandwidth) or its end line (the torch
    copy program), and a fabric output cut before the manager's line, are never a pass."""
    from pytest_hpcnet.probes.gpu_fabric import parse_fabric
    from pytest_hpcnet.probes.gpu_p2p import parse_nvbandwidth
    from pytest_hpcnet.probes.gpu_p2p_torch import parse_torch_p2p
    from pytest_hpcnet.probes.gpu_topo import parse_topo
    from pytest_hpcnet.requirements.gpu_fabric import judge_gpu_fabric
    from pytest_hpcnet.requirements.gpu_p2p import NodeP2p, judge_gpu_p2p

    folder = FIXTURES / "gpu_load"
    topo = parse_topo((FIXTURES / "gpu" / "topo-8gpu-2nic-erdma.txt").read_text())
    for name, parse in (
        (
            "nvbandwidth-v0.10.0-h100-x8-d2d-read-ce-395GBs-cov-no-device-list.txt",
            parse_nvbandwidth,
        ),
        ("p2p-torch-8gpu-lab-slow-pair-1-6.txt", parse_torch_p2p),
    ):
        lines = (folder / name).read_text().splitlines()
        last = next(i for i, x in enumerate(lines) if x.startswith(("SUM ", "end ")))
        for cut in range(last):
            node = NodeP2p("n", parse("\n".join(lines[:cut])), topo, QUERY)
            assert judge_gpu_p2p(node, {"n": node}, Expectations()).outcome != "pass", (name, cut)
    fabric = folder / "nvidia-smi-q-i0-h800-drv525-fabric-state-completed-success-llm-action.txt"
    lines = (fabric.read_text() + "fabricmanager active\n").splitlines()
    assert judge_gpu_fabric("n", parse_fabric("\n".join(lines)), None).outcome == "pass"
    for cut in range(len(lines)):
        assert judge_gpu_fabric("n", parse_fabric("\n".join(lines[:cut])), None).outcome != "pass"
