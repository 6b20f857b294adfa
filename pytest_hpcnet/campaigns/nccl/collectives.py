"""The collectives phase: all_gather_perf, reduce_scatter_perf, alltoall_perf and sendrecv_perf
across every reachable node in one phase, each judged as its own requirement.

The selected binaries (`benchmarks.nccl.collectives.run`) run in turn from the launch node,
each through the inventory's launcher (mpirun with its hostfile, srun in the job's
allocation, or the template) between markers that frame its output (`probes.
nccl_collectives`). A launcher per binary, not one `mpirun sh -c '...'`: an MPI process
cannot be restarted under a running job, and each binary is its own MPI program. Every
node's RDMA counters are read before the first launch and after each, so each collective's
byte-counter proof is its own (one short read of every node between two launches). Each
launch has its own `NCCL_DEBUG_FILE`, read back from every node once the phase is over, so
each collective's transport proof is its own. The message range is `benchmarks.nccl.
collectives.args`, else the all-reduce's (`benchmarks.nccl.args`). A collective that fails
is bisected as the all-reduce is: that collective alone on halves of the nodes until one
node is left to blame.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from dataclasses import dataclass

from pytest_hpcnet.campaigns.counters import CounterWatch, counters_command
from pytest_hpcnet.campaigns.nccl.bisection import Bisection, bisect, runs_needed
from pytest_hpcnet.campaigns.nccl.campaign import NcclCampaign
from pytest_hpcnet.campaigns.nccl.launch import expected_run, launch_command
from pytest_hpcnet.campaigns.nccl.output import silent_nodes
from pytest_hpcnet.campaigns.nccl.paths import PathCampaign
from pytest_hpcnet.campaigns.progress import phase
from pytest_hpcnet.campaigns.recorder import Recorder
from pytest_hpcnet.inventory.bench_settings import NcclSettings
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.counters import CounterDelta
from pytest_hpcnet.probes.nccl import NcclExpected, NcclResult, parse_nccl
from pytest_hpcnet.probes.nccl_collectives import (
    BY_KEY,
    Collective,
    Segment,
    debug_file,
    debug_read_command,
    sequence_command,
    sibling_binary,
    split_debug,
    split_sequence,
)
from pytest_hpcnet.probes.nccl_debug import NcclNetLog, parse_nccl_debug, split_nccl_log
from pytest_hpcnet.requirements.nccl_collectives import collective_passes
from pytest_hpcnet.transport.fanout import CommandResult, NodeUnreachable


@dataclass(frozen=True)
class CollectiveRun:
    """One collective of the phase: its result, its part of the launch, what was launched,
    and NCCL's INFO lines of its own launch (parsed, and as an evidence artefact)."""

    collective: Collective
    result: NcclResult
    launch: CommandResult
    launched: NcclExpected
    log: NcclNetLog
    info: CommandResult
    traffic: dict[str, CounterDelta] | None = None
    """Each node's counters moved during this launch alone (None: not read around it)."""
    counter_reads: dict[str, tuple[CommandResult, ...]] = dataclasses.field(default_factory=dict)
    """Each node's counter reads before and after the launch (evidence)."""


@dataclass(frozen=True)
class CollectivesPhase:
    """The whole phase: each collective's run by key, the launch node's commands, the
    phase's wall time (the counter reads between the launches included)."""

    runs: dict[str, CollectiveRun]
    launches: tuple[CommandResult, ...]
    wall_s: float


