"""all_reduce_perf across every reachable node pinned to one path, so a slow path is named,
not averaged away by the others:

- each ERI's rail: NCCL told to use one ERI (`NCCL_IB_HCA==erdma_i`) with the GPUs nearest
  it in each node's `nvidia-smi topo -m` (`CUDA_VISIBLE_DEVICES`), one run per ERI, where
  every node has at least two ERIs (with one, the all-reduce is its rail);
- the network alone: `NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0`, so the
  traffic between a node's own GPUs crosses its ERIs too.

Each is launched as the all-reduce is (`NcclCampaign.run_launch`: its launcher, arguments,
JSON result and debug files) with the path's environment added. A
path that fails is bisected as the all-reduce is: that path alone on halves of the nodes
until one node is left to blame (`node07 erdma_1`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from pytest_hpcnet.campaigns.nccl.bisection import Bisection, bisect, runs_needed
from pytest_hpcnet.campaigns.nccl.campaign import NcclCampaign
from pytest_hpcnet.campaigns.nccl.launch import expected_run
from pytest_hpcnet.campaigns.progress import phase
from pytest_hpcnet.campaigns.recorder import Recorder
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.gpu_topo import GPU_TOPO, parse_topo
from pytest_hpcnet.probes.nccl import NcclExpected, NcclResult
from pytest_hpcnet.transport.fanout import CommandResult

NETWORK_ONLY = "network_only"
"""The path key of the network-only run."""
NETWORK_ONLY_ENV = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_NVLS_ENABLE": "0"}


@dataclass(frozen=True)
class PinnedRun:
    """One pinned run across the nodes: its path (`erdma_1`, `network_only`), what was
    launched, its result, the GPUs pinned (empty where `topo -m` was not read) or why it did
    not run."""

    path: str
    result: NcclResult | None = None
    launch: CommandResult | None = None
    launched: NcclExpected | None = None
    gpus: tuple[int, ...] = ()
    problem: str | None = None

    @property
    def ranks_per_node(self) -> int | None:
        """Ranks on each node of the run launched (None when it did not run)."""
        if self.launched is None or not self.launched.nodes or not self.launched.ranks:
            return None
        return self.launched.ranks // self.launched.nodes


def nearest_gpus(topo_text: str | None, device: str) -> tuple[int, ...] | None:
    """The GPUs whose nearest RDMA device in `nvidia-smi topo -m` is `device` (ascending);
    None when the matrix is not there or not readable."""
    if not topo_text:
        return None
    topo = parse_topo(topo_text)
    if topo.error or not topo.gpus:
        return None
    return tuple(
        int(row.device[3:])
        for row in topo.gpus
        if row.device[3:].isdigit() and device in topo.nearest_nics(row.device)
    )


class PathCampaign:
    """The rail runs, the network-only run and their bisections, each run once and cached."""

    def __init__(self, nccl: NcclCampaign):
        self.nccl = nccl
        self.facts = nccl.facts
        self.inventory = nccl.inventory
        self._runs: dict[str, PinnedRun] = {}
        self._bisections: dict[str, Bisection] = {}
        self._lock = threading.Lock()

    def rail_devices(self) -> list[str]:
        """The rails: the ERIs NCCL uses that every reachable node has, where each has at
        least two (else none)."""
        nodes = self.facts.reachable_nodes()
        lists = [self.nccl.ib_devices(n.name) for n in nodes]
        if not lists or min(len(d) for d in lists) < 2:
            return []
        return [d for d in lists[0] if all(d in other for other in lists[1:])]

    def rails(self) -> dict[str, PinnedRun]:
        """Every rail in turn across every reachable node (each once)."""
        return {d: self.run(d) for d in self.rail_devices()}

    def network_only(self) -> PinnedRun:
        """The network-only run across every reachable node (once)."""
        return self.run(NETWORK_ONLY)

    def run(self, path: str) -> PinnedRun:
        """One path's run across every reachable node (once)."""
        with self._lock:
            if path not in self._runs:
                nodes = self.facts.reachable_nodes()
                shown = "the network only" if path == NETWORK_ONLY else f"rail {path}"
                what = f"NCCL all_reduce_perf on {shown} ({len(nodes)} nodes)"
                with phase(self.facts.progress, what) as outcome:
                    done = self.launch(nodes, path)
                    self._runs[path] = done
                    ok = done.result is not None and done.result.ok
                    outcome.text = "finished" if ok else (done.problem or "not ok")
            return self._runs[path]

    def gpus(self, nodes: list[Node], device: str) -> tuple[tuple[int, ...], str | None]:
        """(the GPUs nearest `device`, one set for every node; why not, when they differ or
        a node has none); () with no problem where no node has a `topo -m` matrix."""
        found: dict[str, tuple[int, ...] | None] = {}
        for n in nodes:
            facts = self.facts.gather().get(n.name)
            found[n.name] = nearest_gpus(facts.whole(GPU_TOPO.name) if facts else None, device)
        known = {k: v for k, v in found.items() if v is not None}
        if not known:
            return (), None
        empty = [k for k, v in known.items() if not v]
        if empty:
            return (), f"no GPU near {device} in nvidia-smi topo -m on {', '.join(empty)}"
        sets = set(known.values())
        if len(sets) > 1:
            shown = "; ".join(f"{k}: {','.join(map(str, v))}" for k, v in known.items())
            return (), f"the GPUs nearest {device} differ between nodes ({shown})"
        return sets.pop(), None

    def launch(self, nodes: list[Node], path: str) -> PinnedRun:
        """all_reduce_perf across `nodes` on `path`: one ERI with the GPUs nearest it, or the
        network alone (the all-reduce's launch, JSON result and debug files: `NcclCampaign.
        run_launch`)."""
        settings = self.inventory.benchmarks.nccl
        pin: dict[str, str] = {}
        ranks: int | None = None
        gpus: tuple[int, ...] = ()
        if path == NETWORK_ONLY:
            pin |= NETWORK_ONLY_ENV
        else:
            gpus, problem = self.gpus(nodes, path)
            if problem:
                return PinnedRun(path, problem=problem)
            pin["NCCL_IB_HCA"] = f"={path}"
            if gpus:
                pin["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))
                ranks = min(settings.gpus_per_node, len(gpus))
        done = self.nccl.run_launch(nodes, pin, ranks)
        update = {"gpus_per_node": ranks} if ranks is not None else {}
        launched = expected_run(
            settings.model_copy(update=update), len(nodes), self.nccl.names_of(nodes)
        )
        return PinnedRun(path, done.result, done.run, launched, gpus)

    def bisection(
        self,
        path: str,
        passes: Callable[[PinnedRun], bool],
        recorder: Recorder | None = None,
    ) -> Bisection:
        """The path alone on halves of the reachable nodes until one node is left to blame
        (once per path); `passes(run)` is the requirement's judge of a run."""
        with self._lock:
            if path not in self._bisections:
                self._bisections[path] = self._bisect(path, passes, recorder)
            return self._bisections[path]

    def _bisect(
        self, path: str, passes: Callable[[PinnedRun], bool], recorder: Recorder | None
    ) -> Bisection:
        nodes = {n.name: n for n in self.facts.reachable_nodes()}
        budget = self.inventory.benchmarks.nccl.bisect_max_runs
        if budget == 0:
            return Bisection(reason="off (benchmarks.nccl.bisect_max_runs: 0)")

        def trial(names: list[str]) -> bool:
            what = f"{path} bisection on {len(names)} nodes"
            with phase(self.facts.progress, what) as outcome:
                done = self.launch([nodes[n] for n in names], path)
                if recorder is not None and done.launch is not None:
                    recorder.command(done.launch)
                passed = passes(done)
                outcome.text = "passes" if passed else "fails"
            return passed

        names = list(nodes)
        return bisect(names, trial, budget or runs_needed(len(names)))
