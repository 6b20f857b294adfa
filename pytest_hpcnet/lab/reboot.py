"""A lab node's reboot, as the lab's control plane does it for `RebootInstance`:
`python -m pytest_hpcnet.lab.reboot --state-dir DIR --instance ID [--down-s S]`.

The node's sshd and every session under it stop, its transient faults clear
(`faults.heal_transient`; persistent ones stay), and after `--down-s` seconds its sshd
starts again (`cluster.start_node_sshd`, which waits for it to accept connections). Exits 0
once the node answers SSH again, 1 (with one line on stderr) otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from pytest_hpcnet.lab import cluster, faults
from pytest_hpcnet.lab.state import LabState, locked
from pytest_hpcnet.lab.system import LabError


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def stop_tree(pid: int | None) -> None:
    """SIGKILL `pid` (a node's sshd) and every process under it (its sessions): what a
    reboot does to the node's SSH."""
    if not pid:
        return
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(_children(current))
    for one in found:
        with contextlib.suppress(OSError):
            os.kill(one, signal.SIGKILL)


def reboot(state_dir: Path, instance_id: str, down_s: float) -> str:
    """Reboot the lab node of `instance_id`; returns its name."""
    with locked(state_dir):
        state = LabState.load(state_dir)
        node = (
            next((n for n in state.nodes if n.instance_id == instance_id), None) if state else None
        )
        if state is None or node is None:
            raise LabError(f"no lab node has instance id {instance_id}")
        stop_tree(node.sshd_pid)
        node.sshd_pid = None
        state.save()
    faults.heal_transient(node.name, state_dir)
    time.sleep(down_s)
    with locked(state_dir):
        state = LabState.load(state_dir)
        if state is None:
            raise LabError("the lab is gone")
        cluster.start_node_sshd(state, node.name)
    return node.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--instance", required=True)
    parser.add_argument("--down-s", type=float, default=3.0)
    args = parser.parse_args(argv)
    try:
        reboot(args.state_dir, args.instance, args.down_s)
    except (LabError, OSError) as exc:
        print(f"hpcnet lab reboot: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
