"""What a burn-in costs: the controller's CPU per node, the node sampler's CPU, and the
evidence bytes per node-hour.

    .venv/bin/python benchmarks/burnin.py --nodes 1024 --rounds 20 --node-seconds 30 \
        --intervals 1 30 --ssh-nodes 64 --ssh-rounds 10   # and --ssh-nodes 256

1. Controller: `BurninCampaign.collect` over `--nodes` nodes of 8 GPUs, each round handing
   it one interval of sample lines per node (the lines the lab's emulated node writes) through
   a transport that answers at once: the controller's own CPU per round (parse, offsets,
   appending the evidence), without SSH. Divided by the interval (30 s), the share of one core
   a 1,024-node burn-in keeps busy besides its SSH sessions.
2. Node: the burn-in program run here for `--node-seconds` against the lab's emulated
   nvidia-smi and torch (8 GPUs, sampling every 1 s and 30 s): the sampler's (parent's) CPU
   seconds per second, the load children excluded (they are the load).
3. Evidence: bytes a node's `NODE.jsonl` grows per hour at a 30 s interval (8 GPUs, 2 ERIs:
   8 GPU lines and a device line a round), from the lines of 1.
4. SSH (`--ssh-nodes N`, needs root: a lab of N nodes, the host-wide lab lock held): the
   plugin's `Transport` with its connections open runs `collect_command` on every node,
   `--ssh-rounds` times, each node's samples file holding one round of lines to read: the
   controller's CPU per node per round, SSH included (paramiko: the channel, the exec, the
   reading), then scaled to 1,024 nodes at a 30 s interval.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_hpcnet.campaigns.burnin import BurninCampaign, BurninPlan
from pytest_hpcnet.inventory.burnin_settings import BurninSettings
from pytest_hpcnet.lab.emulation import PYLIB, install_tools
from pytest_hpcnet.lab.state import LabNode, LabState
from pytest_hpcnet.probes.burnin import HEADER, collect_command, start_command
from pytest_hpcnet.transport.fanout import CommandResult

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "burnin"
SAMPLES = FIXTURES / "samples-8gpu-2eri-lab-aer-gpu3-counter-erdma1.jsonl"
LOCK = "/run/hpcnet-lab.lock"


class InstantNodes:
    """Every node answers each collection with one interval of 8 GPU lines."""

    def __init__(self, nodes: int, lines: list[str]):
        self.names = [f"n{i:04d}" for i in range(nodes)]
        self.chunk = "\n".join(lines) + "\n"

    def run_on_all(self, command, nodes=None, timeout_s=None, together=False):
        body = f"{HEADER} size=0\n{self.chunk}"
        return {n: CommandResult(n, "collect", 0, body, "", 0.0, 0.0) for n in nodes}


def one_round() -> list[str]:
    """One interval of a node's lines as the program writes them: 8 GPU lines (with a load
    window each) and the device line of 8 GPUs and 2 ERIs (a lab run's, recorded)."""
    lines = SAMPLES.read_text().splitlines()
    gpus = [x for x in lines if '"win"' in x][-8:]
    return [*gpus, [x for x in lines if '"dev"' in x][-1]]


def controller(nodes: int, rounds: int, interval: float) -> tuple[float, int]:
    """(CPU seconds per collection round, evidence bytes per node per round)."""
    lines = one_round()
    transport = InstantNodes(nodes, lines)
    with tempfile.TemporaryDirectory(prefix="hpcnet-burnin-bench-") as tmp:
        facts = type("Facts", (), {"transport": transport})()
        campaign = BurninCampaign(facts, Path(tmp), "bench", 3600.0, BurninSettings())
        campaign.folder.mkdir(parents=True, exist_ok=True)
        gpus = dict.fromkeys(transport.names, 8)
        plan = BurninPlan("bench", 3600.0, interval, 600.0, 8192, time.time(), gpus)
        t0 = time.process_time()
        for _ in range(rounds):
            campaign.collect(plan, transport.names)
        cpu = (time.process_time() - t0) / rounds
        size = (Path(tmp) / "n0000.jsonl").stat().st_size // rounds
    return cpu, size


def node(seconds: float, interval: float) -> tuple[float, int]:
    """(sampler CPU seconds per second, bytes per sample line) of the program run here."""
    with tempfile.TemporaryDirectory(prefix="hpcnet-burnin-node-") as tmp:
        state = LabState(tmp, "lab.yaml", nodes=[LabNode("node01", "198.18.0.11", 8500)])
        state.save()
        bin_dir = install_tools(state)
        env = {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "HPCNET_LAB_NODE": "node01",
            "HPCNET_LAB_STATE": tmp,
            "PYTHONPATH": str(bin_dir / PYLIB),
            "HPCNET_BURNIN_DIR": tmp,
            "HPCNET_BURNIN_DETACH": "setsid",
        }
        command = start_command("bench", 8, seconds, interval, 600, 8192)
        subprocess.run(["bash", "-c", command], env=env, check=True, timeout=60)
        samples = Path(tmp) / "bench" / "samples.jsonl"
        end = time.monotonic() + seconds + 120
        while '"end"' not in samples.read_text()[-200:] and time.monotonic() < end:
            time.sleep(1.0)
        text = samples.read_text()
        lines = [x for x in text.splitlines() if '"gpu"' in x]
        end = json.loads(text.splitlines()[-1])
        own = end["cpu_s"] + end.get("tools_s", 0.0)  # the tools it ran: nvidia-smi, dmesg
        return own / end["t"], sum(map(len, lines)) // max(1, len(lines)) + 1


def ssh(nodes: int, rounds: int) -> float:
    """Controller CPU seconds per node per collection round over the lab's SSH."""
    from pytest_hpcnet.inventory.loader import load_inventory
    from pytest_hpcnet.lab import cluster as lab
    from pytest_hpcnet.transport.fanout import Transport

    state_dir = Path(tempfile.mkdtemp(prefix="hpcnet-burnin-ssh-"))
    inventory = state_dir / "lab.yaml"
    chunk = "\n".join(one_round()) + "\n"
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            state = lab.up(nodes, 8500, state_dir, inventory)
            for n in state.nodes:  # each node's run folder, one round of lines in it
                folder = state_dir / "nodes" / n.name / "burnin" / "bench"
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "samples.jsonl").write_text(chunk)
            transport = Transport(load_inventory(inventory))
            transport.run_on_all("true")  # the connections, opened once per session
            t0 = time.process_time()
            for _ in range(rounds):
                results = transport.run_on_all(lambda node: collect_command("bench", 0))
                bad = [r.failure for r in results.values() if not r.ok or HEADER not in r.stdout]
                if bad:
                    raise SystemExit(f"collection failed on the lab: {bad[0]}")
            cpu = (time.process_time() - t0) / rounds / nodes
            transport.close()
        finally:
            lab.down(state_dir)
            shutil.rmtree(state_dir, ignore_errors=True)
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--node-seconds", type=float, default=30.0)
    parser.add_argument("--intervals", type=float, nargs="+", default=[1.0, 30.0])
    parser.add_argument("--ssh-nodes", type=int, default=0)
    parser.add_argument("--ssh-rounds", type=int, default=10)
    args = parser.parse_args()
    if args.ssh_nodes:
        per_node = ssh(args.ssh_nodes, args.ssh_rounds)
        print(
            f"controller over SSH: {args.ssh_nodes} lab nodes, {args.ssh_rounds} rounds: "
            f"{per_node * 1000:.2f} ms CPU a node a round; at 1,024 nodes "
            f"{per_node * 1024:.2f} s a round, {100 * per_node * 1024 / 30:.1f} % of one core "
            "at a 30 s interval"
        )
    cpu, per_round = controller(args.nodes, args.rounds, 30.0)
    print(
        f"controller: {args.nodes} nodes x 8 GPUs: {cpu * 1000:.0f} ms CPU a round, "
        f"{100 * cpu / 30:.2f} % of one core at a 30 s interval (SSH not counted)"
    )
    for interval in args.intervals:
        seconds = max(args.node_seconds, interval * 3)
        share, line = node(seconds, interval)
        print(
            f"node sampler and its tools: {100 * share:.2f} % of one core at a {interval:g} s "
            "interval "
            f"({seconds:g} s, 8 GPUs), {line} bytes a line"
        )
    hourly = per_round * 3600 / 30
    print(
        f"evidence: {per_round} bytes a node a round, {hourly / 1e6:.3f} MB a node-hour "
        f"(8 GPUs, 2 ERIs, 30 s); 24 h of 1,024 nodes: {hourly * 24 * 1024 / 1e9:.1f} GB"
    )


if __name__ == "__main__":
    sys.exit(main())
