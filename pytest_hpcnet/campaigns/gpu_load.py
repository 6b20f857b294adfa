"""The GPU load phase, every GPU of every reachable node loaded at once, and the DCGM phase
(`dcgmi diag` on every node that has it, at once); each runs once per session.

Each node's engines come from its facts (`gpu_engines`); a node without PyTorch for
`python3` is not loaded and is not measured, with what to install. The load command
(`probes/gpu_load.load_command`) starts on all loadable nodes together, whatever
`ssh.concurrency` says: a cluster median measured in batches would mix hot and cold halls.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import replace

from pytest_hpcnet.campaigns.facts import FactsCampaign, NodeFacts
from pytest_hpcnet.campaigns.progress import phase
from pytest_hpcnet.probes.gpu import GPU_QUERY, GpuQuery
from pytest_hpcnet.probes.gpu_dcgm import LEVEL_TIMEOUT_S, DcgmRun, dcgm_command, parse_dcgm_json
from pytest_hpcnet.probes.gpu_load import (
    Engines,
    LoadSamples,
    load_command,
    parse_engines,
    parse_load,
    parse_samples,
)
from pytest_hpcnet.probes.gpu_nccl_node import node_nccl_command, parse_node_nccl
from pytest_hpcnet.probes.gpu_topo import Topology, parse_topo
from pytest_hpcnet.probes.nccl import NcclResult
from pytest_hpcnet.probes.sections import MARK, split_sections
from pytest_hpcnet.requirements.gpu_load import INSTALL_TORCH, NodeLoad
from pytest_hpcnet.transport.fanout import CommandResult

ENGINE = "torch"
EXTRA_S = 200.0
"""Beyond twice the load time: torch import, CUDA start-up, the checksums, the copies."""


def gpu_affinity(topo: Topology) -> dict[int, str]:
    """{GPU index: its `CPU Affinity`} from `nvidia-smi topo -m` (rows `GPU0`, ...)."""
    out = {}
    for row in topo.gpus:
        index = row.device[3:]
        if index.isdigit() and row.cpu_affinity:
            out[int(index)] = row.cpu_affinity
    return out


def gpu_facts(facts: NodeFacts) -> tuple[Engines | None, GpuQuery | None, str]:
    """A node's GPU engines and `--query-gpu` listing from its facts, or (None, None, why)
    where its facts cannot plan a GPU phase (unreachable, a section missing or cut short)."""
    if facts.result.unreachable:
        return None, None, f"unreachable: {facts.result.unreachable}"
    engines, query = facts.whole("gpu_engines"), facts.whole(GPU_QUERY.name)
    if engines is None or query is None:
        return None, None, f"facts lack section gpu_engines or {GPU_QUERY.name} (output cut short)"
    return parse_engines(engines), GPU_QUERY.parse(query), ""


def planned_gpus(query: GpuQuery, expected: int | None) -> tuple[int, str]:
    """(GPUs the node should have: `expect.gpu.count` where set, else those nvidia-smi lists;
    why fewer are visible, or "" when all are). A phase sized by the listing alone would pass
    a node that lost a GPU."""
    visible = len(query.gpus)
    want = max(expected or 0, visible)
    if visible < want:
        return want, f"nvidia-smi lists {visible} of the {want} GPUs expected (expect.gpu.count)"
    return want, ""


class GpuLoadCampaign:
    """Every node's load phase (measured on first use) and the command each ran."""

    def __init__(self, facts: FactsCampaign):
        self.facts = facts
        self.inventory = facts.inventory
        self._loads: dict[str, NodeLoad] | None = None
        self.results: dict[str, CommandResult] = {}
        self.wall_s: float | None = None
        self.queries: dict[str, GpuQuery] = {}
        self.affinity: dict[str, dict[int, str]] = {}
        self.expected: dict[str, int] = {}
        """Node -> the GPUs it should have (`planned_gpus`); the load runs on those listed."""
        self._lock = threading.Lock()

    def _plan(self) -> tuple[dict[str, NodeLoad], dict[str, int]]:
        """(nodes that cannot be loaded -> why, nodes to load -> their GPU count)."""
        skipped: dict[str, NodeLoad] = {}
        plan: dict[str, int] = {}
        gathered = self.facts.gather()
        for node in self.inventory.nodes:
            facts = gathered[node.name]
            engines, query, why = gpu_facts(facts)
            if engines is None or query is None:
                skipped[node.name] = NodeLoad(node.name, missing=why)
                continue
            if not engines.has(ENGINE):
                others = ", ".join(f"{k} {v}" for k, v in engines.found.items()) or "none"
                why = f"no load engine: python3 has no {ENGINE} (found: {others})"
                skipped[node.name] = NodeLoad(node.name, missing=why, fix=INSTALL_TORCH)
                continue
            if not query.gpus:
                skipped[node.name] = NodeLoad(node.name, missing="nvidia-smi lists no GPU to load")
                continue
            plan[node.name] = len(query.gpus)
            self.expected[node.name] = planned_gpus(query, self.inventory.expect.gpu.count)[0]
            self.queries[node.name] = query
            topo = facts.whole("gpu_topo")
            if topo is not None:
                self.affinity[node.name] = gpu_affinity(parse_topo(topo))
        return skipped, plan

    def loads(self) -> dict[str, NodeLoad]:
        """{node: NodeLoad} for every node of the inventory (the load runs once)."""
        with self._lock:
            if self._loads is None:
                self._loads = self._measure()
            return self._loads

    def _measure(self) -> dict[str, NodeLoad]:
        settings = self.inventory.benchmarks.gpu_load
        skipped, plan = self._plan()
        loads = dict(skipped)
        if plan:
            what = (
                f"GPU load on {len(plan)} nodes, {sum(plan.values())} GPUs, {settings.seconds:g} s"
            )
            t0 = time.monotonic()
            with phase(self.facts.progress, what) as outcome:
                self.results = self.facts.transport.run_on_all(
                    lambda node: load_command(
                        plan[node.name],
                        settings.seconds,
                        settings.size,
                        settings.copy_mib,
                        self.affinity.get(node.name),
                    ),
                    nodes=list(plan),
                    timeout_s=settings.seconds * 2 + EXTRA_S,
                    together=True,
                )
                lost = sum(1 for r in self.results.values() if r.unreachable)
                outcome.text = f"{len(self.results) - lost} answered, {lost} lost"
            self.wall_s = time.monotonic() - t0
        for name in plan:
            loads[name] = replace(
                node_load(name, self.results[name]),
                query=self.queries[name],
                expected_gpus=self.expected[name],
            )
        count = self.inventory.expect.gpu.count
        for name, found in skipped.items():  # the majority checksum counts them as planned
            loads[name] = replace(found, expected_gpus=count)
        return {n.name: loads[n.name] for n in self.inventory.nodes if n.name in loads}


