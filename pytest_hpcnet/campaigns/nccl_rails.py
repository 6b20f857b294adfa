"""Each ERI's rail alone: all_reduce_perf across every reachable node with NCCL told to use
one ERI (`NCCL_IB_HCA==erdma_i`) and the GPUs nearest it in each node's `nvidia-smi topo
-m` (`CUDA_VISIBLE_DEVICES`), one run per ERI index, so one slow rail is named, not averaged
away by the other ERIs' channels. A rail that fails is bisected as the all-reduce is: that
rail alone on halves of the nodes until one node is left to blame (`node07 erdma_1`).

Only where every node has at least two ERIs (with one, the all-reduce is its rail). The runs
use the all-reduce's launcher and arguments with `NCCL_DEBUG=WARN`: the rail's table only.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from pytest_hpcnet.campaigns.bisection import Bisection, bisect, runs_needed
from pytest_hpcnet.campaigns.launch import expected_run, launch_command
from pytest_hpcnet.campaigns.nccl import NcclCampaign
from pytest_hpcnet.campaigns.progress import phase
from pytest_hpcnet.campaigns.recorder import Recorder
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.gpu_topo import GPU_TOPO, parse_topo
from pytest_hpcnet.probes.nccl import NcclExpected, NcclResult, parse_nccl
from pytest_hpcnet.probes.nccl_debug import split_nccl_log
from pytest_hpcnet.transport.fanout import CommandResult


@dataclass(frozen=True)
class RailRun:
    """One ERI's rail across the nodes: what was launched, its result, the GPUs pinned (by
    node; empty where `topo -m` was not read) or why it did not run."""

    device: str
    result: NcclResult | None = None
    launch: CommandResult | None = None
    launched: NcclExpected | None = None
    gpus: tuple[int, ...] = ()
    problem: str | None = None


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


class RailCampaign:
    """Each ERI's rail run and its bisection, each run once and cached."""

    def __init__(self, nccl: NcclCampaign):
        self.nccl = nccl
        self.facts = nccl.facts
        self.inventory = nccl.inventory
        self._runs: dict[str, RailRun] | None = None
        self._bisections: dict[str, Bisection] = {}
        self._lock = threading.Lock()

    def devices(self) -> list[str]:
        """The rails: the ERIs NCCL uses that every reachable node has, where each has at
        least two (else none)."""
        nodes = self.facts.reachable_nodes()
        lists = [self.nccl.ib_devices(n.name) for n in nodes]
        if not lists or min(len(d) for d in lists) < 2:
            return []
        return [d for d in lists[0] if all(d in other for other in lists[1:])]

    def runs(self) -> dict[str, RailRun]:
        """Every rail in turn across every reachable node (once)."""
        with self._lock:
            if self._runs is None:
                nodes = self.facts.reachable_nodes()
                self._runs = {}
                for device in self.devices():
                    what = f"NCCL all_reduce_perf on rail {device} ({len(nodes)} nodes)"
                    with phase(self.facts.progress, what) as outcome:
                        done = self.launch(nodes, device)
                        self._runs[device] = done
                        ok = done.result is not None and done.result.ok
                        outcome.text = "finished" if ok else (done.problem or "not ok")
            return self._runs

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

    def launch(self, nodes: list[Node], device: str) -> RailRun:
        """all_reduce_perf across `nodes` on `device` alone, with the GPUs nearest it."""
        gpus, problem = self.gpus(nodes, device)
        if problem:
            return RailRun(device, problem=problem)
        settings = self.inventory.benchmarks.nccl
        env = self.nccl.env(nodes) | {"NCCL_IB_HCA": f"={device}", "NCCL_DEBUG": "WARN"}
        update: dict[str, object] = {"env": env}
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))
            update["gpus_per_node"] = min(settings.gpus_per_node, len(gpus))
        settings = settings.model_copy(update=update)
        names = [n.name for n in nodes]
        command = launch_command(settings, [n.host for n in nodes], names)
        done = self.facts.transport.run(names[0], command, settings.timeout_s)
        launched = expected_run(settings, len(nodes), self.nccl.names_of(nodes))
        _, text = split_nccl_log(done.stderr + "\n" + done.stdout)
        return RailRun(device, parse_nccl(text, launched), done, launched, gpus)

    def bisection(self, device: str, passes, recorder: Recorder | None = None) -> Bisection:
        """The rail alone on halves of the reachable nodes until one node is left to blame
        (once per rail); `passes(run)` is the requirement's judge of a rail run."""
        with self._lock:
            if device not in self._bisections:
                self._bisections[device] = self._bisect(device, passes, recorder)
            return self._bisections[device]

    def _bisect(self, device: str, passes, recorder: Recorder | None) -> Bisection:
        nodes = {n.name: n for n in self.facts.reachable_nodes()}
        budget = self.inventory.benchmarks.nccl.bisect_max_runs
        if budget == 0:
            return Bisection(reason="off (benchmarks.nccl.bisect_max_runs: 0)")

        def trial(names: list[str]) -> bool:
            what = f"rail {device} bisection on {len(names)} nodes"
            with phase(self.facts.progress, what) as outcome:
                done = self.launch([nodes[n] for n in names], device)
                if recorder is not None and done.launch is not None:
                    recorder.command(done.launch)
                passed = passes(done)
                outcome.text = "passes" if passed else "fails"
            return passed

        names = list(nodes)
        return bisect(names, trial, budget or runs_needed(len(names)))
