"""The `cluster` fixture's object: inventory, transport and the session's facts cache."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from pytest_hpcnet.facts import SectionOutput, facts_command, split_sections
from pytest_hpcnet.inventory import Inventory, Node
from pytest_hpcnet.pairs import FlowFacts, PairFacts, gather_pair_facts
from pytest_hpcnet.probes.links import parse_interfaces
from pytest_hpcnet.recording import Check
from pytest_hpcnet.schedule import ring_pairs
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

    def __init__(self, inventory: Inventory, transport: Transport):
        self.inventory = inventory
        self.transport = transport
        self.expect = inventory.expect
        self._facts: dict[str, NodeFacts] = {}
        self._facts_lock = threading.Lock()
        self.current_check: Check | None = None
        self._pairs: dict[tuple[str, str], PairFacts] | None = None
        self._flows: dict[str, FlowFacts] = {}

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
                results = self.transport.run_on_all(lambda node: facts_command(node, self.expect))
                self._facts = {
                    name: NodeFacts(name, result, split_sections(result.stdout))
                    for name, result in results.items()
                }
            return self._facts

    def facts(self, node: Node) -> NodeFacts:
        """One node's facts (gathered for all nodes on first use); unreachable fails fast."""
        facts = self.gather_facts()[node.name]
        self._record(facts.result)
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
        pairs, flows = gather_pair_facts(
            self.transport, {n.name: n for n in self.nodes}, addresses, self.ring(), self.expect
        )
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