def node_load(name: str, result: CommandResult) -> NodeLoad:
    """One node's load result from its command's output."""
    if result.unreachable:
        return NodeLoad(name, missing=f"unreachable during the load: {result.unreachable}")
    sections = split_sections(result.stdout)
    twice = [
        n for n in ("gpu_load", "gpu_samples") if result.stdout.count(f"{MARK} begin {n}\n") > 1
    ]
    if twice:
        return NodeLoad(name, missing=f"the load command printed {', '.join(twice)} twice")
    for section in sections:  # sections.py's `\d` reads a full-width status as a number
        if not re.search(rf"^{MARK} end {section} [0-9]+$", result.stdout, re.M):
            sections[section] = replace(sections[section], status=None)
    if "gpu_load" not in sections:
        why = "timed out" if result.timed_out else f"exit status {result.exit_status}"
        return NodeLoad(name, missing=f"the load command printed nothing to read ({why})")
    run = parse_load(sections["gpu_load"].text, sections["gpu_load"].status)
    samples = None
    if (sampled := sections.get("gpu_samples")) is not None:
        cut = LoadSamples(error="the nvidia-smi samples were cut short")
        samples = parse_samples(sampled.text) if sampled.status is not None else cut
    return NodeLoad(name, run=run, samples=samples)


