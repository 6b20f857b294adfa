"""GPUDirect RDMA perftest: ib_write_bw from GPU memory (`--use_cuda=<gpu>`), per ERI.

Optional (`benchmarks.perftest.gdr`, off by default: it needs a CUDA-built perftest) and only
where the profile says the family supports GDR (`expect.erdma.gdr: true`). On the pairs of
the all-ERIs-at-once rounds (every node in one), device i of each side runs with the GPU
nearest to it in the node's `nvidia-smi topo -m` (the lowest index among equals), one device
index after the other. A side with no GPU near device i is a failed run naming it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from pytest_hpcnet.campaigns.perftest.devices import device_label
from pytest_hpcnet.campaigns.perftest.rounds import PairRun, run_round
from pytest_hpcnet.campaigns.progress import Reporter, phase
from pytest_hpcnet.campaigns.schedule import Pair
from pytest_hpcnet.inventory.bench_settings import PerftestSettings
from pytest_hpcnet.probes.gpu_topo import Topology
from pytest_hpcnet.probes.perftest import PerftestOptions
from pytest_hpcnet.transport.fanout import Transport


def gpu_pairs(topologies: dict[str, Topology], devices: dict[str, list[str]]) -> dict:
    """{node: {device: nearest GPU index or None}} for every node's ERIs."""
    out: dict[str, dict[str, int | None]] = {}
    for node, found in devices.items():
        topo = topologies.get(node)
        out[node] = {d: topo.nearest_gpu(d) if topo and not topo.error else None for d in found}
    return out


def gpudirect_runs(
    transport: Transport,
    progress: Reporter,
    pairs: list[Pair],
    index: int,
    settings: PerftestSettings,
    targets: Callable[[int], dict[str, str]],
    devices: dict[str, list[str]],
    gpus: dict[str, dict[str, int | None]],
    side: Callable[[str, int, int], PerftestOptions],
) -> dict:
    """{pair: {device label: PairRun}} of ib_write_bw with `--use_cuda` on both sides;
    `targets(i)` gives each server's address on device index i."""
    addresses = targets(0)
    runnable = [p for p in pairs if p.a in addresses and p.b in addresses]
    width = max([len(devices[n]) for p in runnable for n in (p.a, p.b)] or [0])
    out: dict[Pair, dict] = {p: {} for p in runnable}
    for i in range(width):
        have = []
        for p in runnable:
            label = device_label(devices, p, i)
            lacking = [
                f"{n}: no GPU near {devices[n][i]} in nvidia-smi topo -m"
                if i < len(devices[n])
                else f"{n} has no device {i}"
                for n in (p.a, p.b)
                if i >= len(devices[n]) or gpus.get(n, {}).get(devices[n][i]) is None
            ]
            if lacking:
                out[p][label] = PairRun(p, index, error="; ".join(lacking))
            else:
                have.append(p)

        def cuda_side(name: str, port: int, i: int = i) -> PerftestOptions:
            gpu = gpus[name][devices[name][i]]
            return dataclasses.replace(side(name, port, i), use_cuda=gpu)

        if not have:
            continue
        with phase(progress, f"ib_write_bw GPUDirect ERI {i}: {len(have)} pairs"):
            shifted = settings.model_copy(
                update={"port_base": settings.port_base + i * max(len(runnable), 1)}
            )
            runs = run_round(transport, have, index, "ib_write_bw", shifted, targets(i), cuda_side)
        for p, run in runs.items():
            out[p][device_label(devices, p, i)] = dataclasses.replace(run, device=devices[p.a][i])
    return out
