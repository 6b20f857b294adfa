"""The phase protocol's runner and `Cluster.phase`: one run on every planned node together,
once; a node the phase cannot plan keeps the result it was given; the check's evidence
names the node's facts, its command, the sections read and the tool versions."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from pytest_hpcnet.campaigns.cluster import Cluster
from pytest_hpcnet.campaigns.facts import NodeFacts
from pytest_hpcnet.campaigns.gpu_load import DcgmPhase, GpuLoadPhase, NodeNcclPhase
from pytest_hpcnet.campaigns.gpu_p2p import P2pPhase
from pytest_hpcnet.campaigns.phase import PhaseRun, Skip
from pytest_hpcnet.probes.sections import SectionOutput
from pytest_hpcnet.report.recording import Check
from pytest_hpcnet.transport.fanout import CommandResult, NodeUnreachable


@dataclass(frozen=True)
class Echoed:
    node: str
    text: str = ""
    why: str = ""


class EchoPhase:
    """A toy phase: `echo` on nodes whose facts have a `gpu_engines` section."""

    reads = ("gpu_engines",)

    def plan(self, facts, inventory):
        if "gpu_engines" not in facts.sections:
            return Skip(Echoed(facts.node, why="no engines"))
        return f"hello {facts.node}"

    def describe(self, plans, inventory):
        return f"echo on {len(plans)} nodes"

    def timeout_s(self, inventory):
        return 7.0

    def command(self, node, plan, inventory):
        return f"echo {plan}"

    def read(self, node, plan, result, inventory):
        if result.unreachable:
            return Echoed(node, why=f"unreachable: {result.unreachable}")
        return Echoed(node, result.stdout.strip())

    def versions(self, found):
        return {"echo": "1"} if found.text else {}


def _result(node: str, command: str, stdout: str = "", unreachable: str | None = None):
    return CommandResult(node, command, 0, stdout, "", 0.1, 0.0, unreachable=unreachable)


class Transport:
    def __init__(self, lost: set[str] = frozenset()):
        self.calls: list[tuple[dict[str, str], float, bool]] = []
        self.lost = lost

    def run_on_all(self, command, nodes, timeout_s, together):
        commands = {n: command(SimpleNamespace(name=n)) for n in nodes}
        self.calls.append((commands, timeout_s, together))
        return {
            n: _result(n, c, c[5:], "reset by peer" if n in self.lost else None)
            for n, c in commands.items()
        }

    def unreachable(self):
        return {}


def facts_campaign(transport: Transport) -> SimpleNamespace:
    names = ("n1", "n2", "n3")
    facts = {
        n: NodeFacts(
            n,
            _result(n, "facts"),
            {} if n == "n2" else {"gpu_engines": SectionOutput("python torch 2.5.1\n", 0)},
        )
        for n in names
    }
    inventory = SimpleNamespace(nodes=[SimpleNamespace(name=n) for n in names])
    lines: list[str] = []
    return SimpleNamespace(
        inventory=inventory,
        gather=lambda: facts,
        transport=transport,
        progress=lines.append,
        lines=lines,
    )


def test_a_phase_runs_once_on_every_planned_node_together():
    transport = Transport()
    facts = facts_campaign(transport)
    run = PhaseRun(EchoPhase(), facts)
    found = run.found()
    assert run.found() is found and len(transport.calls) == 1
    commands, timeout_s, together = transport.calls[0]
    assert commands == {"n1": "echo hello n1", "n3": "echo hello n3"}
    assert (timeout_s, together) == (7.0, True)
    assert list(found) == ["n1", "n2", "n3"]
    assert found["n1"] == Echoed("n1", "hello n1")
    assert found["n2"] == Echoed("n2", why="no engines")
    assert facts.lines[0] == "echo on 2 nodes ..."
    assert facts.lines[1].startswith("echo on 2 nodes: 2 answered, 0 lost (")


def _cluster(transport: Transport) -> Cluster:
    cluster = Cluster.__new__(Cluster)
    cluster.transport = transport
    cluster.facts_campaign = facts_campaign(transport)
    cluster.phases = {EchoPhase: PhaseRun(EchoPhase(), cluster.facts_campaign)}
    return cluster


def _check(node: str) -> Check:
    return Check("echo", "echo", node, "node", f"test[{node}]", None)


def test_cluster_phase_records_the_nodes_facts_command_sections_and_versions():
    cluster = _cluster(Transport())
    check = _check("n1")
    found = cluster.phase(EchoPhase, SimpleNamespace(name="n1"), check)
    assert found["n1"].text == "hello n1"
    assert [c["command"] for c in check.commands] == ["facts", "echo hello n1"]
    assert check.sections == ["gpu_engines"]
    assert check.tool_versions == {"torch": "2.5.1", "echo": "1"}  # the facts, then the phase
    skipped = _check("n2")
    cluster.phase(EchoPhase, SimpleNamespace(name="n2"), skipped)
    assert [c["command"] for c in skipped.commands] == ["facts"]
    assert skipped.tool_versions == {}


def test_a_node_lost_during_the_phase_ends_its_check():
    cluster = _cluster(Transport(lost={"n3"}))
    with pytest.raises(NodeUnreachable):
        cluster.phase(EchoPhase, SimpleNamespace(name="n3"), _check("n3"))
    assert cluster.phases[EchoPhase].found()["n1"].text == "hello n1"


def test_a_phase_runs_when_first_asked_for_and_once():
    cluster = _cluster(Transport())
    cluster.phases = {}
    cluster.phase(EchoPhase, SimpleNamespace(name="n1"), _check("n1"))
    run = cluster.phases[EchoPhase]
    cluster.phase(EchoPhase, SimpleNamespace(name="n2"), _check("n2"))
    assert cluster.phases == {EchoPhase: run}


@pytest.mark.parametrize("kind", [GpuLoadPhase, DcgmPhase, NodeNcclPhase, P2pPhase])
def test_every_phase_follows_the_protocol(kind):
    for method in ("plan", "describe", "timeout_s", "command", "read", "versions"):
        assert callable(getattr(kind, method)), (kind, method)
    assert isinstance(kind.reads, tuple)
