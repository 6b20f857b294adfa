"""Starting each node's metadata service (`metadata_server.py`) inside its namespace."""

from __future__ import annotations

from pathlib import Path

from pytest_hpcnet.lab.emulation import node_python
from pytest_hpcnet.lab.state import METADATA_ADDRESS, LabNode, LabState
from pytest_hpcnet.lab.system import LabError, in_ns, sh

SERVER = Path(__file__).with_name("metadata_server.py")
PORT = 80


def add_metadata_address(node: LabNode) -> None:
    """Put 100.100.100.200/32 on the node's `lo`: served in that namespace only."""
    sh("ip", "-n", node.namespace, "addr", "add", f"{METADATA_ADDRESS}/32", "dev", "lo")


def start_metadata(state: LabState, node: LabNode) -> int:
    """Start the node's service (it binds, then detaches); records and returns its PID."""
    log = state.node_dir(node.name) / "metadata.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = in_ns(
        node.namespace,
        node_python(),
        "-I",
        str(SERVER),
        "--state-dir",
        str(state.root),
        "--node",
        node.name,
        "--address",
        METADATA_ADDRESS,
        "--port",
        str(PORT),
        "--log",
        str(log),
    )
    pid = proc.stdout.strip()
    if not pid.isdigit():
        raise LabError(f"metadata service of {node.name} did not start: {pid[:80]!r}")
    node.pids["metadata"] = int(pid)
    return int(pid)
