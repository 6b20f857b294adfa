"""Node-wide GPU judges: memlock, kernel modules, versions across nodes, GPU-NIC topology.

Same contract as `gpu_judges`: pure, fail closed, a Verdict naming node, value and fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pytest_hpcnet.probes.gpu_host import LoadedModules, Memlock
from pytest_hpcnet.probes.gpu_judges import PASS, Verdict
from pytest_hpcnet.probes.gpu_topo import Topology, hca_selects


def judge_memlock(node: str, memlock: Memlock, user: str = "the NCCL user") -> Verdict:
    """Locked memory unlimited (NCCL: `Call to ibv_create_qp failed ... -12` otherwise)."""
    if memlock.unlimited:
        return PASS
    value = memlock.error or f"{memlock.kib} KiB"
    return Verdict(
        False,
        f"{node}: memlock for {user} is {value}, expected unlimited",
        "set `* - memlock unlimited` in /etc/security/limits.d/ (and LimitMEMLOCK=infinity "
        "for containerd/slurmd), then log in again",
    )


def judge_modules(node: str, modules: LoadedModules, required: Iterable[str]) -> Verdict:
    """Every `required` kernel module loaded (`nvidia`, and `nvidia_peermem` for GDR)."""
    if modules.error is not None:
        return Verdict(False, f"{node}: {modules.error}", "re-run")
    missing = [m for m in required if not modules.loaded(m)]
    if not missing:
        return PASS
    return Verdict(
        False,
        f"{node}: kernel module(s) not loaded: {', '.join(missing)}",
        f"`modprobe {' '.join(missing)}` and make it persistent in /etc/modules-load.d/",
    )


def judge_versions(
    versions: Mapping[str, Mapping[str, str]],
    pins: Mapping[str, str] | None = None,
    known_bad: Mapping[str, Iterable[str]] | None = None,
) -> Verdict:
    """Each component's version identical on every node, equal to its pin, not known bad.

    `versions` is node -> component -> version (a node lacking a component others have is a
    mismatch: `missing`).
    """
    pins, known_bad = pins or {}, known_bad or {}
    components = sorted({c for found in versions.values() for c in found} | set(pins))
    problems: list[str] = []
    for comp in components:
        seen: dict[str, list[str]] = {}
        for node, found in versions.items():
            seen.setdefault(found.get(comp, "missing"), []).append(node)
        pin = pins.get(comp)
        if pin is not None:
            off = {v: n for v, n in seen.items() if v != pin}
            problems += [f"{comp} {v} on {', '.join(n)} (pinned {pin})" for v, n in off.items()]
        elif len(seen) > 1:
            usual = max(seen, key=lambda v: len(seen[v]))
            problems += [
                f"{comp} {v} on {', '.join(n)} (others {usual})"
                for v, n in seen.items()
                if v != usual
            ]
        bad = set(known_bad.get(comp, ()))
        problems += [
            f"{comp} {v} on {', '.join(n)} is known bad" for v, n in seen.items() if v in bad
        ]
    if not problems:
        return PASS
    return Verdict(
        False,
        "; ".join(problems),
        "install the same (pinned, not known-bad) version on every node and reboot if it is "
        "the driver",
    )


def _gpu_index(name: str) -> int | None:
    digits = name.removeprefix("GPU")
    return int(digits) if digits.isdigit() else None


def judge_gpu_nic_numa(node: str, topo: Topology, nic_numa: Mapping[str, int]) -> Verdict:
    """Each GPU's NUMA node (`topo -m`) is that of one of its nearest RDMA devices (sysfs)."""
    if topo.error is not None:
        return Verdict(False, f"{node}: nvidia-smi topo -m unreadable: {topo.error}", "re-run")
    problems, gpus = [], []
    for row in topo.gpus:
        nearest = topo.nearest_nics(row.device)
        numas = {nic: nic_numa.get(nic) for nic in nearest}
        gpu_numa = row.numa_affinity
        if gpu_numa is not None and gpu_numa in {str(v) for v in numas.values()}:
            continue
        shown = ", ".join(f"{n} on NUMA {v if v is not None else '?'}" for n, v in numas.items())
        problems.append(
            f"GPU {row.device.removeprefix('GPU')} on NUMA {row.numa_affinity or '?'}, "
            f"nearest RDMA device {shown or 'none'}"
        )
        if (index := _gpu_index(row.device)) is not None:
            gpus.append(index)
    if not problems:
        return PASS
    return Verdict(
        False,
        f"{node}: " + "; ".join(problems),
        "check the instance type's NIC/GPU layout and /sys/class/infiniband/*/device/numa_node; "
        "pin each rank to its GPU's NUMA node",
        tuple(gpus),
    )


def judge_nccl_ib_hca(node: str, topo: Topology, hca: str | None) -> Verdict:
    """NCCL_IB_HCA selects every RDMA device that topology makes nearest to some GPU."""
    if topo.error is not None:
        return Verdict(False, f"{node}: nvidia-smi topo -m unreadable: {topo.error}", "re-run")
    needed = dict.fromkeys(nic for row in topo.gpus for nic in topo.nearest_nics(row.device))
    missed = [nic for nic in needed if not hca_selects(hca, nic)]
    if not missed:
        return PASS
    return Verdict(
        False,
        f"{node}: NCCL_IB_HCA={hca} leaves out {', '.join(missed)} (nearest to some GPU)",
        f"set NCCL_IB_HCA to cover {', '.join(needed)} (a prefix such as `erdma` covers all)",
    )
