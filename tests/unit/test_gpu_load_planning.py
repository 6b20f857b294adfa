"""The GPU phases are planned by expect.gpu.count, not by what nvidia-smi happens to list."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pytest_hpcnet.campaigns.gpu_load import GpuLoadPhase, NodeNcclPhase
from pytest_hpcnet.campaigns.phase import PhaseRun
from pytest_hpcnet.inventory.bench_settings import BenchmarkSettings
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu_load import GpuLoad, LoadRun, parse_samples
from pytest_hpcnet.requirements import gpu_load as judges
from pytest_hpcnet.requirements.gpu_load import NodeLoad
from pytest_hpcnet.transport.fanout import CommandResult

GPU = Path(__file__).parents[1] / "fixtures" / "gpu"
ENGINES = "python torch 2.5.1\ntool all_reduce_perf /usr/bin/all_reduce_perf\n"


class Facts:
    def __init__(self, node: str, query: str):
        self.node = node
        self.result = SimpleNamespace(unreachable=None)
        self._sections = {"gpu_engines": ENGINES, "gpu_query": query}

    def whole(self, section: str) -> str | None:
        return self._sections.get(section)


class Transport:
    def __init__(self):
        self.commands: dict[str, str] = {}

    def run_on_all(self, command, nodes, timeout_s, together):
        out = {}
        for name in nodes:
            self.commands[name] = command(SimpleNamespace(name=name))
            out[name] = CommandResult(name, self.commands[name], 0, "", "", 0.0, 0.0)
        return out


def campaign(query: str, count: int | None = 8):
    inventory = SimpleNamespace(
        nodes=[SimpleNamespace(name="node03")],
        expect=Expectations(gpu={"count": count}),
        benchmarks=BenchmarkSettings(),
    )
    return SimpleNamespace(
        inventory=inventory,
        gather=lambda: {"node03": Facts("node03", query)},
        transport=Transport(),
        progress=lambda line: None,
    )


def seven() -> str:
    return (GPU / "query-7gpu-missing-gpu3.csv").read_text()


def test_single_node_all_reduce_is_not_run_over_fewer_gpus_than_expected():
    facts = campaign(seven())
    runs = PhaseRun(NodeNcclPhase(), facts).found()
    result, why = runs["node03"]
    assert result is None and "7 of the 8 GPUs expected" in why
    assert "node03" not in facts.transport.commands


def test_single_node_all_reduce_uses_the_expected_count():
    facts = campaign((GPU / "query-8gpu-h200.csv").read_text())
    PhaseRun(NodeNcclPhase(), facts).found()
    assert " -g 8 " in facts.transport.commands["node03"]


def test_the_load_names_the_gpu_nvidia_smi_does_not_list():
    facts = campaign(seven())
    loads = PhaseRun(GpuLoadPhase(), facts).found()
    assert "--gpus 7 " in facts.transport.commands["node03"]
    assert loads["node03"].expected_gpus == 8


def _load(gpus: int, expected: int | None) -> NodeLoad:
    run = LoadRun(
        tuple(
            GpuLoad(i, "torch", "2.5.1", "12.4", 780.0, 390.0, 4300.0, 55.0, 55.0, "ab" * 8, True)
            for i in range(gpus)
        ),
        expected=gpus,
        seconds=60,
        complete=True,
    )
    samples = parse_samples(
        "\n".join(
            f"{i}, 00000000:{i + 16:02X}:00.0, 100{i}, 1980, 690, 60, 0x0" for i in range(gpus)
        )
    )
    return NodeLoad("node03", run=run, samples=samples, expected_gpus=expected)


def test_judges_fail_the_gpu_the_load_could_not_reach():
    load = _load(7, 8)
    peers = {"node03": load, "node04": _load(8, 8)}
    for verdict in (
        judges.judge_gpu_compute(load, peers, Expectations()),
        judges.judge_gpu_bandwidth(load, peers, Expectations()),
        judges.judge_gpu_correctness(load, peers),
    ):
        assert verdict.outcome == "fail"
        assert "node03 GPU 7: not listed by nvidia-smi (expect.gpu.count 8)" in verdict.reason
        lost = [m for m in verdict.measurements if m.subject == "GPU 7"]
        assert lost and all(m.value is None for m in lost)
    whole = _load(8, 8)
    assert judges.judge_gpu_compute(whole, peers, Expectations()).outcome == "pass"
