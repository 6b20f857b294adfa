"""The GPU load phase (every GPU of every reachable node loaded at once), the DCGM phase
(`dcgmi diag` on every node that has it) and the single-node all-reduce: phases of
`campaigns/phase`, each run once per session on all its nodes together.

Each node's engines come from its facts (`gpu_engines`); a node without PyTorch for
`python3` is not loaded and is not measured, with what to install.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from pytest_hpcnet.campaigns.facts import NodeFacts
from pytest_hpcnet.campaigns.phase import Skip
from pytest_hpcnet.inventory.models import Inventory
from pytest_hpcnet.probes.gpu import GPU_QUERY, GpuQuery
from pytest_hpcnet.probes.gpu_dcgm import LEVEL_TIMEOUT_S, DcgmRun, dcgm_command, parse_dcgm_json
from pytest_hpcnet.probes.gpu_load import (
    GPU_ENGINES,
    Engines,
    LoadSamples,
    load_command,
    parse_load,
    parse_samples,
)
from pytest_hpcnet.probes.gpu_nccl_node import nccl_code_version, node_nccl_command, parse_node_nccl
from pytest_hpcnet.probes.gpu_topo import Topology, parse_topo
from pytest_hpcnet.probes.nccl import NcclResult
from pytest_hpcnet.probes.sections import MARK, split_sections
from pytest_hpcnet.requirements.gpu_load import INSTALL_TORCH, NodeLoad
from pytest_hpcnet.transport.fanout import CommandResult

ENGINE = "torch"
EXTRA_S = 200.0
"""Beyond twice the load time: torch import, CUDA start-up, the checksums, the copies."""
GPU_FACTS = (GPU_ENGINES.name, GPU_QUERY.name)
"""The facts sections every GPU phase plans from."""


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
    engines, query = facts.whole(GPU_ENGINES.name), facts.whole(GPU_QUERY.name)
    if engines is None or query is None:
        why = f"facts lack section {GPU_ENGINES.name} or {GPU_QUERY.name} (output cut short)"
        return None, None, why
    return GPU_ENGINES.parse(engines), GPU_QUERY.parse(query), ""


def planned_gpus(query: GpuQuery, expected: int | None) -> tuple[int, str]:
    """(GPUs the node should have: `expect.gpu.count` where set, else those nvidia-smi lists;
    why fewer are visible, or "" when all are). A phase sized by the listing alone would pass
    a node that lost a GPU."""
    visible = len(query.gpus)
    want = max(expected or 0, visible)
    if visible < want:
        return want, f"nvidia-smi lists {visible} of the {want} GPUs expected (expect.gpu.count)"
    return want, ""


@dataclass(frozen=True)
class LoadPlan:
    """What a node is loaded with: the GPUs nvidia-smi lists, those it should have, its
    listing and each GPU's CPU affinity (`nvidia-smi topo -m`), where known."""

    gpus: int
    expected: int
    query: GpuQuery
    affinity: dict[int, str] | None


