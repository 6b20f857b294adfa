"""NCCL all_reduce_perf across the reachable nodes (once), and the bisection that follows a
failure the pair benchmarks do not explain. Both judge with the requirement's judge.

NCCL runs with `NCCL_DEBUG=INFO` (subsystems INIT,NET): its INFO lines are split from the
results table (`split_nccl_log`) and kept as their own evidence, to tell whether NCCL
really used eRDMA (`NET/IB`) or fell back to sockets. The ERIs, the socket interface and
the GID selection are passed in the environment (issue 16); the inventory's
`benchmarks.nccl.env` wins over each. Device counters are read before and after the run.
"""

from __future__ import annotations

import dataclasses
import threading

from pytest_hpcnet.campaigns.bisection import Bisection, bisect, runs_needed
from pytest_hpcnet.campaigns.counters import CounterWatch
from pytest_hpcnet.campaigns.facts import FactsCampaign
from pytest_hpcnet.campaigns.launch import expected_run, launch_command
from pytest_hpcnet.campaigns.progress import phase
from pytest_hpcnet.campaigns.recorder import Recorder
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.nccl import NcclResult, parse_nccl
from pytest_hpcnet.probes.nccl_debug import NcclNetLog, parse_nccl_debug, split_nccl_log
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
        self._log: tuple[NcclNetLog, CommandResult] | None = None
        self.counters = CounterWatch(facts, "NCCL")
        """Device and NIC counters right before and after the all-reduce."""

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
                    self.counters.before()
                    try:
                        self._run = self.launch(nodes)
                    finally:
                        self.counters.after()
                    result = self._run[1]
                    info, _ = split_nccl_log(result.stdout + "\n" + result.stderr)
                    artefact = dataclasses.replace(
                        result,
                        command=f"NCCL INFO log of: {result.command}",
                        stdout=info,
                        stderr="",
                    )
                    self._log = (parse_nccl_debug(info), artefact)
                    outcome.text = "finished" if result.ok else (result.failure or "failed")
            return self._run

    def transport_log(self) -> tuple[NcclNetLog, CommandResult]:
        """The whole-cluster run's NCCL INFO lines, parsed, and as an evidence artefact."""
        self.allreduce()
        assert self._log is not None
        return self._log

    def env(self, nodes: list[Node]) -> dict[str, str]:
        """NCCL's environment for `nodes`: INFO logging, the ERIs (NCCL_IB_HCA), the socket
        interface, the GID selection and GDR; `benchmarks.nccl.env` overrides each."""
        env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
        devices = sorted({d for n in nodes for d in self.facts.eri_devices(n.name)})
        if devices:
            env["NCCL_IB_HCA"] = ",".join(devices)
        env["NCCL_SOCKET_IFNAME"] = nodes[0].interface
        indexes = {
            self.facts.gid_index(n.name, d) for n in nodes for d in self.facts.eri_devices(n.name)
        }
        if len(indexes) == 1 and None not in indexes:
            env["NCCL_IB_GID_INDEX"] = str(indexes.pop())
        elif devices:
            # the index differs per device (extra IPv6 addresses): NCCL picks the IPv4 one
            env |= {
                "NCCL_IB_GID_INDEX": "-1",
                "NCCL_IB_ADDR_FAMILY": "AF_INET",
                "NCCL_IB_ROCE_VERSION_NUM": "2",
            }
        if self.inventory.expect.erdma.gdr:
            env["NCCL_NET_GDR_LEVEL"] = "SYS"
        env |= dict(self.inventory.benchmarks.nccl.env)
        if env["NCCL_DEBUG"].upper() not in ("INFO", "TRACE"):
            env["NCCL_DEBUG"] = "INFO"  # the transport check reads NCCL's INFO lines
        return env

    def ib_devices(self, node: str) -> list[str]:
        """The node's ERIs NCCL is told to use (`NCCL_IB_HCA` prefixes when the inventory
        pins them; `^` exclusions are not applied)."""
        found = self.facts.eri_devices(node)
        hca = self.inventory.benchmarks.nccl.env.get("NCCL_IB_HCA", "")
        if not hca or hca.startswith("^"):
            return found
        prefixes = [p.lstrip("=").split(":")[0] for p in hca.split(",") if p]
        return [d for d in found if any(d.startswith(p) for p in prefixes)]

    def launch(self, nodes: list[Node]) -> tuple[NcclResult, CommandResult]:
        """all_reduce_perf across `nodes`, launched from the first; the table is parsed
        without NCCL's INFO lines."""
        settings = self.inventory.benchmarks.nccl
        settings = settings.model_copy(update={"env": self.env(nodes)})
        command = launch_command(settings, [n.host for n in nodes], [n.name for n in nodes])
        result = self.facts.transport.run(nodes[0].name, command, settings.timeout_s)
        expected = expected_run(settings, len(nodes))
        _, table = split_nccl_log(result.stdout + "\n" + result.stderr)
        return parse_nccl(table, expected), result

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
