"""GPUs under load: the probe's parsers on the fixtures, and the judges' outcomes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu_load import (
    GpuLoad,
    LoadRun,
    load_command,
    parse_engines,
    parse_load,
    parse_samples,
)
from pytest_hpcnet.probes.sections import split_sections
from pytest_hpcnet.requirements import gpu_load as judges
from pytest_hpcnet.requirements.gpu_load import NodeLoad

FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu_load"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_engines():
    found = parse_engines(text("engines-torch-dcgmi-nccl.txt"))
    assert found.found == {
        "torch": "2.5.1+cu124",
        "dcgmi": "/usr/bin/dcgmi",
        "all_reduce_perf": "/opt/nccl-tests/build/all_reduce_perf",
    }
    assert found.missing == ("cupy", "nvbandwidth")
    none = parse_engines(text("engines-none.txt"))
    assert not none.found and not none.has("torch")
    assert parse_engines("sh: 1: python3: not found\n").error


def test_load_output():
    run = parse_load(text("load-8gpu-lab-faults-1-3-5-6.txt"))
    assert run.complete and run.error is None and run.expected == 8
    assert [g.index for g in run.gpus] == list(range(8))
    assert run.gpu(5).bf16_tflops < 0.7 * run.gpu(0).bf16_tflops
    assert run.gpu(3).checksum != run.gpu(0).checksum
    assert run.engine == "torch 2.5.1+hpcnet.lab.emulation (CUDA 12.4)"


def test_load_output_cut_or_broken():
    lines = text("load-8gpu-lab-faults-1-3-5-6.txt").splitlines()
    cut = parse_load("\n".join(lines[:4]), None)
    assert not cut.complete and "cut short" in cut.error and len(cut.gpus) == 3
    assert "did not start" in parse_load("python3: not found").error
    broken = parse_load(lines[0] + "\ngpu=0 bf16_tflops=abc\nend gpus=1 ok=0\n")
    assert broken.gpu(0).error.startswith("unreadable")
    error = parse_load(
        lines[0] + "\ngpu=2 error=ModuleNotFoundError:_No_module_named_'torch'\nend gpus=1 ok=0"
    )
    assert error.gpu(2).error == "ModuleNotFoundError: No module named 'torch'"


def test_samples():
    lab = parse_samples(text("samples-8gpu-lab-hot-gpu6.csv"))
    assert lab.error is None and len(lab.gpus) == 8
    hot = lab.gpu(6)
    assert hot.temperature_c_max == 91 and hot.event_names({0x8, 0x40}) == (
        "hw_slowdown",
        "hw_thermal_slowdown",
    )
    assert hot.busy < hot.count and lab.gpu(0).sm_mhz_median == 1980
    real = parse_samples(text("samples-h200-idle-recorded-values-nounits.csv"))
    one = real.gpu(0)
    assert (one.bus_id, one.serial, one.sm_mhz_median, one.power_w_max) == (
        "00000000:00:06.0",
        "1653724056182",
        345.0,
        82.43,
    )
    assert one.busy == 0 and one.event_names() == ("gpu_idle",)
    assert parse_samples("").error and parse_samples("garbage\n").problems


def test_load_command_is_bounded_and_framed():
    command = load_command(8, 60)
    assert "-lms 500" in command and "timeout 270 nvidia-smi" in command
    assert "clocks_throttle_reasons.active" in command  # the pre-R535 name, when refused
    assert "timeout -k 10 240 python3" in command and "trap 'rm -rf" in command
    out = "@@hpcnet begin gpu_load\nx\n@@hpcnet end gpu_load 0\n@@hpcnet begin gpu_samples\ny"
    sections = split_sections(out)
    assert {k: (v.text, v.status) for k, v in sections.items()} == {
        "gpu_load": ("x", 0),
        "gpu_samples": ("y", None),
    }


def gpu(index: int, bf16: float = 780.0, checksum: str = "ab" * 8, **kw) -> GpuLoad:
    figures = {"tf32_tflops": 390.0, "hbm_gbs": 4300.0, "h2d_gbs": 55.0, "d2h_gbs": 55.0}
    figures.update(kw)
    return GpuLoad(
        index,
        "torch",
        "2.5.1",
        "12.4",
        bf16_tflops=bf16,
        checksum=checksum,
        checksum_stable=True,
        **figures,
    )


def node_load(name: str, gpus: list[GpuLoad], samples: str | None = None) -> NodeLoad:
    run = LoadRun(tuple(gpus), expected=len(gpus), seconds=60, complete=True)
    lines = samples or "\n".join(
        f"{g.index}, 00000000:{g.index + 16:02X}:00.0, 100{g.index}, 1980, 690, 60, 0x4"
        for g in gpus
    )
    return NodeLoad(name, run=run, samples=parse_samples(lines))


def cluster(**overrides: NodeLoad) -> dict[str, NodeLoad]:
    nodes = {f"n{i}": node_load(f"n{i}", [gpu(j) for j in range(4)]) for i in range(1, 4)}
    nodes.update(overrides)
    return nodes


def test_healthy_cluster_passes_peer_relative_and_says_so():
    peers = cluster()
    verdict = judges.judge_gpu_compute(peers["n1"], peers, Expectations())
    assert verdict.outcome == "pass"
    assert "no SKU figure (expect.gpu_load.min_bf16_tflops), peer-relative only" in verdict.reason
    assert "power cap reached under load on GPU 0, 1, 2, 3 (not a failure)" in verdict.reason
    assert judges.judge_gpu_correctness(peers["n1"], peers).outcome == "pass"
    assert judges.judge_gpu_bandwidth(peers["n1"], peers, Expectations()).outcome == "pass"


def test_a_slow_gpu_fails_against_its_node_and_the_cluster():
    slow = node_load("n2", [gpu(0), gpu(1, bf16=690.0), gpu(2), gpu(3)])
    peers = cluster(n2=slow)
    verdict = judges.judge_gpu_compute(slow, peers, Expectations())
    assert verdict.outcome == "fail"
    assert verdict.reason.startswith("n2 GPU 1 (00000000:11:00.0, serial 1001): bf16 GEMM 690")
    # four GPUs on the node are too few for a node-best bound (min_peer_gpus 8)
    assert "node best" not in verdict.reason and "cluster median 780" in verdict.reason
    four = Expectations(gpu_load={"min_peer_gpus": 4})
    assert "0.90 x node best 780" in judges.judge_gpu_compute(slow, peers, four).reason
    assert judges.judge_gpu_compute(peers["n1"], peers, Expectations()).outcome == "pass"
    loose = Expectations(gpu_load={"peer_tolerance": 0.2})
    assert judges.judge_gpu_compute(slow, peers, loose).outcome == "pass"


def test_peers_do_not_stand_in_for_a_floor():
    """Every GPU equally slow passes its peers but not the SKU floor; a one-node cluster of
    four GPUs without a floor is measured, not judged; 1e300 TFLOPS is implausible and blames
    no healthy GPU beside it."""
    slow = {f"n{i}": node_load(f"n{i}", [gpu(g, bf16=50.0) for g in range(4)]) for i in (1, 2)}
    floor = Expectations(gpu_load={"min_bf16_tflops": 692})
    assert judges.judge_gpu_compute(slow["n1"], slow, floor).outcome == "fail"
    alone = {"n1": node_load("n1", [gpu(g, bf16=50.0) for g in range(4)])}
    verdict = judges.judge_gpu_compute(alone["n1"], alone, Expectations())
    assert verdict.outcome == "not_measured" and "not judged" in verdict.reason
    absurd = node_load("n2", [gpu(0, bf16=1e300), gpu(1), gpu(2), gpu(3)])
    peers = cluster(n2=absurd)
    verdict = judges.judge_gpu_compute(absurd, peers, Expectations())
    assert verdict.outcome == "not_measured" and "implausible" in verdict.reason
    assert judges.judge_gpu_compute(peers["n1"], peers, Expectations()).outcome == "pass"


def test_sku_floor_and_temperature_ceiling():
    peers = cluster()
    strict = Expectations(gpu_load={"min_bf16_tflops": 800, "max_temperature_c": 55})
    verdict = judges.judge_gpu_compute(peers["n1"], peers, strict)
    assert verdict.outcome == "fail"
    assert "below expect.gpu_load.min_bf16_tflops (SKU)" in verdict.reason
    assert "60 C under load > 55 C" in verdict.reason


def test_slowdown_under_load_fails_power_cap_does_not():
    samples = (
        "0, 00000000:10:00.0, 1000, 1980, 690, 60, 0x4\n"
        "0, 00000000:10:00.0, 1000, 1200, 600, 90, 0x40"
    )
    hot = node_load("n3", [gpu(0)], samples)
    verdict = judges.judge_gpu_compute(hot, cluster(n3=hot), Expectations())
    assert verdict.outcome == "fail"
    assert (
        "n3 GPU 0 (00000000:10:00.0, serial 1000): hw_thermal_slowdown under load" in verdict.reason
    )


def test_checksum_minority_fails_named_with_bus_and_serial():
    bad = node_load("n3", [gpu(0), gpu(1), gpu(2, checksum="cd" * 8), gpu(3)])
    peers = cluster(n3=bad)
    verdict = judges.judge_gpu_correctness(bad, peers)
    assert verdict.outcome == "fail"
    assert verdict.reason == (
        "n3 GPU 2 (00000000:12:00.0, serial 1002): checksum cdcdcdcdcdcdcdcd differs from the"
        " cluster's abababababababab"
    )
    assert judges.judge_gpu_correctness(peers["n1"], peers).outcome == "pass"


def test_a_tie_blames_no_gpu():
    split = {"a": node_load("a", [gpu(0, checksum="aa" * 8), gpu(1, checksum="bb" * 8)])}
    verdict = judges.judge_gpu_correctness(split["a"], split)
    assert verdict.outcome == "not_measured", verdict.reason
    assert "aaaaaaaaaaaaaaaa on 1 GPU (a GPU 0)" in verdict.reason
    assert "bbbbbbbbbbbbbbbb on 1 GPU (a GPU 1)" in verdict.reason
    assert "differs" not in verdict.reason


def test_a_plurality_short_of_half_the_planned_gpus_blames_no_gpu():
    # 3 agree, 1 differs, but 4 more GPUs were planned and gave nothing: 3 is not > 8 / 2
    four = node_load("a", [gpu(0), gpu(1), gpu(2), gpu(3, checksum="cd" * 8)])
    four = replace(four, expected_gpus=8)
    peers = {"a": four}
    verdict = judges.judge_gpu_correctness(four, peers)
    assert verdict.outcome != "pass"
    assert "differs from the cluster's" not in verdict.reason
    assert "no checksum is shared by more than half of the 8 planned GPUs" in verdict.reason
    whole = cluster(n3=node_load("n3", [gpu(0), gpu(1), gpu(2), gpu(3, checksum="cd" * 8)]))
    blamed = judges.judge_gpu_correctness(whole["n3"], whole)
    assert blamed.outcome == "fail" and "n3 GPU 3" in blamed.reason


def test_not_measured_never_passes():
    none = NodeLoad("n1", missing="no load engine: python3 has no torch", fix=judges.INSTALL_TORCH)
    peers = cluster(n1=none)
    for verdict in (
        judges.judge_gpu_compute(none, peers, Expectations()),
        judges.judge_gpu_correctness(none, peers),
        judges.judge_gpu_bandwidth(none, peers, Expectations()),
    ):
        assert verdict.outcome == "not_measured" and "pip install torch" in verdict.fix
    cut = NodeLoad("n1", run=LoadRun((gpu(0),), expected=2, complete=False, error="cut short"))
    assert judges.judge_gpu_compute(cut, peers, Expectations()).outcome == "not_measured"
    no_samples = NodeLoad("n1", run=LoadRun((gpu(0),), expected=1, complete=True), samples=None)
    verdict = judges.judge_gpu_compute(no_samples, cluster(n1=no_samples), Expectations())
    assert verdict.outcome == "not_measured" and "nvidia-smi under load" in verdict.reason


def test_a_gpu_whose_load_failed_fails():
    broken = node_load(
        "n2", [gpu(0), GpuLoad(1, error="RuntimeError: CUDA error: an illegal memory access")]
    )
    verdict = judges.judge_gpu_compute(broken, cluster(n2=broken), Expectations())
    assert verdict.outcome == "fail" and "n2 GPU 1" in verdict.reason
    assert "the load failed: RuntimeError" in verdict.reason


def test_the_same_error_on_every_gpu_is_the_engine_not_measured():
    error = "AssertionError: Torch not compiled with CUDA enabled"
    cpu_only = node_load("n2", [GpuLoad(0, error=error), GpuLoad(1, error=error)])
    verdict = judges.judge_gpu_compute(cpu_only, cluster(n2=cpu_only), Expectations())
    assert verdict.outcome == "not_measured" and "the engine, not a GPU" in verdict.reason
    assert "pip install torch" in verdict.fix


def test_host_copies_against_the_gpus_pcie_link():
    from dataclasses import replace

    from pytest_hpcnet.probes.gpu import parse_query_gpu

    query = parse_query_gpu((FIXTURES.parent / "gpu" / "query-8gpu-h200.csv").read_text())
    slow_hosts = [gpu(i, h2d_gbs=40.0, d2h_gbs=56.0) for i in range(8)]
    load = replace(node_load("n1", slow_hosts), query=query)
    verdict = judges.judge_gpu_bandwidth(load, {"n1": load}, Expectations())
    assert verdict.outcome == "fail"  # every GPU alike: its peers cannot tell, its link can
    assert "host-to-device 40 GB/s below 0.70 x its PCIe gen5 x16 63.0" in verdict.reason
    assert "device-to-host" not in verdict.reason
    assert judges.link_gbs(query, 0) == (63.008, "gen5 x16")
    narrow = parse_query_gpu((FIXTURES.parent / "gpu" / "query-8gpu-pcie-gpu6.csv").read_text())
    assert judges.link_gbs(narrow, 6) == (3.938 * 8, "gen5 x8")


def test_engine_versions_ride_the_facts():
    found = parse_engines(text("engines-versions-torch-dcgmi-nvbandwidth.txt"))
    assert found.versions == {"torch": "2.5.1+cu124", "dcgm": "3.3.9", "nvbandwidth": "v0.10.0"}
    assert found.has("nvbandwidth") and found.found["nvbandwidth"] == "/usr/local/bin/nvbandwidth"
    assert parse_engines(text("engines-torch-dcgmi-nccl.txt")).versions == {"torch": "2.5.1+cu124"}


def test_a_checksum_whose_stability_was_not_reported_is_not_agreement():
    unsure = node_load("n3", [gpu(0), gpu(1), replace(gpu(2), checksum_stable=None), gpu(3)])
    verdict = judges.judge_gpu_correctness(unsure, cluster(n3=unsure))
    assert verdict.outcome == "fail"
    assert "n3 GPU 2 (00000000:12:00.0, serial 1002): did not report" in verdict.reason


def test_a_slowdown_without_readable_clocks_still_fails_naming_the_gpu():
    samples = "0, 00000000:10:00.0, 1000, [N/A], [N/A], [N/A], 0x40"
    hot = node_load("n3", [gpu(0)], samples)
    verdict = judges.judge_gpu_compute(hot, cluster(n3=hot), Expectations())
    assert verdict.outcome == "fail"
    assert "hw_thermal_slowdown under load (SM clock down to ? MHz, ? C)" in verdict.reason


def test_unreadable_temperature_and_clock_events_are_not_measured_not_none():
    samples = (
        "0, 00000000:10:00.0, 1000, 1980, 690, [N/A], [N/A]\n"
        "0, 00000000:10:00.0, 1000, 1980, 690, [Not Supported], [N/A]"
    )
    parsed = parse_samples(samples).gpu(0)
    assert set(parsed.unreadable) == {"temperature.gpu", "clocks_event_reasons.active"}
    blind = node_load("n3", [gpu(0)], samples)
    strict = Expectations(gpu_load={"max_temperature_c": 85})
    verdict = judges.judge_gpu_compute(blind, cluster(n3=blind), strict)
    assert verdict.outcome == "not_measured", verdict.reason
    assert "n3 GPU 0 (00000000:10:00.0, serial 1000): clock-event reasons unreadable" in (
        verdict.reason
    )
    assert "temperature unreadable" in verdict.reason
    slowdown = next(m for m in verdict.measurements if m.name == "slowdown")
    assert slowdown.value is None


def test_one_unreadable_temperature_sample_leaves_the_ceiling_unjudged():
    samples = (
        "0, 00000000:10:00.0, 1000, 1980, 690, 60, 0x0\n"
        "0, 00000000:10:00.0, 1000, 1980, 690, [N/A], 0x0\n"
        "0, 00000000:10:00.0, 1000, 1980, 690, ９９, 0x0"
    )
    blind = node_load("n3", [gpu(0)], samples)
    strict = Expectations(gpu_load={"max_temperature_c": 85})
    verdict = judges.judge_gpu_compute(blind, cluster(n3=blind), strict)
    assert verdict.outcome == "not_measured"
    assert "temperature unreadable in 2 of 3 samples" in verdict.reason
