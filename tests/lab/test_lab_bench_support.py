"""Shared pieces of the lab benchmark tests: a transport, pair runs, leftover checks."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pytest_hpcnet.campaigns.perftest.rounds import PairRun, options_for, run_round
from pytest_hpcnet.campaigns.schedule import Pair
from pytest_hpcnet.inventory.bench_settings import PerftestSettings
from pytest_hpcnet.lab import faults
from pytest_hpcnet.lab.state import LabState
from pytest_hpcnet.transport.fanout import Transport

BENCH_WORDS = ("ib_write_", "all_reduce_perf", "mpirun", "orted", "fio ", "/usr/bin/fio")


def leftovers(state: LabState) -> list[str]:
    """Benchmark processes still running in any lab node namespace."""
    found = []
    for node in state.nodes:
        pids = subprocess.run(
            ["ip", "netns", "pids", node.namespace], capture_output=True, text=True
        ).stdout.split()
        for pid in pids:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if any(word in cmd for word in BENCH_WORDS):
                found.append(f"{node.name}: {pid} {cmd.strip()}")
    return found


def heal_all(state: LabState) -> None:
    faults.heal("all", Path(state.state_dir))


def perftest_pair(
    transport: Transport,
    state: LabState,
    tool: str,
    client: str = "node01",
    server: str = "node02",
    **overrides,
) -> PairRun:
    """One perftest run exactly as the plugin runs it (server, wait, client, stop)."""
    settings = PerftestSettings(
        **{"duration_s": 1, "latency_iterations": 500, "timeout_s": 30, **overrides}
    )
    addresses = {n.name: n.address for n in state.nodes}

    def side(name: str, port: int):
        return options_for(settings, tool, port, "erdma_0", None)

    pair = Pair(client, server)
    return run_round(transport, [pair], 1, tool, settings, addresses, side)[pair]
