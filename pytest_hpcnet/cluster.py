"""The `cluster` fixture's object: inventory, transport and the session's facts cache."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from pytest_hpcnet.facts import SectionOutput, facts_command, split_sections
from pytest_hpcnet.inventory import Inventory, Node
from pytest_hpcnet.recording import Check
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
