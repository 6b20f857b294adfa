"""NCCL all_reduce_perf across the reachable nodes (once), and the bisection that follows a
failure the pair benchmarks do not explain. Both judge with the requirement's judge.

NCCL runs with `NCCL_DEBUG=INFO` (subsystems INIT,NET) and `NCCL_DEBUG_FILE` (one file per
process on its own node, read back and removed after the run): the INFO lines never enter
the stream that carries rank 0's table (mpirun forwards each rank's output in chunks, and a
block-buffered table row would be cut by other ranks' lines). They are kept as their own
evidence, to tell whether NCCL really used eRDMA (`NET/IB`) or fell back to sockets; any
INFO line still printed (a binary that ignores the file) is split from the table
(`split_nccl_log`). The ERIs, the socket interface and
the GID selection are passed in the environment; the inventory's
`benchmarks.nccl.env` wins over each. Device counters are read before and after the run.
The result comes from nccl-tests' JSON file (`-J`) when the binary offers it, else from the
table (`nccl_output`); the usage probe and the JSON file are kept as evidence.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from pytest_hpcnet.campaigns.counters import CounterWatch
from pytest_hpcnet.campaigns.facts import FactsCampaign
from pytest_hpcnet.campaigns.nccl import output as nccl_output
from pytest_hpcnet.campaigns.nccl.bisection import Bisection, bisect, runs_needed
from pytest_hpcnet.campaigns.nccl.launch import expected_run, launch_command
from pytest_hpcnet.campaigns.progress import phase
from pytest_hpcnet.campaigns.recorder import Recorder
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.nccl import NcclExpected, NcclResult, parse_nccl
from pytest_hpcnet.probes.nccl_debug import NcclNetLog, parse_nccl_debug, split_nccl_log
from pytest_hpcnet.requirements.judges import judge_nccl
from pytest_hpcnet.transport.fanout import CommandResult, NodeUnreachable


@dataclass(frozen=True)
class NcclLaunch:
    """One all_reduce_perf launch: the result, the launch command, the other commands as
    evidence, and NCCL's INFO lines (from the per-process debug files, and any printed)."""

    result: NcclResult
    run: CommandResult
    extras: tuple[CommandResult, ...]
    info: str = ""


