"""The lab's emulated all_reduce_perf, two ranks on one machine without mpirun (both writing
to one stream, as mpirun merges them): with NCCL_DEBUG=INFO on stdout the other rank's INFO
line cuts rank 0's first row, as in a real run, and the table is not measured; with
NCCL_DEBUG_FILE (what the campaign sets) the INFO lines are in one file per process and the
table is whole."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_hpcnet.lab.emulation import install_tools, write_rdma_state
from pytest_hpcnet.lab.state import LabNode, LabState
from pytest_hpcnet.probes.nccl import NcclExpected, parse_nccl
from pytest_hpcnet.probes.nccl_debug import parse_nccl_debug, split_nccl_log
from pytest_hpcnet.requirements.judges import judge_nccl_run

LAUNCHED = NcclExpected(
    max_bytes=4096,
    ranks=2,
    nodes=1,
    validation=True,
    min_bytes=1024,
    step_factor=2,
    gpus_per_process=1,
    op="sum",
    collective="all_reduce_perf",
    hosts=(("node01",),),
)


@pytest.fixture
def lab_dir(tmp_path) -> Path:
    node = LabNode("node01", "127.0.0.1", 8500, mac="00:16:3e:18:00:0b", faults={})
    state = LabState(state_dir=str(tmp_path), inventory="lab.yaml", nodes=[node])
    install_tools(state)
    write_rdma_state(state, state.nodes[0])
    state.save()
    return tmp_path


def two_ranks(lab_dir: Path, **env: str) -> str:
    """Both ranks' stdout, merged into one stream as mpirun forwards it."""
    out_path = lab_dir / "merged.out"
    base = {
        **os.environ,
        "HPCNET_LAB_NODE": "node01",
        "HPCNET_LAB_STATE": str(lab_dir),
        "HPCNET_LAB_RENDEZVOUS": str(lab_dir / "rendezvous"),
        "OMPI_MCA_orte_hnp_uri": f"lab-test-{os.getpid()}",
        "OMPI_COMM_WORLD_SIZE": "2",
        **env,
    }
    argv = [sys.executable, str(lab_dir / "bin" / "all_reduce_perf")]
    argv += ["-b", "1K", "-e", "4K", "-f", "2", "-n", "1", "-w", "0", "-c", "1"]
    with open(out_path, "ab") as out:
        procs = [
            subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**base, "OMPI_COMM_WORLD_RANK": str(rank)},
                cwd=lab_dir / "bin",
            )
            for rank in (0, 1)
        ]
        for p in procs:
            assert p.wait(timeout=60) in (0, 1)
    return out_path.read_text()


def test_info_on_stdout_cuts_rank0s_row_and_the_run_is_not_measured(lab_dir):
    text = two_ranks(lab_dir, NCCL_DEBUG="INFO")
    first = next(ln for ln in text.splitlines() if ln.strip().startswith("1024 "))
    assert "-1" not in first  # the row stops at its op; the rest comes after the INFO line
    assert parse_nccl_debug(text).host("node01").networks == ("IB",)
    result = parse_nccl(split_nccl_log(text)[1], LAUNCHED)
    assert not result.ok and "unreadable row" in result.reason
    assert judge_nccl_run(result, None, LAUNCHED).outcome == "not_measured"


def test_info_to_nccl_debug_file_leaves_the_table_whole(lab_dir):
    pattern = str(lab_dir / "dbg.%h.%p")
    text = two_ranks(lab_dir, NCCL_DEBUG="INFO", NCCL_DEBUG_FILE=pattern)
    assert "NCCL INFO" not in text
    result = parse_nccl(text, LAUNCHED)
    assert result.ok, result.reason
    assert judge_nccl_run(result, None, LAUNCHED).outcome == "pass"
    files = sorted(lab_dir.glob("dbg.node01.*"))
    assert len(files) == 2  # one per process
    log = parse_nccl_debug("".join(f.read_text() for f in files))
    assert log.host("node01").networks == ("IB",)
