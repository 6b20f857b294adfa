"""The optional GPUDirect perftest (campaigns/gpudirect.py): each ERI with the GPU nearest
it (`nvidia-smi topo -m`), `--use_cuda=<gpu>` on both sides, failing closed without a GPU."""

from __future__ import annotations

import pytest

from pytest_hpcnet.campaigns.gpudirect import gpu_pairs, gpudirect_runs
from pytest_hpcnet.campaigns.perftest.rounds import options_for
from pytest_hpcnet.campaigns.schedule import Pair
from pytest_hpcnet.inventory.bench_settings import PerftestSettings
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu_topo import Topology, parse_topo
from pytest_hpcnet.probes.perftest import PerftestOptions, client_command, server_command
from pytest_hpcnet.requirements.erdma import judge_gdr_bw
from pytest_hpcnet.transport.fanout import CommandResult
from tests.corpus import corpus_files


def test_use_cuda_is_passed_to_both_sides():
    opts = PerftestOptions(device="erdma_1", gid_index=1, use_cuda=6)
    assert "--use_cuda=6" in server_command(opts).split()
    assert client_command(opts, "10.0.0.2").split()[-2:] == ["--use_cuda=6", "10.0.0.2"]
    assert "--use_cuda" not in server_command(PerftestOptions())


def test_each_eri_gets_its_nearest_gpu(fixture_text):
    topo = parse_topo(fixture_text("gpu", "topo-8gpu-2nic-erdma.txt"))
    assert (topo.nearest_gpu("erdma_0"), topo.nearest_gpu("erdma_1")) == (0, 4)
    assert topo.nearest_gpu("mlx5_9") is None
    found = gpu_pairs(
        {"n1": topo, "n2": Topology(error="nvidia-smi: not found")},
        {"n1": ["erdma_0", "erdma_1"], "n2": ["erdma_0"]},
    )
    assert found == {"n1": {"erdma_0": 0, "erdma_1": 4}, "n2": {"erdma_0": None}}


def test_runs_use_the_gpus_and_a_missing_gpu_fails_that_device():
    files = {p.name: p for p in corpus_files("ib_write_bw")}
    output = files["bnxt-re-broadcom-duration-gbits-q3.txt"].read_text()
    seen: list[str] = []

    class Fake:
        def run_on_all(self, command, nodes=None, timeout_s=None, together=False):
            out = {}
            for n in nodes:
                seen.append(command(type("N", (), {"name": n})()))
                out[n] = CommandResult(n, seen[-1], 0, output, "", 1.0, 0.0)
            return out

    settings = PerftestSettings()
    devices = {"n1": ["erdma_0", "erdma_1"], "n2": ["erdma_0", "erdma_1"]}
    gpus = {"n1": {"erdma_0": 0, "erdma_1": 4}, "n2": {"erdma_0": 1, "erdma_1": None}}

    def side(node: str, port: int, i: int) -> PerftestOptions:
        return options_for(settings, "ib_write_bw", port, devices[node][i], 1)

    pair = Pair("n1", "n2")
    runs = gpudirect_runs(
        Fake(),
        lambda _: None,
        [pair],
        5,
        settings,
        lambda i: {"n1": f"a{i}", "n2": f"b{i}"},
        devices,
        gpus,
        side,
    )[pair]
    assert runs["erdma_0"].value == pytest.approx(363.47)
    assert runs["erdma_1"].value is None
    assert runs["erdma_1"].error == "n2: no GPU near erdma_1 in nvidia-smi topo -m"
    server, client, _stop = seen  # one round: n2's server, n1's client, the stop
    assert "-d erdma_0" in server and "--use_cuda=1" in server
    assert "-d erdma_0" in client and "--use_cuda=0" in client
    assert client.endswith(" b0")  # the server's address on device index 0


def test_gdr_judge_names_the_gpus():
    e = Expectations(erdma={"per_eri_gbps": 80, "bw_fraction": 0.8})
    assert judge_gdr_bw("n1<->n2", "erdma_0", (0, 1), 70.0, None, e)
    low = judge_gdr_bw("n1<->n2", "erdma_0", (0, 1), 10.0, None, e)
    assert not low and low.reason.startswith("n1<->n2 erdma_0 (GPU0/GPU1): 10.00 Gbit/s < 64.00")
    failed = judge_gdr_bw("n1<->n2", "erdma_1", (4, None), None, "n2: no GPU near erdma_1", e)
    assert not failed
    assert failed.reason == (
        "n1<->n2 erdma_1 (GPU4/?): ib_write_bw --use_cuda failed: n2: no GPU near erdma_1"
    )
