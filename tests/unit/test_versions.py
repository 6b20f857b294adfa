"""Tool versions from the package database."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_hpcnet.campaigns.gpu_load import NodeNcclPhase
from pytest_hpcnet.campaigns.phase import PhaseRun
from pytest_hpcnet.inventory.bench_settings import BenchmarkSettings
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.versions import parse_versions, versions_command
from pytest_hpcnet.transport.fanout import CommandResult


def test_parse_versions_keeps_name_version_lines_only():
    text = "kernel=6.18.44\nerdma=0.2.36\nfio=3.33-3\nopenmpi-bin=\nnoise line\n"
    assert parse_versions(text) == {"kernel": "6.18.44", "erdma": "0.2.36", "fio": "3.33-3"}


def test_command_runs_here_and_reports_the_kernel():
    out = subprocess.run(["sh", "-c", versions_command()], capture_output=True, text=True)
    assert out.returncode == 0
    kernel = subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
    assert parse_versions(out.stdout)["kernel"] == kernel


def test_kernel_and_os_are_read_through_the_node_view(tmp_path):
    """`/proc/sys/kernel/osrelease` is what `uname -r` prints; a lab node's view
    (`HPCNET_PROC`, `HPCNET_ETC`) gives its own kernel and OS release."""
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text("5.15.0-999-lab\n")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/os-release").write_text('ID=ubuntu\nPRETTY_NAME="Ubuntu 99.04 LTS"\n')
    env = {"PATH": "/usr/bin:/bin", "HPCNET_PROC": f"{tmp_path}/proc"}
    env["HPCNET_ETC"] = f"{tmp_path}/etc"
    out = subprocess.run(["sh", "-c", versions_command()], capture_output=True, text=True, env=env)
    found = parse_versions(out.stdout)
    assert (found["kernel"], found["os"]) == ("5.15.0-999-lab", "Ubuntu 99.04 LTS")


def test_os_dcgm_and_torch_under_their_names(tmp_path):
    text = "os=Ubuntu 22.04.5 LTS\ndatacenter-gpu-manager-4-core=1:4.2.3-1\ntorch=2.5.1+cu124\n"
    assert parse_versions(text) == {
        "os": "Ubuntu 22.04.5 LTS",
        "dcgm": "1:4.2.3-1",
        "torch": "2.5.1+cu124",
    }
    site = tmp_path / "usr/local/lib/python3.11/dist-packages"
    (site / "torch-2.5.1+cu124.dist-info").mkdir(parents=True)
    command = versions_command().replace(
        "/usr/local/lib/python3*/dist-packages", f"{tmp_path}/usr/local/lib/python3*/dist-packages"
    )
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert parse_versions(out.stdout)["torch"] == "2.5.1+cu124"  # read by name: no python started


SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "nccl_allreduce"


class _Facts:
    def __init__(self, node: str):
        self.node = node
        self.result = SimpleNamespace(unreachable=None)
        query = (Path(__file__).resolve().parents[1] / "fixtures" / "gpu").joinpath(
            "query-8gpu-h200.csv"
        )
        engines = "tool all_reduce_perf /usr/bin/all_reduce_perf\n"
        self._sections = {"gpu_engines": engines, "gpu_query": query.read_text()}

    def whole(self, section: str) -> str | None:
        return self._sections.get(section)


def _phase(outputs: dict[str, str]) -> PhaseRun:
    """The single-node NCCL phase on these nodes, each answering its recorded output."""

    def run_on_all(command, nodes, timeout_s, together):
        return {n: CommandResult(n, "", 0, outputs[n], "", 0.0, 0.0) for n in nodes}

    inventory = SimpleNamespace(
        nodes=[SimpleNamespace(name=n) for n in outputs],
        expect=Expectations(gpu={"count": 8}),
        benchmarks=BenchmarkSettings(),
    )
    facts = SimpleNamespace(
        inventory=inventory,
        gather=lambda: {n: _Facts(n) for n in outputs},
        transport=SimpleNamespace(run_on_all=run_on_all),
        progress=lambda line: None,
    )
    return PhaseRun(NodeNcclPhase(), facts)


@pytest.mark.parametrize(
    ("sample", "version"),
    [
        ("h200-nccl-tests-2.19.6-g1-debug-info-socket-fallback-c0.txt", "2.19.6"),
        ("mpirun-tag-output-prefixed-rtx5090-socket.txt", "2.18.0"),  # `[1,0]<stdout>:# ...`
        ("cscs-alps-gh200-2node-nccl-tests-2.18.2.txt", "2.18.2"),
    ],
)
def test_nccl_tests_version_is_read_where_the_phase_ran(sample, version):
    """The phase's header names nccl-tests' version (real recorded outputs)."""
    run = _phase({"node01": (SAMPLES / sample).read_text()})
    assert run.phase.versions(run.found()["node01"])["nccl_tests"] == version