class CollectivesCampaign:
    """The collectives phase and each collective's bisection, each run once and cached."""

    def __init__(self, nccl: NcclCampaign):
        self.nccl = nccl
        self.facts = nccl.facts
        self.inventory = nccl.inventory
        self._phase: CollectivesPhase | None = None
        self._bisections: dict[str, Bisection] = {}
        self._lock = threading.Lock()
        self.paths = PathCampaign(nccl)
        """all_reduce_perf pinned to one path: each ERI's rail, the network alone."""

    def selected(self) -> list[Collective]:
        """The collectives `benchmarks.nccl.collectives.run` selects, in nccl-tests' order."""
        wanted = self.inventory.benchmarks.nccl.collectives.run
        return [c for k, c in BY_KEY.items() if k in wanted]

    def settings(self, collective: Collective) -> NcclSettings:
        """The all-reduce's launch settings with this collective's binary and arguments."""
        settings = self.inventory.benchmarks.nccl
        update: dict[str, object] = {"binary": sibling_binary(settings.binary, collective.binary)}
        if settings.collectives.args is not None:
            update["args"] = settings.collectives.args
        return settings.model_copy(update=update)

    def phase(self) -> CollectivesPhase:
        """Every selected collective across every reachable node, in one launch (once)."""
        with self._lock:
            if self._phase is None:
                nodes = self.facts.reachable_nodes()
                if not nodes:
                    raise NodeUnreachable("cluster", "no node reachable to launch NCCL from")
                names = ", ".join(c.binary for c in self.selected())
                what = f"NCCL collectives ({names}) on {len(nodes)} nodes"
                with phase(self.facts.progress, what) as outcome:
                    self._phase = self.launch(nodes, self.selected())
                    failed = [k for k, r in self._phase.runs.items() if not r.result.ok]
                    outcome.text = f"not ok: {', '.join(failed)}" if failed else "finished"
            return self._phase

    def run(self, key: str, recorder: Recorder | None = None) -> CollectiveRun:
        """One collective's run of the phase; its launch and INFO lines go to `recorder`."""
        done = self.phase()
        if key not in done.runs:
            raise KeyError(f"{key} is not in benchmarks.nccl.collectives.run")
        found = done.runs[key]
        if recorder is not None:
            recorder.command(found.launch)
            recorder.command(found.info)
        return found

    def launch(
        self, nodes: list[Node], collectives: list[Collective], counted: bool = True
    ) -> CollectivesPhase:
        """`collectives` in turn across `nodes`, launched from the first, each its own command
        there; `counted`: every node's counters read before the first launch and after each,
        so each collective's traffic is its own (the bisection's trials skip them)."""
        base = f"/tmp/hpcnet-nccl-{secrets.token_hex(6)}"
        env = self.nccl.env(nodes)
        hosts, names = [n.host for n in nodes], [n.name for n in nodes]
        aliases = self.nccl.names_of(nodes)
        every = aliases or [(n.name, str(n.host)) for n in nodes]
        timeout = self.inventory.benchmarks.nccl.timeout_s
        started = time.monotonic()
        counters = self._counters(names) if counted else None
        done: list[tuple[Collective, str, NcclExpected, CommandResult, CounterWatch | None]] = []
        for c in collectives:
            settings = self.settings(c)
            run_env = env | {"NCCL_DEBUG_FILE": debug_file(base, c.binary)}
            settings = settings.model_copy(update={"env": run_env})
            command = launch_command(settings, hosts, names)
            expected = expected_run(settings, len(nodes), aliases)
            sequence = sequence_command([(c.binary, command)])
            whole = self.facts.transport.run(names[0], sequence, timeout)
            watch = None
            if counters is not None:
                watch = CounterWatch(self.facts, c.binary)
                watch.before_results, watch.after_results = counters, self._counters(names)
                counters = watch.after_results
            done.append((c, command, expected, whole, watch))
        wall = time.monotonic() - started
        reads = self.facts.transport.run_on_all(debug_read_command(base), names, timeout_s=30)
        runs = {}
        for c, command, expected, whole, watch in done:
            segment = split_sequence(whole.stdout + "\n" + whole.stderr).get(c.binary)
            part = _part(whole, c.binary, command, segment)
            printed, _ = split_nccl_log(part.stdout)
            logs = (split_debug(r.stdout).get(c.binary, "") for r in reads.values())
            info = printed + "".join(logs)
            artefact = dataclasses.replace(
                part, command=f"NCCL INFO log of: {command}", stdout=info, stderr=""
            )
            result = _parsed(part, expected, reads, every)
            traffic = watch.deltas() if watch is not None else None
            evidence = {n: tuple(watch.commands(n)) for n in names} if watch is not None else {}
            runs[c.key] = CollectiveRun(
                c, result, part, expected, parse_nccl_debug(info), artefact, traffic, evidence
            )
        return CollectivesPhase(runs, tuple(d[3] for d in done), wall)

    def _counters(self, names: list[str]) -> dict[str, CommandResult]:
        """Every node's RDMA and NIC counters, now."""
        return self.facts.transport.run_on_all(lambda node: counters_command(), nodes=names)

    def bisection(self, key: str, recorder: Recorder | None = None) -> Bisection:
        """The collective alone on halves of the reachable nodes until one node is left to
        blame (once per collective); its trials' commands go to `recorder`."""
        with self._lock:
            if key not in self._bisections:
                self._bisections[key] = self._bisect(BY_KEY[key], recorder)
            return self._bisections[key]

    def _bisect(self, collective: Collective, recorder: Recorder | None) -> Bisection:
        nodes = {n.name: n for n in self.facts.reachable_nodes()}
        budget = self.inventory.benchmarks.nccl.bisect_max_runs
        if budget == 0:
            return Bisection(reason="off (benchmarks.nccl.bisect_max_runs: 0)")

        def trial(names: list[str]) -> bool:
            what = f"{collective.binary} bisection on {len(names)} nodes"
            with phase(self.facts.progress, what) as outcome:
                chosen = [nodes[n] for n in names]
                done = self.launch(chosen, [collective], counted=False).runs[collective.key]
                if recorder is not None:
                    recorder.command(done.launch)
                passed = collective_passes(done, self.inventory.expect)
                outcome.text = "passes" if passed else "fails"
            return passed

        names = list(nodes)
        return bisect(names, trial, budget or runs_needed(len(names)))


def _part(
    whole: CommandResult, binary: str, command: str, segment: Segment | None
) -> CommandResult:
    """The collective's part of the sequence as its own launch: its output, its exit status
    (None, with the sequence's timeout or lost node, when its end marker is missing)."""
    lost = segment is None or segment.exit_status is None
    return dataclasses.replace(
        whole,
        command=command,
        stdout=segment.text if segment is not None else "",
        stderr="" if segment is not None else f"{binary} did not start: {whole.failure}",
        exit_status=None if lost else segment.exit_status,
        timed_out=whole.timed_out and lost,
        unreachable=whole.unreachable if lost else None,
    )


def _parsed(
    part: CommandResult,
    launched: NcclExpected,
    reads: dict[str, CommandResult],
    every: list[tuple[str, ...]],
) -> NcclResult:
    """The collective's table, held to the run launched; nodes that stopped answering named."""
    _, table_text = split_nccl_log(part.stdout)
    parsed = parse_nccl(table_text, launched)
    if not part.stdout.strip() and part.stderr:
        parsed = dataclasses.replace(parsed, error=part.stderr)
    if not (part.ok and parsed.ok):
        silent = silent_nodes(every, part, reads, parsed)
        if silent:
            parsed = dataclasses.replace(parsed, silent_nodes=silent)
    return parsed
