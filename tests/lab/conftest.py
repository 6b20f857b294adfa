"""A 4-node lab for the tests that cross a real network (root and Linux only).

Only one lab exists on a host at a time: these tests replace a running demo lab, and
hold the host-wide lock `/run/hpcnet-lab.lock` for the whole session so that two test
sessions (or a benchmark) on one machine take turns instead of tearing each other down.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
from pathlib import Path

import pytest

from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import cluster as lab
from pytest_hpcnet.lab import faults, links
from pytest_hpcnet.lab.emulation import set_eris
from pytest_hpcnet.lab.state import LabState


def _lab_unavailable() -> str | None:
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return "lab tests need root on Linux"
    if not Path(lab.SSHD).exists() or shutil.which("ip") is None:
        return "lab tests need openssh-server and iproute2"
    return None


LOCK = "/run/hpcnet-lab.lock"


@pytest.fixture(scope="session")
def lab4(tmp_path_factory) -> LabState:
    """A healthy 4-node lab for the whole test session; removed at the end."""
    reason = _lab_unavailable()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("lab")
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = lab.up(4, 8500, root / "state", root / "lab.yaml")
        try:
            yield state
        finally:
            lab.down(root / "state")


@pytest.fixture
def lab_inventory(lab4):
    """A fresh Inventory object of the lab (tests may modify their copy)."""
    return load_inventory(lab4.inventory)


@pytest.fixture(scope="module")
def lab2(lab4):
    """The session lab with two ERIs (two ENIs: erdma_1 on eth1) per node for the module
    that asks; one ERI again afterwards."""
    state_dir = Path(lab4.state_dir)
    before = _eth0_dropped(state_dir)
    set_eris(state_dir, 2)
    try:
        yield lab4
    finally:
        faults.heal("all", state_dir)
        set_eris(state_dir, 1)
        _no_leaked_drops(state_dir, before)


def _eth0_dropped(state_dir: Path) -> dict[str, int]:
    state = LabState.load(state_dir)
    return {node.name: links.rx_dropped(node) for node in state.nodes} if state else {}


def _no_leaked_drops(state_dir: Path, before: dict[str, int]) -> None:
    """Fail the module that left frames dropped on a node's eth0 (every later run of the
    session lab would fail HPCNET-NIC-ERRORS), after re-creating those links clean."""
    after = _eth0_dropped(state_dir)
    leaked = {name: n - before.get(name, 0) for name, n in after.items() if n > before.get(name, 0)}
    if leaked:
        for node in LabState.load(state_dir).nodes:
            if node.name in leaked:
                links.recreate_node_link(node)
        pytest.fail(f"frames dropped on eth0 during the module, by node: {leaked}")
