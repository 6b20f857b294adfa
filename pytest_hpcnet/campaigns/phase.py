"""The protocol of the phases beyond the facts (GPU load, DCGM, single-node NCCL, GPU pairs),
and the one runner behind `Cluster.phase`.

A phase plans each node from its facts, gives the command for a planned node and reads that
command's result; a node it does not plan gets its result at once (`Skip`: why, what to
install). The runner starts the command on every planned node together, once per session,
whatever `ssh.concurrency` says: a cluster median measured in batches would mix hot and cold
halls. Adding a phase is one class: `Cluster.phase(kind, ...)` runs it the first time a test asks.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from pytest_hpcnet.campaigns.facts import FactsCampaign, NodeFacts
from pytest_hpcnet.campaigns.progress import phase as progress_phase
from pytest_hpcnet.inventory.models import Inventory
from pytest_hpcnet.transport.fanout import CommandResult

P = TypeVar("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Skip(Generic[R]):
    """A node the phase does not run on, with its result known without running."""

    result: R


class Phase(Protocol[P, R]):
    """One phase: what it plans from the facts, each node's command, how it reads it."""

    reads: tuple[str, ...]
    """The facts sections it plans from (named in each check's evidence)."""

    def plan(self, facts: NodeFacts, inventory: Inventory) -> P | Skip[R]:
        """The node's plan, or its result where the phase cannot run on it."""

    def describe(self, plans: dict[str, P], inventory: Inventory) -> str:
        """The progress line of a run over `plans`."""

    def timeout_s(self, inventory: Inventory) -> float:
        """Each node's command's time limit."""

    def command(self, node: str, plan: P, inventory: Inventory) -> str:
        """The command run on a planned node."""

    def read(self, node: str, plan: P, result: CommandResult, inventory: Inventory) -> R:
        """The node's result from its command (an unreachable or timed-out one included)."""

    def versions(self, found: R) -> dict[str, str]:
        """Tool versions the result names, for the check's evidence."""


class PhaseRun(Generic[P, R]):
    """A phase run on every node of the inventory at once, on first use (then cached)."""

    def __init__(self, phase: Phase[P, R], facts: FactsCampaign):
        self.phase = phase
        self.facts = facts
        self.plans: dict[str, P] = {}
        self.results: dict[str, CommandResult] = {}
        self.wall_s: float | None = None
        self._found: dict[str, R] | None = None
        self._lock = threading.Lock()

    def found(self) -> dict[str, R]:
        """{node: its result} for every node of the inventory (the phase runs once)."""
        with self._lock:
            if self._found is None:
                self._found = self._run()
            return self._found

    def _run(self) -> dict[str, R]:
        inventory, gathered = self.facts.inventory, self.facts.gather()
        skipped: dict[str, R] = {}
        for node in inventory.nodes:
            planned = self.phase.plan(gathered[node.name], inventory)
            if isinstance(planned, Skip):
                skipped[node.name] = planned.result
            else:
                self.plans[node.name] = planned
        if self.plans:
            t0 = time.monotonic()
            what = self.phase.describe(self.plans, inventory)
            with progress_phase(self.facts.progress, what) as outcome:
                self.results = self.facts.transport.run_on_all(
                    lambda node: self.phase.command(node.name, self.plans[node.name], inventory),
                    nodes=list(self.plans),
                    timeout_s=self.phase.timeout_s(inventory),
                    together=True,
                )
                lost = sum(1 for r in self.results.values() if r.unreachable)
                outcome.text = f"{len(self.results) - lost} answered, {lost} lost"
            self.wall_s = time.monotonic() - t0
        read = self.phase.read
        return {
            n: skipped[n] if n in skipped else read(n, self.plans[n], self.results[n], inventory)
            for n in (node.name for node in inventory.nodes)
        }
