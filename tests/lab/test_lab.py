"""The lab itself: up on a stale lab, status, idempotent down, nothing left in the host."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_hpcnet.cli import main
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import cluster as lab
from pytest_hpcnet.lab.state import MAX_NODES, LabState

pytestmark = pytest.mark.lab
CONTROL_PLANE = "pytest_hpcnet.lab.control_plane"


def _lab_sshd_pids(state_dir: Path, program: str = "sshd") -> dict[int, str]:
    """PIDs of sshd processes started from this lab's config, with their network namespace
    (`program`: another lab process, such as the control plane's daemon)."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
            if program in cmd and str(state_dir) in cmd:
                found[int(proc.name)] = os.readlink(proc / "ns" / "net")
        except OSError:
            continue
    return found


def test_up_twice_then_down_twice(lab4, tmp_path, capsys):
    """Runs last in this module's order: replaces the session lab, then restores it."""
    state_dir = Path(lab4.state_dir)
    inventory = Path(lab4.inventory)
    host_ns = os.readlink("/proc/self/ns/net")
    state = lab.up(2, 1500, state_dir, inventory)  # up over a stale (running) lab cleans it
    assert [n.name for n in state.nodes] == ["node01", "node02"]
    assert sorted(lab.lab_namespaces()) == ["hx-node01", "hx-node02"]
    assert load_inventory(inventory).expect.mtu == 1500
    sshds = _lab_sshd_pids(state_dir)
    assert len(sshds) == 2 and host_ns not in sshds.values()
    daemons = _lab_sshd_pids(state_dir, CONTROL_PLANE)  # one, on the host's loopback
    assert list(daemons) == [LabState.load(state_dir).cloud_api_pid], daemons
    assert main(["lab", "status", "--state-dir", str(state_dir)]) == 0
    assert "node02   198.18.0.12    mtu 1500  netns up      sshd running" in capsys.readouterr().out
    assert main(["lab", "down", "--state-dir", str(state_dir)]) == 0
    assert main(["lab", "down", "--state-dir", str(state_dir)]) == 0
    assert lab.lab_namespaces() == []
    assert _lab_sshd_pids(state_dir) == {}
    assert _lab_sshd_pids(state_dir, CONTROL_PLANE) == {}  # `down` stopped it
    assert LabState.load(state_dir) is None
    restored = lab.up(4, 8500, state_dir, inventory)
    vars(lab4).update(vars(restored))  # nodes, and the new control plane's PID and port


def test_bad_arguments_give_one_line(capsys, tmp_path):
    assert main(["lab", "up", "--nodes", "0", "--state-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"hpcnet: --nodes must be between 1 and {MAX_NODES}")
        and err.count("\n") == 1
    )