class NcclCampaign:
    """The whole-cluster all-reduce and its bisection, each run once and cached."""

    def __init__(self, facts: FactsCampaign):
        self.facts = facts
        self.inventory = facts.inventory
        self._run: tuple[NcclResult, CommandResult] | None = None
        self._launched: NcclExpected | None = None
        self._bisection: Bisection | None = None
        self._lock = threading.Lock()
        self._log: tuple[NcclNetLog, CommandResult] | None = None
        self._json_offered: dict[str, CommandResult] = {}
        self._extras: tuple[CommandResult, ...] = ()
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
                self._launched = expected_run(settings, len(nodes), self.names_of(nodes))
                with phase(self.facts.progress, what) as outcome:
                    self.counters.before()
                    try:
                        done = self.run_launch(nodes)
                        self._run, self._extras = (done.result, done.run), done.extras
                    finally:
                        self.counters.after()
                    result, info = done.run, done.info
                    artefact = dataclasses.replace(
                        result,
                        command=f"NCCL INFO log of: {result.command}",
                        stdout=info,
                        stderr="",
                    )
                    self._log = (parse_nccl_debug(info), artefact)
                    outcome.text = "finished" if result.ok else (result.failure or "failed")
            return self._run

    def launched(self) -> NcclExpected:
        """What the whole-cluster run launched (ranks, nodes, max size, validation), which the
        judges hold its output to."""
        self.allreduce()
        assert self._launched is not None
        return self._launched

    def evidence(self) -> tuple[CommandResult, ...]:
        """Besides the launch itself: the `-h` usage probe and the JSON file read back."""
        self.allreduce()
        return self._extras

    def offers_json(self, node: str) -> tuple[bool, CommandResult]:
        """The installed binary on `node` lists `-J` in its usage text (asked once per node)."""
        if node not in self._json_offered:
            binary = self.inventory.benchmarks.nccl.binary
            command = nccl_output.help_command(binary)
            self._json_offered[node] = self.facts.transport.run(
                node, command, nccl_output.HELP_TIMEOUT_S
            )
        probe = self._json_offered[node]
        return probe.ok and nccl_output.offers_json(probe.stdout + probe.stderr), probe

    def names_of(self, nodes: list[Node]) -> list[tuple[str, ...]] | None:
        """Each node's names as the rank table may print them (inventory name, address,
        hostname); None when a hostname is not known (then the table's hosts are not
        checked by name)."""
        out = []
        for n in nodes:
            try:
                section = self.facts.gather()[n.name].whole("hostname")
            except (KeyError, AttributeError, TypeError):
                return None
            if not section or not section.strip():
                return None
            out.append(tuple(dict.fromkeys((n.name, str(n.host), section.strip()))))
        return out

    def hostname(self, node: str) -> str:
        """The node's own hostname (facts), as NCCL and nccl-tests print it."""
        section = self.facts.gather()[node].whole("hostname")
        return section.strip() if section else node

    def transport_log(self) -> tuple[NcclNetLog, CommandResult]:
        """The whole-cluster run's NCCL INFO lines, parsed, and as an evidence artefact."""
        self.allreduce()
        assert self._log is not None
        return self._log

    def env(self, nodes: list[Node]) -> dict[str, str]:
        """NCCL's environment for `nodes`: INFO logging, the ERIs (NCCL_IB_HCA), the socket
        interface, the GID selection and GDR; `benchmarks.nccl.env` overrides each."""
        env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
        devices = sorted({d for n in nodes for d in self.facts.listed_eris(n.name)})
        if devices:
            env["NCCL_IB_HCA"] = ",".join(devices)
        env["NCCL_SOCKET_IFNAME"] = nodes[0].interface
        indexes = {
            self.facts.gid_index(n.name, d) for n in nodes for d in self.facts.listed_eris(n.name)
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
        found = self.facts.listed_eris(node)
        hca = self.inventory.benchmarks.nccl.env.get("NCCL_IB_HCA", "")
        if not hca or hca.startswith("^"):
            return found
        prefixes = [p.lstrip("=").split(":")[0] for p in hca.split(",") if p]
        return [d for d in found if any(d.startswith(p) for p in prefixes)]

    def launch(
        self, nodes: list[Node]
    ) -> tuple[NcclResult, CommandResult, tuple[CommandResult, ...]]:
        """all_reduce_perf across `nodes`, launched from the first: (result, the launch, the
        other commands as evidence); `run_launch` with NCCL's INFO lines too."""
        done = self.run_launch(nodes)
        return done.result, done.run, done.extras

    def run_launch(
        self,
        nodes: list[Node],
        pin: Mapping[str, str] | None = None,
        gpus_per_node: int | None = None,
    ) -> NcclLaunch:
        """all_reduce_perf across `nodes`, launched from the first. The result is the JSON
        file's (`-J`, read back from rank 0's node) when the binary offers it, else the table
        without NCCL's INFO lines; the INFO lines are read back from every node's debug files.
        A run that did not finish names the nodes that stopped answering. `pin` is added to
        NCCL's environment and `gpus_per_node` replaces the ranks per node (a run pinned to
        one path: `campaigns.nccl_paths`)."""
        settings = self.inventory.benchmarks.nccl
        # NCCL_DEBUG_FILE is the campaign's, whatever `benchmarks.nccl.env` says: the
        # transport check reads these files, and INFO lines on stdout would cut the table
        debug_file = nccl_output.new_debug_file()
        env = self.env(nodes) | dict(pin or {}) | {"NCCL_DEBUG_FILE": debug_file}
        update: dict[str, object] = {"env": env}
        if gpus_per_node is not None:
            update["gpus_per_node"] = gpus_per_node
        settings = settings.model_copy(update=update)
        offered, probe = self.offers_json(nodes[0].name)
        path = nccl_output.new_path() if offered else None
        extra = ["-J", path] if path else []
        names = [n.name for n in nodes]
        command = launch_command(settings, [n.host for n in nodes], names, extra)
        result = self.facts.transport.run(nodes[0].name, command, settings.timeout_s)
        aliases = self.names_of(nodes)
        expected = expected_run(settings, len(nodes), aliases)
        reads = self._debug_files(names, debug_file)
        printed, text = split_nccl_log(result.stderr + "\n" + result.stdout)
        info = "".join(r.stdout + ("" if r.stdout.endswith("\n") else "\n") for r in reads.values()
                       if r.stdout)  # fmt: skip
        table = parse_nccl(text, expected)
        kept: tuple[CommandResult, ...] = (probe,)
        parsed = table
        if path is not None:
            wrote, why_not = nccl_output.written_path(text, path)
            read = None
            if wrote is not None:
                where = nccl_output.rank0_node(table, names, self.hostname)
                read_cmd = nccl_output.read_command(wrote)
                read = self.facts.transport.run(where, read_cmd, nccl_output.READ_TIMEOUT_S)
            parsed = nccl_output.from_json(read, path, why_not, expected, table)
            kept = (probe,) if read is None else (probe, nccl_output.evidence(read))
        if not (result.ok and parsed.ok):
            every = aliases or [(n.name, str(n.host)) for n in nodes]
            silent = nccl_output.silent_nodes(every, result, reads, table)
            if silent:
                parsed = dataclasses.replace(parsed, silent_nodes=silent)
        return NcclLaunch(parsed, result, kept, info + printed)

    def _debug_files(self, names: list[str], pattern: str) -> dict[str, CommandResult]:
        """Each node's NCCL debug files (printed and removed there), by node."""
        command = nccl_output.debug_read_command(pattern)
        return self.facts.transport.run_on_all(
            command, names, timeout_s=nccl_output.DEBUG_READ_TIMEOUT_S
        )

    def passes(
        self,
        result: NcclResult,
        launch: CommandResult | None = None,
        launched: NcclExpected | None = None,
    ) -> bool:
        """One all_reduce_perf run is complete, ok and meets the NCCL bounds: the
        requirement's judge."""
        return judge_nccl(result, self.inventory.expect, launch, launched).passed

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
                parsed, result, extras = self.launch([nodes[n] for n in names])
                if recorder is not None:
                    for done in (result, *extras):
                        recorder.command(done)
                chosen = [nodes[n] for n in names]
                launched = expected_run(settings, len(names), self.names_of(chosen))
                passed = self.passes(parsed, result, launched)
                outcome.text = "passes" if passed else "fails"
            return passed

        names = list(nodes)
        return bisect(names, trial, budget or runs_needed(len(names)))