class DcgmPhase:
    """`dcgmi diag -r LEVEL -j` on every node that has dcgmi, all at once (once)."""

    def __init__(self, facts: FactsCampaign):
        self.facts = facts
        self.results: dict[str, CommandResult] = {}
        self._runs: dict[str, tuple[DcgmRun | None, str]] | None = None
        self._lock = threading.Lock()

    def runs(self, level: int) -> dict[str, tuple[DcgmRun | None, str]]:
        """{node: (its DCGM run, or None and why it did not run)}."""
        with self._lock:
            if self._runs is None:
                self._runs = self._measure(level)
            return self._runs

    def _measure(self, level: int) -> dict[str, tuple[DcgmRun | None, str]]:
        out: dict[str, tuple[DcgmRun | None, str]] = {}
        ready = []
        for name, facts in self.facts.gather().items():
            engines, _, why = gpu_facts(facts)
            if engines is None:
                out[name] = (None, why)
            elif not engines.has("dcgmi"):
                out[name] = (None, "no dcgmi on the node's PATH")
            else:
                ready.append(name)
        if ready:
            with phase(self.facts.progress, f"dcgmi diag -r {level} on {len(ready)} nodes"):
                self.results = self.facts.transport.run_on_all(
                    dcgm_command(level),
                    nodes=ready,
                    timeout_s=LEVEL_TIMEOUT_S[level],
                    together=True,
                )
        for name in ready:
            result = self.results[name]
            if result.unreachable:
                out[name] = (None, f"unreachable during dcgmi: {result.unreachable}")
            elif result.timed_out:
                out[name] = (None, f"dcgmi diag -r {level} timed out")
            else:
                out[name] = (parse_dcgm_json(result.stdout), "")
        return out


class NodeNcclPhase:
    """`all_reduce_perf -g <GPUs>` on every node that has it, all at once (once)."""

    def __init__(self, facts: FactsCampaign):
        self.facts = facts
        self.results: dict[str, CommandResult] = {}
        self._runs: dict[str, tuple[NcclResult | None, str]] | None = None
        self._lock = threading.Lock()

    def runs(self) -> dict[str, tuple[NcclResult | None, str]]:
        """{node: (its single-node run, or None and why it did not run)}."""
        with self._lock:
            if self._runs is None:
                self._runs = self._measure()
            return self._runs

    def _measure(self) -> dict[str, tuple[NcclResult | None, str]]:
        settings = self.facts.inventory.benchmarks.gpu_load.nccl
        out: dict[str, tuple[NcclResult | None, str]] = {}
        gpus: dict[str, int] = {}
        for name, facts in self.facts.gather().items():
            engines, query, why = gpu_facts(facts)
            if engines is None or query is None:
                out[name] = (None, why)
            elif not engines.has("all_reduce_perf"):
                out[name] = (None, "no all_reduce_perf on the node's PATH")
            elif not len(query.gpus):
                out[name] = (None, "nvidia-smi lists no GPU")
            else:
                count, short = planned_gpus(query, self.facts.inventory.expect.gpu.count)
                if short:
                    out[name] = (None, f"{short}: all_reduce_perf -g {count} cannot run")
                else:
                    gpus[name] = count
        if gpus:
            what = f"single-node all_reduce_perf on {len(gpus)} nodes"
            with phase(self.facts.progress, what):
                self.results = self.facts.transport.run_on_all(
                    lambda node: node_nccl_command(
                        gpus[node.name], settings.b, settings.e, settings.f, settings.n, settings.w
                    ),
                    nodes=list(gpus),
                    timeout_s=settings.timeout_s,
                    together=True,
                )
        for name, count in gpus.items():
            result = self.results[name]
            if result.unreachable:
                out[name] = (None, f"unreachable during all_reduce_perf: {result.unreachable}")
            elif result.timed_out:
                out[name] = (None, f"all_reduce_perf timed out after {settings.timeout_s} s")
            else:
                out[name] = (parse_node_nccl(result.stdout, count, settings.e), "")
        return out
