"""The `cluster` fixture's object: inventory, transport and the session's facts cache."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from pytest_hpcnet.bisection import Bisection, bisect, runs_needed
from pytest_hpcnet.collective import expected_run, launch_command
from pytest_hpcnet.facts import SectionOutput, facts_command, split_sections
from pytest_hpcnet.inventory import Inventory, Node
from pytest_hpcnet.pairs import FlowFacts, PairFacts, gather_pair_facts
from pytest_hpcnet.perftest_rounds import (
    PairRun,
    PerftestCampaign,
    bandwidth_ok,
    judge,
    latency_ok,
    options_for,
    planned_rounds,
    run_round,
)
from pytest_hpcnet.probes.links import parse_interfaces
from pytest_hpcnet.probes.metadata import MetadataFacts, parse_metadata
from pytest_hpcnet.probes.nccl import NcclResult, parse_nccl
from pytest_hpcnet.probes.rdma import match_devices
from pytest_hpcnet.probes.rdma_parsers import parse_ibv_devinfo
from pytest_hpcnet.probes.versions import parse_versions
from pytest_hpcnet.progress import Reporter, phase, silent
from pytest_hpcnet.recording import Check
from pytest_hpcnet.schedule import Pair, confirm_pairs, ring_pairs
from pytest_hpcnet.storage import FioRun, run_fio
from pytest_hpcnet.transport import CommandResult, NodeUnreachable, Transport


@dataclass(frozen=True)
class NodeFacts:
    """The sections gathered from one node in its single facts round trip."""

    node: str
    result: CommandResult
    sections: dict[str, SectionOutput]

    def text(self, section: str) -> str:
        """A section's output; fails the test with one line when the node did not give it."""
        out = self.sections.get(section)
        if out is None:
            pytest.fail(
                f"{self.node}: facts lack section {section!r} ({self._why()})", pytrace=False
            )
        return out.text

    def _why(self) -> str:
        return self.result.failure or "output cut short"


