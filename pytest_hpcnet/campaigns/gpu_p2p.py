"""The GPU-to-GPU phase: nvbandwidth's read-CE matrix on every node that has it, all at once
(once per session, `campaigns/phase`), each node's pairs classed by the facts'
`nvidia-smi topo -m`.

A node without nvbandwidth (facts `gpu_engines`) but with PyTorch runs the plugin's own copy
program instead (`probes/gpu_p2p_torch`); a node with neither is not measured, with what to
install.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_hpcnet.campaigns.facts import NodeFacts
from pytest_hpcnet.campaigns.gpu_load import GPU_FACTS, gpu_facts
from pytest_hpcnet.campaigns.phase import Skip
from pytest_hpcnet.inventory.models import Inventory
from pytest_hpcnet.probes.gpu_load import Engines
from pytest_hpcnet.probes.gpu_p2p import TIMEOUT_S, nvbandwidth_command, parse_nvbandwidth
from pytest_hpcnet.probes.gpu_p2p_torch import TIMEOUT_S as TORCH_TIMEOUT_S
from pytest_hpcnet.probes.gpu_p2p_torch import p2p_command, parse_torch_p2p
from pytest_hpcnet.probes.gpu_topo import parse_topo
from pytest_hpcnet.requirements.gpu_p2p import INSTALL_NVBANDWIDTH, NodeP2p
from pytest_hpcnet.transport.fanout import CommandResult

TOPO = "gpu_topo"


def _engine(found: Engines) -> str | None:
    """`nvbandwidth` where the node has it, else `torch` (the fallback), else None."""
    return next((e for e in ("nvbandwidth", "torch") if found.has(e)), None)


@dataclass(frozen=True)
class P2pPlan:
    """The engine a node copies with (`nvbandwidth`, or `torch`: the fallback program) and
    its pairs' classes from the facts (a NodeP2p without a run)."""

    engine: str
    node: NodeP2p


class P2pPhase:
    """`nvbandwidth -t device_to_device_memcpy_read_ce` (or the fallback) on every node."""

    reads = (*GPU_FACTS, TOPO)

    def plan(self, facts: NodeFacts, inventory: Inventory) -> P2pPlan | Skip[NodeP2p]:
        engines, query, why = gpu_facts(facts)
        if engines is None:
            return Skip(NodeP2p(facts.node, missing=why))
        if not (engine := _engine(engines)):
            why = "no nvbandwidth on the node's PATH and no torch for python3"
            return Skip(NodeP2p(facts.node, missing=why, fix=INSTALL_NVBANDWIDTH))
        topo = facts.whole(TOPO)
        node = NodeP2p(facts.node, topo=parse_topo(topo) if topo is not None else None, query=query)
        return P2pPlan(engine, node)

    def describe(self, plans: dict[str, P2pPlan], inventory: Inventory) -> str:
        return f"nvbandwidth GPU-to-GPU on {len(plans)} nodes"

    def timeout_s(self, inventory: Inventory) -> float:
        return max(TIMEOUT_S, TORCH_TIMEOUT_S)

    def command(self, node: str, plan: P2pPlan, inventory: Inventory) -> str:
        return nvbandwidth_command() if plan.engine == "nvbandwidth" else p2p_command()

    def read(
        self, node: str, plan: P2pPlan, result: CommandResult, inventory: Inventory
    ) -> NodeP2p:
        if result.unreachable:
            return NodeP2p(node, missing=f"unreachable during nvbandwidth: {result.unreachable}")
        if result.timed_out:
            return NodeP2p(node, missing=f"{plan.engine} GPU-to-GPU copies timed out")
        parse = parse_nvbandwidth if plan.engine == "nvbandwidth" else parse_torch_p2p
        return NodeP2p(node, parse(result.stdout), plan.node.topo, plan.node.query)

    def versions(self, found: NodeP2p) -> dict[str, str]:
        run = found.run
        if run is None or not run.version:
            return {}
        return {"gpu_p2p_engine" if run.version.startswith("torch") else "nvbandwidth": run.version}
