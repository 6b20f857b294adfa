"""The `cluster` fixture's object: the inventory, commands on nodes, and the campaigns.

A thin facade over the campaign objects (facts, pair probes, perftest, NCCL, fio), each
with its own cache and usable from a script without pytest. Whatever a suite asks is
recorded into the `recorder` it passes (its `check`); nothing is recorded implicitly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pytest_hpcnet.campaigns.eri_paths import EriPathCampaign, EriPathMtu
from pytest_hpcnet.campaigns.facts import FactsCampaign, MissingMeasurement, NodeFacts
from pytest_hpcnet.campaigns.nccl.bisection import Bisection
from pytest_hpcnet.campaigns.nccl.campaign import NcclCampaign
from pytest_hpcnet.campaigns.nccl.collectives import CollectivesCampaign
from pytest_hpcnet.campaigns.pairs.campaign import FlowFacts, PairCampaign, PairFacts
from pytest_hpcnet.campaigns.partition import FactsSpool, Partition
from pytest_hpcnet.campaigns.perftest.campaign import PerftestCampaign, PerftestCampaigns
from pytest_hpcnet.campaigns.perftest.rounds import PairRun
from pytest_hpcnet.campaigns.phase import Phase, PhaseRun
from pytest_hpcnet.campaigns.progress import Reporter, silent
from pytest_hpcnet.campaigns.recorder import Recorder
from pytest_hpcnet.campaigns.storage import FioCampaign, FioRun
from pytest_hpcnet.inventory.models import Inventory, Node
from pytest_hpcnet.probes.gpu import GPU_QUERY
from pytest_hpcnet.probes.gpu_host import GPU_DRIVER
from pytest_hpcnet.probes.gpu_load import parse_engines
from pytest_hpcnet.probes.gpu_rdma import GPU_CUDA
from pytest_hpcnet.probes.identity import HOSTNAME
from pytest_hpcnet.probes.metadata import MetadataFacts
from pytest_hpcnet.probes.nccl import NcclResult
from pytest_hpcnet.probes.sections import Section
from pytest_hpcnet.probes.versions import VERSIONS, parse_versions
from pytest_hpcnet.transport.fanout import CommandResult, NodeUnreachable, Transport

__all__ = ["Cluster", "MissingMeasurement", "NodeFacts"]


def _record(recorder: Recorder | None, result: CommandResult) -> None:
    """Record a command for the check; a node that did not answer ends the check."""
    if recorder is not None:
        recorder.command(result)
    if result.unreachable:
        raise NodeUnreachable(result.node, result.unreachable)


T = TypeVar("T")
P = TypeVar("P")
R = TypeVar("R")


def gpu_versions(facts: NodeFacts | ReadFacts) -> dict[str, str]:
    """nvidia_driver, nvidia_kernel_module and cuda from a node's GPU sections (those it has,
    whole or not; not named as read)."""
    found: dict[str, str] = {}
    sections = facts.sections
    if GPU_QUERY.name in sections:
        gpus = GPU_QUERY.parse(sections[GPU_QUERY.name].text).gpus
        drivers = sorted({g.driver_version for g in gpus})
        if drivers and None not in drivers:
            found["nvidia_driver"] = ",".join(drivers)
    if GPU_DRIVER.name in sections:
        kernel = GPU_DRIVER.parse(sections[GPU_DRIVER.name].text).version
        if kernel:
            found["nvidia_kernel_module"] = kernel
    if GPU_CUDA.name in sections:
        cuda = GPU_CUDA.parse(sections[GPU_CUDA.name].text)
        if cuda:
            found["cuda"] = cuda
    return found


class ReadFacts:
    """A node's facts as one check reads them: every section it reads is named in its
    evidence, so the certificate shows the sections judged, not the whole output."""

    def __init__(self, facts: NodeFacts, recorder: Recorder):
        self._facts = facts
        self._recorder = recorder
        self.node = facts.node
        self.result = facts.result
        self.sections = facts.sections

    def text(self, section: str) -> str:
        """A section's output (read for the check); `MissingMeasurement` when not given."""
        self._recorder.read(section)
        return self._facts.text(section)

    def get(self, section: Section[T]) -> T:
        """A section read by its probe's parser (read for the check), parsed once per node;
        `MissingMeasurement` when not given whole."""
        self._recorder.read(section.name)
        return self._facts.get(section)

    def get_or_none(self, section: Section[T]) -> T | None:
        """`get`, or None where the node did not give the section whole (read for the check
        either way: a check that judges without it says so itself)."""
        self._recorder.read(section.name)
        try:
            return self._facts.get(section)
        except MissingMeasurement:
            return None

    def peek(self, section: Section[T]) -> T | None:
        """A section parsed as the node gave it, whole or cut, without naming it as read
        (for what a record shows beside its judgement); None when the node gave none."""
        out = self.sections.get(section.name)
        return section.parse(out.text) if out is not None else None

    def whole(self, section: str) -> str | None:
        """A section's output (read for the check) when the node gave all of it, else None."""
        self._recorder.read(section)
        return self._facts.whole(section)