class GpuLoadPhase:
    """Every GPU of every node with PyTorch under the load program at once."""

    reads = GPU_FACTS

    def plan(self, facts: NodeFacts, inventory: Inventory) -> LoadPlan | Skip[NodeLoad]:
        count = inventory.expect.gpu.count  # the majority checksum counts skipped nodes too
        engines, query, why = gpu_facts(facts)
        if engines is None or query is None:
            return Skip(NodeLoad(facts.node, missing=why, expected_gpus=count))
        if not engines.has(ENGINE):
            others = ", ".join(f"{k} {v}" for k, v in engines.found.items()) or "none"
            why = f"no load engine: python3 has no {ENGINE} (found: {others})"
            return Skip(NodeLoad(facts.node, missing=why, fix=INSTALL_TORCH, expected_gpus=count))
        if not query.gpus:
            why = "nvidia-smi lists no GPU to load"
            return Skip(NodeLoad(facts.node, missing=why, expected_gpus=count))
        topo = facts.whole("gpu_topo")
        return LoadPlan(
            len(query.gpus),
            planned_gpus(query, count)[0],
            query,
            gpu_affinity(parse_topo(topo)) if topo is not None else None,
        )

    def describe(self, plans: dict[str, LoadPlan], inventory: Inventory) -> str:
        gpus = sum(p.gpus for p in plans.values())
        seconds = inventory.benchmarks.gpu_load.seconds
        return f"GPU load on {len(plans)} nodes, {gpus} GPUs, {seconds:g} s"

    def timeout_s(self, inventory: Inventory) -> float:
        return inventory.benchmarks.gpu_load.seconds * 2 + EXTRA_S

    def command(self, node: str, plan: LoadPlan, inventory: Inventory) -> str:
        settings = inventory.benchmarks.gpu_load
        return load_command(
            plan.gpus, settings.seconds, settings.size, settings.copy_mib, plan.affinity
        )

    def read(
        self, node: str, plan: LoadPlan, result: CommandResult, inventory: Inventory
    ) -> NodeLoad:
        return replace(node_load(node, result), query=plan.query, expected_gpus=plan.expected)

    def versions(self, found: NodeLoad) -> dict[str, str]:
        run = found.run
        return {"gpu_load_engine": run.engine} if run is not None and run.gpus else {}


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
    """`dcgmi diag -r LEVEL -j` (`expect.gpu_load.dcgm_level`) on every node with dcgmi."""

    reads = GPU_FACTS

    def plan(
        self, facts: NodeFacts, inventory: Inventory
    ) -> int | Skip[tuple[DcgmRun | None, str]]:
        engines, _, why = gpu_facts(facts)
        if engines is None:
            return Skip((None, why))
        if not engines.has("dcgmi"):
            return Skip((None, "no dcgmi on the node's PATH"))
        return inventory.expect.gpu_load.dcgm_level

    def describe(self, plans: dict[str, int], inventory: Inventory) -> str:
        return f"dcgmi diag -r {inventory.expect.gpu_load.dcgm_level} on {len(plans)} nodes"

    def timeout_s(self, inventory: Inventory) -> float:
        return LEVEL_TIMEOUT_S[inventory.expect.gpu_load.dcgm_level]

    def command(self, node: str, plan: int, inventory: Inventory) -> str:
        return dcgm_command(plan)

    def read(
        self, node: str, plan: int, result: CommandResult, inventory: Inventory
    ) -> tuple[DcgmRun | None, str]:
        if result.unreachable:
            return None, f"unreachable during dcgmi: {result.unreachable}"
        if result.timed_out:
            return None, f"dcgmi diag -r {plan} timed out"
        return parse_dcgm_json(result.stdout), ""

    def versions(self, found: tuple[DcgmRun | None, str]) -> dict[str, str]:
        run = found[0]
        return {"dcgm": run.version} if run is not None and run.version else {}


class NodeNcclPhase:
    """`all_reduce_perf -g <GPUs>` on every node that has it and all its GPUs listed."""

    reads = GPU_FACTS

    def plan(
        self, facts: NodeFacts, inventory: Inventory
    ) -> int | Skip[tuple[NcclResult | None, str]]:
        engines, query, why = gpu_facts(facts)
        if engines is None or query is None:
            return Skip((None, why))
        if not engines.has("all_reduce_perf"):
            return Skip((None, "no all_reduce_perf on the node's PATH"))
        if not len(query.gpus):
            return Skip((None, "nvidia-smi lists no GPU"))
        count, short = planned_gpus(query, inventory.expect.gpu.count)
        if short:
            return Skip((None, f"{short}: all_reduce_perf -g {count} cannot run"))
        return count

    def describe(self, plans: dict[str, int], inventory: Inventory) -> str:
        return f"single-node all_reduce_perf on {len(plans)} nodes"

    def timeout_s(self, inventory: Inventory) -> float:
        return inventory.benchmarks.gpu_load.nccl.timeout_s

    def command(self, node: str, plan: int, inventory: Inventory) -> str:
        s = inventory.benchmarks.gpu_load.nccl
        return node_nccl_command(plan, s.b, s.e, s.f, s.n, s.w)

    def read(
        self, node: str, plan: int, result: CommandResult, inventory: Inventory
    ) -> tuple[NcclResult | None, str]:
        settings = inventory.benchmarks.gpu_load.nccl
        if result.unreachable:
            return None, f"unreachable during all_reduce_perf: {result.unreachable}"
        if result.timed_out:
            return None, f"all_reduce_perf timed out after {settings.timeout_s} s"
        return parse_node_nccl(result.stdout, plan, settings.e), ""

    def versions(self, found: tuple[NcclResult | None, str]) -> dict[str, str]:
        result, out = found[0], {}
        if result is not None and result.tests_version:
            out["nccl_tests"] = result.tests_version
        if result is not None and (library := nccl_code_version(result.nccl_version)):
            out["nccl_tests_nccl"] = library
        return out
