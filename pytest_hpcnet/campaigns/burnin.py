"""The burn-in campaign: start it detached on every node once, then collect its samples
incrementally until it ends, keeping them in the run's evidence folder.

The controller holds no load: each node runs `probes/remote/burnin_program.py` by itself and stops
at the end or when the heartbeat (touched at each collection) goes stale. Each collection is
one command per node (`Transport.run_on_all`: one connection per node, bounded fan-out and
time) reading from the byte offset the evidence folder already holds, so a controller that
stops and is resumed (`--hpcnet-burnin-resume RUN`) re-attaches without restarting the load
and without losing or repeating a sample. A node that stops answering for longer than the
heartbeat bound is named with the time it was last seen; the others go on.

Evidence (`<run>/burnin/`): `run.json` (run id, duration, interval, start) and one
`NODE.jsonl` per node, its samples verbatim (one line per GPU per interval, ~250 bytes).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_hpcnet.campaigns.burnin_network import NetworkRounds, read_network
from pytest_hpcnet.campaigns.facts import FactsCampaign
from pytest_hpcnet.campaigns.gpu_load import ENGINE, gpu_facts
from pytest_hpcnet.campaigns.progress import phase as progress_phase
from pytest_hpcnet.campaigns.progress import silent
from pytest_hpcnet.inventory.burnin_settings import BurninSettings
from pytest_hpcnet.probes.burnin import collect_command, parse_collect, parse_lines, start_command
from pytest_hpcnet.requirements.burnin import INSTALL_TORCH, NodeBurnin
from pytest_hpcnet.requirements.burnin_network import NetworkBurnin

EVIDENCE = "burnin"
RUN_FILE = "run.json"
START_TIMEOUT_S = 120.0
COLLECT_TIMEOUT_S = 60.0
NO_DURATION = "no burn-in duration asked"
SET_DURATION = "give --hpcnet-burnin DURATION (24h) or burnin.duration in the inventory"
GRACE_INTERVALS = 1
"""Intervals the controller waits past the duration for each node's last line."""


@dataclass(frozen=True)
class BurninPlan:
    """A burn-in run: its id (the node folder's name), duration, interval, heartbeat bound,
    GEMM size, and when it started (epoch)."""

    run: str
    seconds: float
    interval: float
    heartbeat: float
    size: int
    started_at: float
    gpus: dict[str, int]

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=1, sort_keys=True)