class Cluster:
    """What suites talk to: the inventory, commands on nodes, and cached facts."""

    def __init__(self, inventory: Inventory, transport: Transport, progress: Reporter = silent):
        self.inventory = inventory
        self.transport = transport
        self.progress = progress
        self.expect = inventory.expect
        self._facts: dict[str, NodeFacts] = {}
        self._facts_lock = threading.Lock()
        self.current_check: Check | None = None
        self._pairs: dict[tuple[str, str], PairFacts] | None = None
        self._flows: dict[str, FlowFacts] = {}
        self._campaigns: dict[str, PerftestCampaign] = {}
        self._nccl: tuple[NcclResult, CommandResult] | None = None
        self._bisection: Bisection | None = None
        self._fio: dict[str, FioRun] | None = None

    @property
    def nodes(self) -> list[Node]:
        return self.inventory.nodes

    def _record(self, result: CommandResult) -> None:
        if self.current_check is not None:
            self.current_check.command(result)
        if result.unreachable:
            raise NodeUnreachable(result.node, result.unreachable)

    def require_reachable(self, node: Node) -> None:
        """End the current test at once, with the recorded reason, if `node` is unreachable."""
        reason = self.transport.unreachable().get(node.name)
        if reason:
            if self.current_check is not None:
                self.current_check.unreachable[node.name] = reason
            raise NodeUnreachable(node.name, reason)

    def run(self, node: Node, command: str, timeout_s: float | None = None) -> CommandResult:
        """Run a command on a node, recorded for the current check; unreachable ends the test."""
        self.require_reachable(node)
        result = self.transport.run(node.name, command, timeout_s)
        self._record(result)
        return result

    def gather_facts(self) -> dict[str, NodeFacts]:
        """Gather every node's facts in parallel, once per session."""
        with self._facts_lock:
            if not self._facts:
                with phase(self.progress, f"facts from {len(self.nodes)} nodes") as outcome:
                    results = self.transport.run_on_all(
                        lambda node: facts_command(node, self.expect)
                    )
                    down = sum(1 for r in results.values() if r.unreachable)
                    outcome.text = f"{len(results) - down} answered, {down} unreachable"
                self._facts = {
                    name: NodeFacts(name, result, split_sections(result.stdout))
                    for name, result in results.items()
                }
            return self._facts

    def facts(self, node: Node) -> NodeFacts:
        """One node's facts (gathered for all nodes on first use); unreachable fails fast."""
        facts = self.gather_facts()[node.name]
        self._record(facts.result)
        versions = facts.sections.get("versions")
        if self.current_check is not None and versions is not None:
            self.current_check.tool_versions.update(parse_versions(versions.text))
        return facts

    def data_address(self, name: str) -> str | None:
        """The node's IPv4 address on its data-plane interface (from its facts)."""
        facts = self.gather_facts()[name]
        out = facts.sections.get("addr")
        iface = parse_interfaces(out.text).get(self.inventory.node(name).interface) if out else None
        addresses = iface.ipv4() if iface else ()
        return addresses[0] if addresses else None

    def ring(self) -> list[tuple[str, str]]:
        """The pairs every pair check covers: each node to the next around the ring."""
        return [(p.a, p.b) for p in ring_pairs([n.name for n in self.nodes])]

    def _gather_pairs(self) -> None:
        with self._facts_lock:
            if self._pairs is not None:
                return
        self.gather_facts()
        addresses = {n.name: a for n in self.nodes if (a := self.data_address(n.name))}
        ring = self.ring()
        with phase(self.progress, f"pair probes on {len(ring)} pairs") as outcome:
            pairs, flows = gather_pair_facts(
                self.transport, {n.name: n for n in self.nodes}, addresses, ring, self.expect
            )
            outcome.text = f"{len(pairs)} pairs and {len(flows)} ACL flows probed"
        with self._facts_lock:
            self._pairs, self._flows = pairs, flows

    def pair_facts(self, source: Node, target: Node) -> PairFacts:
        """What `source` saw of `target` (gathered for all pairs on first use)."""
        self.require_reachable(source)
        self.require_reachable(target)
        self._gather_pairs()
        facts = self._pairs.get((source.name, target.name)) if self._pairs else None
        if facts is None:
            reason = "no data-plane address" if not self.data_address(target.name) else "not probed"
            pytest.fail(
                f"{source.name}->{target.name}: pair not measured ({reason})", pytrace=False
            )
        for result in facts.commands:
            self._record(result)
        return facts

    def flow_facts(self, flow_id: str) -> FlowFacts | None:
        """The outcome of one inventory ACL flow, or None when it could not be tried."""
        self._gather_pairs()
        facts = self._flows.get(flow_id)
        if facts is not None:
            for result in facts.commands:
                self._record(result)
        return facts

    def rdma_device(self, name: str) -> str | None:
        """The node's first RDMA device matching its expected glob (perftest's `-d`)."""
        node = self.inventory.node(name)
        out = self.gather_facts()[name].sections.get("ibv_devinfo")
        if out is None:
            return None
        glob = node.rdma.device_glob or self.expect.rdma.device_glob
        matching = match_devices(parse_ibv_devinfo(out.text), glob)
        return matching[0].name if matching else None

    def pair_passes(self, tool: str):
        """The pass criterion of one perftest tool, from the expectations."""
        if tool.endswith("_lat"):
            lat = self.expect.ib_write_lat
            return lambda run: latency_ok(run, lat.max_avg_us, lat.max_p99_us)
        bound = self.expect.ib_write_bw.bound_gbps
        return lambda run: bandwidth_ok(run, bound)

    def perftest(self, tool: str) -> PerftestCampaign:
        """Every scheduled pair measured with `tool`, localized (run once per session)."""
        with self._facts_lock:
            if tool in self._campaigns:
                return self._campaigns[tool]
        settings = self.inventory.benchmarks.perftest
        names = [n.name for n in self.nodes]
        reachable = [n for n in names if n not in self.transport.unreachable()]
        addresses = {n: a for n in reachable if (a := self.data_address(n))}
        devices = {n: self.rdma_device(n) for n in addresses}

        def side(name: str, port: int):
            gid = self.inventory.node(name).rdma.gid_index
            return options_for(settings, tool, port, devices.get(name), gid)

        passes = self.pair_passes(tool)

        def measure(pairs: list[Pair], index: int, label: str) -> dict[Pair, PairRun]:
            runnable = [p for p in pairs if p.a in addresses and p.b in addresses]
            with phase(self.progress, f"{tool} {label}: {len(runnable)} pairs") as outcome:
                runs = run_round(self.transport, runnable, index, tool, settings, addresses, side)
                good = sum(1 for run in runs.values() if passes(run))
                outcome.text = f"{good}/{len(runs)} pairs within bounds"
            return runs

        campaign = PerftestCampaign(tool)
        rounds, campaign.schedule = planned_rounds(names, settings)
        for index, pairs in enumerate(rounds, 1):
            campaign.runs.update(measure(pairs, index, f"round {index}/{len(rounds)}"))
        campaign.localization = judge(campaign.runs, passes, names)
        doubtful = [*campaign.localization.suspects, *campaign.localization.unknown]
        if settings.confirm_suspects and doubtful:
            good = [n for n in campaign.localization.good if n in addresses]
            checks = confirm_pairs(doubtful, good)
            for index, pairs in enumerate(checks, len(rounds) + 1):
                label = f"confirmation {index - len(rounds)}/{len(checks)}"
                campaign.confirm_runs.update(measure(pairs, index, label))
            campaign.localization = judge({**campaign.runs, **campaign.confirm_runs}, passes, names)
        if campaign.localization.suspects:
            self.progress(f"{tool}: suspect nodes {', '.join(campaign.localization.suspects)}")
        with self._facts_lock:
            self._campaigns[tool] = campaign
        return campaign

    def reachable_nodes(self) -> list[Node]:
        """Nodes whose facts came back (after gathering them)."""
        facts = self.gather_facts()
        return [n for n in self.nodes if not facts[n.name].result.unreachable]

    def nccl(self) -> tuple[NcclResult, CommandResult]:
        """all_reduce_perf across every reachable node, launched from the first (once)."""
        if self._nccl is None:
            settings = self.inventory.benchmarks.nccl
            nodes = self.reachable_nodes()
            if not nodes:
                raise NodeUnreachable("cluster", "no node reachable to launch NCCL from")
            what = f"NCCL all_reduce_perf on {len(nodes)} nodes ({settings.launcher})"
            with phase(self.progress, what) as outcome:
                self._nccl = self._allreduce(nodes)
                result = self._nccl[1]
                outcome.text = "finished" if result.ok else (result.failure or "failed")
        self._record(self._nccl[1])
        return self._nccl

    def _allreduce(self, nodes: list[Node]) -> tuple[NcclResult, CommandResult]:
        """all_reduce_perf across `nodes`, launched from the first."""
        settings = self.inventory.benchmarks.nccl
        command = launch_command(settings, [n.host for n in nodes], [n.name for n in nodes])
        result = self.transport.run(nodes[0].name, command, settings.timeout_s)
        expected = expected_run(settings, len(nodes))
        return parse_nccl(result.stdout + "\n" + result.stderr, expected), result

    def nccl_passes(self, result: NcclResult) -> bool:
        """The NCCL bounds of the expectations, met by one all_reduce_perf run."""
        bounds = self.expect.nccl
        if not result.ok or not result.rows:  # cut short, wrong values, other ranks: fails
            return False
        avg, largest = result.avg_busbw_gbs, result.busbw_at_max_size_gbs
        if bounds.min_avg_busbw_gbs is not None and not (avg or 0) >= bounds.min_avg_busbw_gbs:
            return False
        floor = bounds.min_busbw_largest_gbs
        return floor is None or (largest or 0) >= floor

    def nccl_bisection(self) -> Bisection:
        """NCCL on halves of the reachable nodes until one node is left to blame (once)."""
        if self._bisection is not None:
            return self._bisection
        settings = self.inventory.benchmarks.nccl
        nodes = {n.name: n for n in self.reachable_nodes()}
        budget = settings.bisect_max_runs
        if budget == 0:
            self._bisection = Bisection(reason="off (benchmarks.nccl.bisect_max_runs: 0)")
            return self._bisection

        def trial(names: list[str]) -> bool:
            what = f"NCCL bisection on {len(names)} nodes ({names[0]} .. {names[-1]})"
            with phase(self.progress, what) as outcome:
                parsed, result = self._allreduce([nodes[n] for n in names])
                if self.current_check is not None:
                    self.current_check.command(result)
                passed = self.nccl_passes(parsed)
                outcome.text = "passes" if passed else "fails"
            return passed

        names = list(nodes)
        self._bisection = bisect(names, trial, budget or runs_needed(len(names)))
        return self._bisection

    def fio(self) -> dict[str, FioRun]:
        """fio write+read on every reachable node at once under the CPFS mount (once)."""
        if self._fio is None:
            names = [n.name for n in self.reachable_nodes()]
            settings = self.inventory.benchmarks.fio
            mount = self.expect.cpfs.mount
            with phase(self.progress, f"fio write and read on {len(names)} nodes under {mount}"):
                self._fio = run_fio(self.transport, names, mount, settings)
        return self._fio

    def placement(self) -> dict[str, MetadataFacts]:
        """Each reached node's instance metadata, if facts were gathered this session."""
        out = {}
        for name, facts in self._facts.items():
            section = facts.sections.get("metadata")
            if section is not None and not facts.result.unreachable:
                out[name] = parse_metadata(section.text)
        return out