class Cluster:
    """What suites talk to: the inventory, commands on nodes, and the campaigns' results."""

    def __init__(
        self,
        inventory: Inventory,
        transport: Transport,
        progress: Reporter = silent,
        partition: Partition | None = None,
        spool: FactsSpool | None = None,
    ):
        self.inventory = inventory
        self.transport = transport
        self.progress = progress
        self.expect = inventory.expect
        self.facts_campaign = FactsCampaign(inventory, transport, progress, partition, spool)
        self.pairs = PairCampaign(self.facts_campaign)
        self.eri_paths = EriPathCampaign(self.facts_campaign, self.pairs.ring)
        self.perftests = PerftestCampaigns(self.facts_campaign)
        self.collective = NcclCampaign(self.facts_campaign)
        self.collectives = CollectivesCampaign(self.collective)
        self.storage = FioCampaign(self.facts_campaign)
        self.phases: dict[type, PhaseRun[Any, Any]] = {}
        """Each phase's one run (`campaigns/phase`), made the first time a test asks for it."""

    @property
    def nodes(self) -> list[Node]:
        return self.inventory.nodes

    def require_reachable(self, node: Node, recorder: Recorder | None = None) -> None:
        """End the current test at once, with the recorded reason, if `node` is unreachable."""
        reason = self.transport.unreachable().get(node.name)
        if reason:
            if recorder is not None:
                recorder.unreachable[node.name] = reason
            raise NodeUnreachable(node.name, reason)

    def run(
        self,
        node: Node,
        command: str,
        timeout_s: float | None = None,
        recorder: Recorder | None = None,
    ) -> CommandResult:
        """Run a command on a node, recorded for `recorder`; unreachable ends the test."""
        self.require_reachable(node, recorder)
        result = self.transport.run(node.name, command, timeout_s)
        _record(recorder, result)
        return result

    # -- facts ------------------------------------------------------------------------------

    def gather_facts(self) -> Mapping[str, NodeFacts]:
        """Every node's facts (gathered in parallel, once per session)."""
        return self.facts_campaign.gather()

    def facts(self, node: Node, recorder: Recorder | None = None) -> NodeFacts | ReadFacts:
        """One node's facts, its command and tool versions recorded and each section read
        named in `recorder`; unreachable fails fast."""
        facts = self.gather_facts()[node.name]
        _record(recorder, facts.result)
        if recorder is None:
            return facts
        versions = facts.whole("versions")
        if versions is not None:
            recorder.tool_versions.update(parse_versions(versions))
        engines = facts.whole("gpu_engines")
        if engines is not None:  # torch, dcgm, nvbandwidth: found once
            recorder.tool_versions.update(parse_engines(engines).versions)
        return ReadFacts(facts, recorder)

    def gpu_facts(self, node: Node, recorder: Recorder) -> ReadFacts:
        """`facts`, with the node's GPU stack versions (driver, kernel module, CUDA) in the
        recorder's tool versions."""
        facts = self.facts(node, recorder)
        recorder.tool_versions.update(gpu_versions(facts))
        return facts

    def node_versions(self, node: Node, recorder: Recorder) -> dict[str, str] | None:
        """The node's package versions with its GPU stack's (None: the `versions` section
        was not given whole), the GPU stack's recorded in the recorder's tool versions.
        nccl-tests' version, which only its run names, is compared by `gpu_nccl_node`."""
        facts = self.facts(node, recorder)
        found = facts.get_or_none(VERSIONS)
        gpu = gpu_versions(facts)
        recorder.tool_versions.update(gpu)
        return None if found is None else {**found, **gpu}

    def hostnames(self) -> dict[str, str | None]:
        """Each reached node's hostname as its facts say (None: not given whole); not
        recorded (what a log that names hosts is read by)."""
        found: dict[str, str | None] = {}
        for node in self.reachable_nodes():
            section = self.gather_facts()[node.name].whole(HOSTNAME.name)
            found[node.name] = section.strip() if section else None
        return found

    def data_address(self, name: str) -> str | None:
        """The node's IPv4 address on its data-plane interface (from its facts)."""
        return self.facts_campaign.data_address(name)

    def rdma_device(self, name: str) -> str | None:
        """The node's first RDMA device matching its glob (perftest uses `eri_devices`)."""
        return self.facts_campaign.rdma_device(name)

    def reachable_nodes(self) -> list[Node]:
        """Nodes whose facts came back (after gathering them)."""
        return self.facts_campaign.reachable_nodes()

    def placement(self) -> dict[str, MetadataFacts]:
        """Each reached node's instance metadata, if facts were gathered this session."""
        return self.facts_campaign.placement()

    # -- pairs and flows --------------------------------------------------------------------

    def ring(self) -> list[tuple[str, str]]:
        """The pairs every pair check covers: each node to the next around the ring."""
        return self.pairs.ring()

    def pair_facts(self, source: Node, target: Node, recorder: Recorder | None = None) -> PairFacts:
        """What `source` saw of `target` (gathered for all pairs on first use)."""
        self.require_reachable(source, recorder)
        self.require_reachable(target, recorder)
        facts = self.pairs.pair(source.name, target.name)
        for result in facts.commands:
            _record(recorder, result)
        return facts

    def eri_path_mtu(
        self, source: Node, target: Node, recorder: Recorder | None = None
    ) -> list[EriPathMtu]:
        """The pair's path MTU over each ERI's own interface (eth1 to the partner's eth1),
        where an ERI is not on the data-plane interface; empty elsewhere."""
        found = self.eri_paths.pair(source.name, target.name)
        for result in {id(f.command): f.command for f in found if f.command}.values():
            _record(recorder, result)
        return found

    def flow_facts(self, flow_id: str, recorder: Recorder | None = None) -> FlowFacts | None:
        """The outcome of one inventory ACL flow, or None when it could not be tried."""
        facts = self.pairs.flow(flow_id)
        if facts is not None:
            for result in facts.commands:
                _record(recorder, result)
        return facts

    # -- benchmarks -------------------------------------------------------------------------

    def pair_passes(self, tool: str) -> Callable[[PairRun], bool]:
        """The pass criterion of one perftest tool: its requirement's judge."""
        return self.perftests.passes(tool)

    def perftest(self, tool: str) -> PerftestCampaign:
        """Every scheduled pair measured with `tool`, localized (run once per session)."""
        return self.perftests.campaign(tool)

    def nccl(self, recorder: Recorder | None = None) -> tuple[NcclResult, CommandResult]:
        """all_reduce_perf across every reachable node, launched from the first (once)."""
        run = self.collective.allreduce()
        _record(recorder, run[1])
        for result in self.collective.evidence():  # the `-h` probe, the JSON file (-J)
            _record(recorder, result)
        return run

    def nccl_passes(self, result: NcclResult) -> bool:
        """One all_reduce_perf run meets the NCCL bounds: the requirement's judge."""
        return self.collective.passes(result)

    def nccl_bisection(self, recorder: Recorder | None = None) -> Bisection:
        """NCCL on halves of the reachable nodes until one node is left to blame (once)."""
        return self.collective.bisection(recorder)

    def fio(self, only: set[str] | None = None) -> dict[str, FioRun]:
        """fio write+read on every reachable node (in `only`, when given) at once under the
        CPFS mount (once)."""
        return self.storage.runs(only)

    def phase(
        self, kind: type[Phase[P, R]], node: Node, recorder: Recorder | None = None
    ) -> dict[str, R]:
        """Every node's result of a phase (all at once, once a session) after `node`'s facts
        it was planned from; `node`'s command of it and tool versions recorded and the facts
        sections it read named; unreachable ends the test."""
        self.facts(node, recorder)
        run = self.phases.get(kind)
        if run is None:
            run = self.phases.setdefault(kind, PhaseRun(kind(), self.facts_campaign))
        found = run.found()
        result = run.results.get(node.name)
        if result is not None:
            _record(recorder, result)
        if recorder is not None:
            recorder.read(*run.phase.reads)
            recorder.tool_versions.update(run.phase.versions(found[node.name]))
        return found
