"""Inventory-derived values with shell metacharacters reach the tools as one literal argument.

Each command builder is run by a real shell with stub tools on PATH that print their
arguments; a marker file that any injected command would create must never appear.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.nccl.launch import launch_command
from pytest_hpcnet.inventory.bench_settings import NcclSettings
from pytest_hpcnet.probes.fio import FioJobSpec, fio_command, mount_check_command
from pytest_hpcnet.probes.links import ip_addr_command
from pytest_hpcnet.probes.perftest import PerftestOptions, client_command
from pytest_hpcnet.probes.ping import path_mtu_ping_command
from pytest_hpcnet.probes.ports import connect_command
from pytest_hpcnet.probes.rdma import ibv_devinfo_command
from pytest_hpcnet.transport.fanout import remote_command

STUBS = ("ibv_devinfo", "ip", "findmnt", "fio", "ib_write_bw", "ping", "mpirun", "python3")


@pytest.fixture
def shell(tmp_path):
    """Run a command line with stub tools; return (stdout, marker path)."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name in STUBS:
        stub = stubs / name
        stub.write_text('#!/bin/sh\nfor a in "$@"; do printf \'<%s>\\n\' "$a"; done\n')
        stub.chmod(0o755)
    marker = tmp_path / "PWNED"

    def run(command: str) -> str:
        env = {**os.environ, "PATH": f"{stubs}:/usr/bin:/bin"}
        wrapped = remote_command(command, 10)  # exactly what the node's shell receives
        proc = subprocess.run(
            ["sh", "-c", wrapped], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=20
        )
        return proc.stdout

    return run, marker


def hostile(marker: Path) -> list[str]:
    return [
        f"x; touch {marker}",
        f"$(touch {marker})",
        f"`touch {marker}`",
        f"-oProxyCommand=touch {marker}",
        f"a\ntouch {marker}\n",
        f"' ; touch {marker} ; '",
        f'" ; touch {marker} ; "',
    ]


BUILDERS = {
    "rdma device": lambda v: ibv_devinfo_command(v),
    "interface": lambda v: ip_addr_command(v),
    "mount path": lambda v: mount_check_command(v),
    "fio directory": lambda v: fio_command(FioJobSpec(directory=v)),
    "perftest extra args and device": lambda v: client_command(
        PerftestOptions(device=v, extra_args=(v,)), "198.18.0.12"
    ),
    "ping target": lambda v: path_mtu_ping_command(v, 8500),
    "connect target": lambda v: connect_command(v, [("tcp", 22)], 0.1),
    "nccl env value": lambda v: launch_command(
        NcclSettings(env={"NCCL_IB_HCA": v}, hostfile="/tmp/hx-hostfile-test"), ["h1"], ["n1"]
    ),
}


@pytest.mark.parametrize("where", sorted(BUILDERS))
def test_hostile_values_are_never_executed(shell, where):
    run, marker = shell
    for value in hostile(marker):
        command = BUILDERS[where](value)
        out = run(command)
        assert not marker.exists(), f"{where}: {value!r} was executed via {command!r}"
        if where not in ("connect target", "mount path", "fio directory"):
            assert f"<{value}>" in out or value in out, f"{where}: {value!r} not passed literally"