class BurninCampaign:
    """One burn-in of every node with GPUs and PyTorch, run (or resumed) on first use."""

    def __init__(
        self,
        facts: FactsCampaign,
        folder: Path,
        run: str,
        seconds: float | None,
        settings: BurninSettings,
        resume_from: Path | None = None,
        max_collections: int | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.facts = facts
        self.folder = folder
        self.run = run
        self.seconds = seconds or settings.duration or 0.0
        self.settings = settings
        self.resume_from = resume_from
        self.max_collections = max_collections
        """Stop collecting after this many rounds (a controller that dies mid-run)."""
        self.clock, self.sleep = clock, sleep
        self.progress = getattr(facts, "progress", silent)
        self.offsets: dict[str, int] = {}
        self.last_seen: dict[str, float] = {}
        self.lost: dict[str, str] = {}
        self.started: dict[str, str] = {}
        self.collections = 0
        self._found: dict[str, NodeBurnin] | None = None
        self._lock = threading.Lock()

    def found(self) -> dict[str, NodeBurnin]:
        """{node: its burn-in} for every node of the inventory (run once)."""
        with self._lock:
            if self._found is None:
                self._found = self._run()
            return self._found

    # -- planning and starting -------------------------------------------------------------

    def _planned(self) -> tuple[dict[str, int], dict[str, NodeBurnin]]:
        gathered = self.facts.gather()
        gpus, skipped = {}, {}
        for node in self.facts.inventory.nodes:
            engines, query, why = gpu_facts(gathered[node.name])
            if engines is None or query is None:
                skipped[node.name] = NodeBurnin(node.name, self.seconds, missing=why)
            elif not engines.has(ENGINE):
                why = f"python3 has no {ENGINE}"
                skipped[node.name] = NodeBurnin(
                    node.name, self.seconds, missing=why, fix=INSTALL_TORCH
                )
            elif not query.gpus:
                skipped[node.name] = NodeBurnin(
                    node.name, self.seconds, missing="nvidia-smi lists no GPU"
                )
            else:
                gpus[node.name] = len(query.gpus)
        return gpus, skipped

    def _start(self, gpus: dict[str, int]) -> BurninPlan:
        s = self.settings
        plan = BurninPlan(
            self.run, self.seconds, s.interval, s.heartbeat, s.size, self.clock(), gpus
        )
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / RUN_FILE).write_text(plan.to_json())
        results = self.facts.transport.run_on_all(
            lambda node: start_command(
                self.run, gpus[node.name], plan.seconds, plan.interval, plan.heartbeat, plan.size
            ),
            nodes=list(gpus),
            timeout_s=START_TIMEOUT_S,
            together=True,
        )
        for name, result in results.items():
            if result.unreachable or not result.ok:
                self.lost[name] = result.failure or "did not start"
                continue
            words = result.stdout.split()
            self.started[name] = words[-1] if words else "?"
            self.last_seen[name] = self.clock()
        return plan

    def _resume(self) -> BurninPlan:
        """Copy the earlier controller's evidence and re-attach from its offsets."""
        assert self.resume_from is not None
        if self.resume_from != self.folder:
            shutil.copytree(self.resume_from, self.folder, dirs_exist_ok=True)
        data = json.loads((self.folder / RUN_FILE).read_text())
        plan = BurninPlan(**data)
        self.run = plan.run
        self.seconds = plan.seconds
        for name in plan.gpus:
            path = self.folder / f"{name}.jsonl"
            self.offsets[name] = path.stat().st_size if path.exists() else 0
            self.started[name] = "already"
            self.last_seen[name] = path.stat().st_mtime if path.exists() else plan.started_at
        return plan

    # -- collecting ------------------------------------------------------------------------

    def collect(self, plan: BurninPlan, nodes: list[str], final: bool = False) -> set[str]:
        """One collection round on `nodes`; the nodes whose burn-in has ended (`final`: the
        round after the end, where a node that does not answer is lost)."""
        results = self.facts.transport.run_on_all(
            lambda node: collect_command(plan.run, self.offsets.get(node.name, 0)),
            nodes=nodes,
            timeout_s=min(COLLECT_TIMEOUT_S, max(10.0, plan.interval * 2)),
        )
        self.collections += 1
        ended: set[str] = set()
        now = self.clock()
        for name, result in results.items():
            if result.unreachable or result.timed_out:
                if final or now - self.last_seen.get(name, now) > plan.heartbeat:
                    self.lost[name] = result.failure or "no answer"
                    ended.add(name)
                continue
            got = parse_collect(result.stdout)
            if got.missing or got.error:
                self.lost[name] = "no burn-in folder on the node" if got.missing else got.error
                ended.add(name)
                continue
            self.last_seen[name] = now
            self.lost.pop(name, None)
            if got.lines:
                with open(self.folder / f"{name}.jsonl", "a") as out:
                    out.write("\n".join(got.lines) + "\n")
                self.offsets[name] = self.offsets.get(name, 0) + got.consumed
                if any('"end"' in line for line in got.lines[-2:]):
                    ended.add(name)
        return ended

    def _run(self) -> dict[str, NodeBurnin]:
        if not self.seconds and self.resume_from is None:
            return {
                n.name: NodeBurnin(n.name, 0.0, missing=NO_DURATION, fix=SET_DURATION)
                for n in self.facts.inventory.nodes
            }
        gpus, skipped = self._planned()
        if self.resume_from is not None:
            plan = self._resume()
        elif gpus:
            plan = self._start(gpus)
        else:
            return skipped
        what = (
            f"burn-in {plan.run} on {len(plan.gpus)} nodes, {sum(plan.gpus.values())} GPUs, "
            f"{plan.seconds:g} s (samples every {plan.interval:g} s)"
        )
        network = NetworkRounds.of(self, plan)  # its own thread: never delays a collection
        with network, progress_phase(self.progress, what) as outcome:
            active = [n for n in plan.gpus if n not in self.lost]
            deadline = plan.started_at + plan.seconds + plan.interval * GRACE_INTERVALS
            while active and self.clock() < deadline:
                if self.max_collections is not None and self.collections >= self.max_collections:
                    break
                self.sleep(min(plan.interval, max(0.0, deadline - self.clock())))
                ended = self.collect(plan, active)
                active = [n for n in active if n not in ended]
            if active and self.clock() >= deadline:  # what the nodes wrote last, or lost
                ended = self.collect(plan, active, final=True)
                active = [n for n in active if n not in ended]
            lost = ", ".join(sorted(self.lost)) or "none"
            outcome.text = (
                f"{self.collections} collections, still running {len(active)}, lost {lost}"
            )
        return {**skipped, **{n: self.node_result(n, plan) for n in plan.gpus}}

    def network(self) -> NetworkBurnin:
        """The network rounds run during the burn-in (`campaigns/burnin_network`)."""
        self.found()
        return read_network(self.folder)

    def node_result(self, name: str, plan: BurninPlan) -> NodeBurnin:
        path = self.folder / f"{name}.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return NodeBurnin(
            name,
            plan.seconds,
            parse_lines(lines),
            started=self.started.get(name, ""),
            lost=self.lost.get(name, ""),
            last_seen=self.last_seen.get(name),
            gpus=plan.gpus.get(name, 0),
        )
