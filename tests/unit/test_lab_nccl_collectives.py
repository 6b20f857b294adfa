"""The lab's emulated collectives, three ranks on one machine without mpirun: each prints its
own nccl-tests table (parsed as the run launched, #wrong all 0, NCCL on IB), and
`nccl-socket-one` puts the node on sockets for its one collective (tests/lab has the 4-node
run with `nccl-incast`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_hpcnet.lab.emulation import install_tools, write_rdma_state
from pytest_hpcnet.lab.state import LabNode, LabState
from pytest_hpcnet.probes.nccl import NcclExpected, parse_nccl
from pytest_hpcnet.probes.nccl_debug import parse_nccl_debug

RANKS = 3


def _lab(tmp_path: Path, faults: dict[str, str]) -> Path:
    node = LabNode("node01", "127.0.0.1", 8500, mac="00:16:3e:18:00:0b", faults=faults)
    state = LabState(state_dir=str(tmp_path), inventory="lab.yaml", nodes=[node])
    install_tools(state)
    write_rdma_state(state, state.nodes[0])
    state.save()
    return tmp_path


def ranks(lab_dir: Path, binary: str) -> tuple[str, str]:
    """(rank 0's stdout, every rank's NCCL INFO lines)."""
    base = {
        **os.environ,
        "HPCNET_LAB_NODE": "node01",
        "HPCNET_LAB_STATE": str(lab_dir),
        "HPCNET_LAB_RENDEZVOUS": str(lab_dir / "rendezvous"),
        "OMPI_MCA_orte_hnp_uri": f"lab-test-{binary}-{os.getpid()}",
        "OMPI_COMM_WORLD_SIZE": str(RANKS),
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_FILE": str(lab_dir / f"{binary}.debug.%h.%p"),
    }
    argv = [sys.executable, str(lab_dir / "bin" / binary)]
    argv += ["-b", "12K", "-e", "48K", "-f", "2", "-n", "2", "-w", "0", "-c", "1"]
    procs = [
        subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**base, "OMPI_COMM_WORLD_RANK": str(rank)},
            cwd=lab_dir / "bin",
        )
        for rank in range(RANKS)
    ]
    outs = [p.communicate(timeout=60)[0] for p in procs]
    info = "".join(f.read_text() for f in lab_dir.glob(f"{binary}.debug.*"))
    return outs[0], info


@pytest.mark.parametrize(
    "binary", ["all_gather_perf", "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf"]
)
def test_each_collective_prints_its_own_table(tmp_path, binary):
    text, info = ranks(_lab(tmp_path, {}), binary)
    launched = NcclExpected(
        max_bytes=48 * 1024, min_bytes=12 * 1024, step_factor=2, ranks=RANKS, validation=True,
        collective=binary, op="sum" if binary == "reduce_scatter_perf" else None,
    )  # fmt: skip
    parsed = parse_nccl(text, launched)
    assert parsed.ok, (parsed.reason, text)
    assert parsed.total_wrong == 0 and parsed.collective == binary
    assert parse_nccl_debug(info).host("node01").networks == ("IB",)


def test_socket_for_one_collective_only(tmp_path):
    lab_dir = _lab(tmp_path, {"nccl-socket-one": "alltoall"})
    _, alltoall = ranks(lab_dir, "alltoall_perf")
    _, gather = ranks(lab_dir, "all_gather_perf")
    assert parse_nccl_debug(alltoall).host("node01").networks == ("Socket",)
    assert parse_nccl_debug(gather).host("node01").networks == ("IB",)
