"""NCCL all_reduce_perf across the reachable nodes (once), and the bisection that follows a
failure the pair benchmarks do not explain. Both judge with the requirement's judge."""

from __future__ import annotations

import threading

from pytest_hpcnet.campaigns.bisection import Bisection, bisect, runs_needed
from pytest_hpcnet.campaigns.facts import FactsCampaign
from pytest_hpcnet.campaigns.launch import expected_run, launch_command
from pytest_hpcnet.campaigns.progress import phase
from pytest_hpcnet.campaigns.recorder import Recorder
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.nccl import NcclResult, parse_nccl
from pytest_hpcnet.requirements.judges import judge_nccl
from pytest_hpcnet.transport.fanout import CommandResult, NodeUnreachable


class NcclCampaign:
    """The whole-cluster all-reduce and its bisection, each run once and cached."""

    def __init__(self, facts: FactsCampaign):
        self.facts = facts
        self.inventory = facts.inventory
        self._run: tuple[NcclResult, CommandResult] | None = None
        self._bisection: Bisection | None = None
        self._lock = threading.Lock()

    def allreduce(self) -> tuple[NcclResult, CommandResult]:
        """all_reduce_perf across every reachable node, launched from the first (once)."""
        with self._lock:
            if self._run is None:
                settings = self.inventory.benchmarks.nccl
                nodes = self.facts.reachable_nodes()
                if not nodes:
                    raise NodeUnreachable("cluster", "no node reachable to launch NCCL from")
                what = f"NCCL all_reduce_perf on {len(nodes)} nodes ({settings.launcher})"
                with phase(self.facts.progress, what) as outcome:
                    self._run = self.launch(nodes)
                    result = self._run[1]
                    outcome.text = "finished" if result.ok else (result.failure or "failed")
            return self._run

    def launch(self, nodes: list[Node]) -> tuple[NcclResult, CommandResult]:
        """all_reduce_perf across `nodes`, launched from the first."""
        settings = self.inventory.benchmarks.nccl
        command = launch_command(settings, [n.host for n in nodes], [n.name for n in nodes])
        result = self.facts.transport.run(nodes[0].name, command, settings.timeout_s)
        expected = expected_run(settings, len(nodes))
        return parse_nccl(result.stdout + "\n" + result.stderr, expected), result

    def passes(self, result: NcclResult) -> bool:
        """One all_reduce_perf run meets the NCCL bounds: the requirement's judge."""
        return judge_nccl(result, self.inventory.expect).passed

    def bisection(self, recorder: Recorder | None = None) -> Bisection:
        """NCCL on halves of the reachable nodes until one node is left to blame (once);
        the trials' commands go to `recorder`."""
        with self._lock:
            if self._bisection is None:
                self._bisection = self._bisect(recorder)
            return self._bisection

    def _bisect(self, recorder: Recorder | None) -> Bisection:
        settings = self.inventory.benchmarks.nccl
        nodes = {n.name: n for n in self.facts.reachable_nodes()}
        budget = settings.bisect_max_runs
        if budget == 0:
            return Bisection(reason="off (benchmarks.nccl.bisect_max_runs: 0)")

        def trial(names: list[str]) -> bool:
            what = f"NCCL bisection on {len(names)} nodes ({names[0]} .. {names[-1]})"
            with phase(self.facts.progress, what) as outcome:
                parsed, result = self.launch([nodes[n] for n in names])
                if recorder is not None:
                    recorder.command(result)
                passed = self.passes(parsed)
                outcome.text = "passes" if passed else "fails"
            return passed

        names = list(nodes)
        return bisect(names, trial, budget or runs_needed(len(names)))
