"""The collectives phase: all_gather_perf, reduce_scatter_perf, alltoall_perf and sendrecv_perf
across every reachable node in one launch, each judged as its own requirement.

One command on the launch node runs the selected binaries in turn (`benchmarks.nccl.
collectives.run`), each through the inventory's launcher (mpirun with its hostfile, srun in
the job's allocation, or the template), between markers that split the output per
collective (`probes.nccl_collectives`). A launcher per binary, not one `mpirun sh -c '...'`:
an MPI process cannot be restarted under a running job, and each binary is its own MPI
program. Each launch has its own `NCCL_DEBUG_FILE`, read back from every node once the
sequence is over, so each collective's transport proof is its own. The message range is
`benchmarks.nccl.collectives.args`, else the all-reduce's (`benchmarks.nccl.args`). A
collective that fails is bisected as the all-reduce is: that collective alone on halves of
the nodes until one node is left to blame.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from dataclasses import dataclass

from pytest_hpcnet.campaigns.nccl.bisection import Bisection, bisect, runs_needed
from pytest_hpcnet.campaigns.nccl.campaign import NcclCampaign
from pytest_hpcnet.campaigns.nccl.launch import expected_run, launch_command
from pytest_hpcnet.campaigns.nccl.output import silent_nodes
from pytest_hpcnet.campaigns.progress import phase
from pytest_hpcnet.campaigns.recorder import Recorder
from pytest_hpcnet.inventory.bench_settings import NcclSettings
from pytest_hpcnet.inventory.models import Node
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


@dataclass(frozen=True)
class CollectivesPhase:
    """The whole phase: each collective's run by key, the launch, its wall time."""

    runs: dict[str, CollectiveRun]
    launch: CommandResult
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

    def launch(self, nodes: list[Node], collectives: list[Collective]) -> CollectivesPhase:
        """`collectives` in turn across `nodes`, launched from the first, in one command."""
        base = f"/tmp/hpcnet-nccl-{secrets.token_hex(6)}"
        env = self.nccl.env(nodes)
        hosts, names = [n.host for n in nodes], [n.name for n in nodes]
        aliases = self.nccl.names_of(nodes)
        launches, expected = [], {}
        for c in collectives:
            settings = self.settings(c)
            run_env = env | {"NCCL_DEBUG_FILE": debug_file(base, c.binary)}
            settings = settings.model_copy(update={"env": run_env})
            launches.append((c.binary, launch_command(settings, hosts, names)))
            expected[c.key] = expected_run(settings, len(nodes), aliases)
        timeout = self.inventory.benchmarks.nccl.timeout_s * max(1, len(collectives))
        started = time.monotonic()
        whole = self.facts.transport.run(names[0], sequence_command(launches), timeout)
        wall = time.monotonic() - started
        reads = self.facts.transport.run_on_all(debug_read_command(base), names, timeout_s=30)
        segments = split_sequence(whole.stdout + "\n" + whole.stderr)
        every = aliases or [(n.name, str(n.host)) for n in nodes]
        runs = {}
        for (binary, command), c in zip(launches, collectives, strict=True):
            part = _part(whole, binary, command, segments.get(binary))
            printed, _ = split_nccl_log(part.stdout)
            info = printed + "".join(split_debug(r.stdout).get(binary, "") for r in reads.values())
            artefact = dataclasses.replace(
                part, command=f"NCCL INFO log of: {command}", stdout=info, stderr=""
            )
            result = _parsed(part, expected[c.key], reads, every)
            runs[c.key] = CollectiveRun(
                c, result, part, expected[c.key], parse_nccl_debug(info), artefact
            )
        return CollectivesPhase(runs, whole, wall)

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
                done = self.launch([nodes[n] for n in names], [collective]).runs[collective.key]
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
