"""What a burn-in's network round costs the controller: its own CPU per round (pairing, the
perftest and NCCL commands, parsing, evidence), the commands it sends, the evidence a round
adds, and the judge over the rounds, at `--nodes` nodes of 1 or 2 ERIs.

    PYTHONPATH=. .venv/bin/python benchmarks/burnin_network.py --nodes 64 256 --eris 1 2

Every node answers at once (the unit tests' instant transport: a recorded `ib_write_bw`
client output, an all-reduce table of as many ranks), so the figure is the controller's own
work without SSH; each round's SSH commands are counted instead. One warm-up round, then
`--rounds` timed (`time.process_time`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_hpcnet.campaigns.burnin_network import NetworkRounds, read_network  # noqa: E402
from pytest_hpcnet.inventory.loader import load_inventory  # noqa: E402
from pytest_hpcnet.requirements.burnin_network import judge_burnin_network  # noqa: E402
from tests.unit.test_burnin_network import (  # noqa: E402
    INVENTORY,
    Clock,
    InstantFacts,
    InstantTransport,
    plan,
)


def bench(nodes: int, eris: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="hpcnet-burnin-net-") as tmp:
        folder = Path(tmp)
        names = [f"node{i:02d}" for i in range(1, nodes + 1)]
        listed = "".join(
            f"  - {{name: {n}, host: 10.{i // 250}.0.{i % 250 + 1}}}\n" for i, n in enumerate(names)
        )
        inventory = folder / "inv.yaml"
        inventory.write_text((INVENTORY % listed.rstrip("\n")).replace("eris: 2", f"eris: {eris}"))
        inv = load_inventory(inventory)
        transport = InstantTransport(names, ranks=nodes)
        facts = InstantFacts(inv, transport)
        facts.listed_eris = lambda name: [f"erdma_{i}" for i in range(eris)]
        day = plan(86400.0, nodes)
        day.gpus.clear()
        day.gpus.update(dict.fromkeys(names, 8))
        network = NetworkRounds(facts, folder, day, 600.0, {}, clock=Clock())
        network.write_plan()
        network.round(1)  # warm-up, not counted
        sent = transport.commands
        t0 = time.process_time()
        for k in range(2, rounds + 2):
            network.round(k)
        cpu = (time.process_time() - t0) / rounds
        commands = (transport.commands - sent) / rounds
        size = (folder / "network.jsonl").stat().st_size / (rounds + 1)
        t0 = time.process_time()
        found = read_network(folder)
        verdict = judge_burnin_network(found, inv.expect)
        judge = time.process_time() - t0
    return {
        "cpu_ms": cpu * 1000,
        "commands": commands,
        "kb": size / 1000,
        "judge_ms": judge * 1000,
        "iterations": len(verdict.measurements),
        "outcome": verdict.outcome,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--eris", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print("| nodes | ERIs | controller CPU a round | commands a round | evidence a round "
          "| judge (iterations) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for nodes in args.nodes:
        for eris in args.eris:
            r = bench(nodes, eris, args.rounds)
            print(
                f"| {nodes} | {eris} | {r['cpu_ms']:.0f} ms | {r['commands']:.0f} | "
                f"{r['kb']:.1f} kB | {r['judge_ms']:.0f} ms ({r['iterations']}, {r['outcome']}) |"
            )


if __name__ == "__main__":
    sys.exit(main())
