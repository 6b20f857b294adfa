"""The GPU-to-GPU phase: nvbandwidth's read-CE matrix on every node that has it, all at once
(once per session), each node's pairs classed by the facts' `nvidia-smi topo -m`.

A node without nvbandwidth (facts `gpu_engines`) but with PyTorch runs the plugin's own copy
program instead (`probes/gpu_p2p_torch`); a node with neither is not measured, with what to
install.
"""

from __future__ import annotations

import threading

from pytest_hpcnet.campaigns.facts import FactsCampaign
from pytest_hpcnet.campaigns.gpu_load import gpu_facts
from pytest_hpcnet.campaigns.progress import phase
from pytest_hpcnet.probes.gpu_load import Engines
from pytest_hpcnet.probes.gpu_p2p import TIMEOUT_S, nvbandwidth_command, parse_nvbandwidth
from pytest_hpcnet.probes.gpu_p2p_torch import TIMEOUT_S as TORCH_TIMEOUT_S
from pytest_hpcnet.probes.gpu_p2p_torch import p2p_command, parse_torch_p2p
from pytest_hpcnet.probes.gpu_topo import parse_topo
from pytest_hpcnet.requirements.gpu_p2p import INSTALL_NVBANDWIDTH, NodeP2p
from pytest_hpcnet.transport.fanout import CommandResult


def _engine(found: Engines) -> str | None:
    """`nvbandwidth` where the node has it, else `torch` (the fallback), else None."""
    return next((e for e in ("nvbandwidth", "torch") if found.has(e)), None)


class P2pPhase:
    """`nvbandwidth -t device_to_device_memcpy_read_ce` on every node that has it (once)."""

    def __init__(self, facts: FactsCampaign):
        self.facts = facts
        self.results: dict[str, CommandResult] = {}
        self.engine: dict[str, str] = {}
        """Node -> `nvbandwidth`, or `torch` where only the fallback copy program can run."""
        self._runs: dict[str, NodeP2p] | None = None
        self._lock = threading.Lock()

    def runs(self) -> dict[str, NodeP2p]:
        """{node: its NodeP2p} for every node of the inventory."""
        with self._lock:
            if self._runs is None:
                self._runs = self._measure()
            return self._runs

    def _measure(self) -> dict[str, NodeP2p]:
        out: dict[str, NodeP2p] = {}
        ready: dict[str, NodeP2p] = {}
        for name, facts in self.facts.gather().items():
            engines, query, why = gpu_facts(facts)
            if engines is None:
                out[name] = NodeP2p(name, missing=why)
            elif not (engine := _engine(engines)):
                why = "no nvbandwidth on the node's PATH and no torch for python3"
                out[name] = NodeP2p(name, missing=why, fix=INSTALL_NVBANDWIDTH)
            else:
                self.engine[name] = engine
                topo = facts.whole("gpu_topo")
                ready[name] = NodeP2p(
                    name, topo=parse_topo(topo) if topo is not None else None, query=query
                )
        if ready:
            with phase(self.facts.progress, f"nvbandwidth GPU-to-GPU on {len(ready)} nodes"):
                self.results = self.facts.transport.run_on_all(
                    lambda node: (
                        nvbandwidth_command()
                        if self.engine[node.name] == "nvbandwidth"
                        else p2p_command()
                    ),
                    nodes=list(ready),
                    timeout_s=max(TIMEOUT_S, TORCH_TIMEOUT_S),
                    together=True,
                )
        for name, planned in ready.items():
            result = self.results[name]
            if result.unreachable:
                why = f"unreachable during nvbandwidth: {result.unreachable}"
                out[name] = NodeP2p(name, missing=why)
            elif result.timed_out:
                why = f"{self.engine[name]} GPU-to-GPU copies timed out"
                out[name] = NodeP2p(name, missing=why)
            else:
                parse = parse_nvbandwidth if self.engine[name] == "nvbandwidth" else parse_torch_p2p
                run = parse(result.stdout)
                out[name] = NodeP2p(name, run, planned.topo, planned.query)
        return out
