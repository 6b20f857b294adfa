"""Node-wide GPU judges: memlock, kernel modules, PCIe of the RDMA devices, versions across
nodes, GPU-NIC topology.

Same contract as `gpu`: pure, fail closed, a Verdict naming node, value and fix, reading
only `expect.gpu` and `expect.versions`.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import GpuQuery
from pytest_hpcnet.probes.gpu_host import LoadedModules, Memlock
from pytest_hpcnet.probes.gpu_rdma import RdmaSysfs
from pytest_hpcnet.probes.gpu_topo import Topology, hca_selects
from pytest_hpcnet.requirements.gpu import PASS
from pytest_hpcnet.requirements.judges import Verdict

COMPARED = ("nvidia_driver", "cuda", "nccl", "kernel", "erdma", "rdma-core")
"""The components whose version must be identical on every node (where any node has them)."""


def _verdict(node: str | None, problems: list[str], fix: str) -> Verdict:
    """Pass without problems; else fail naming each (after `node: ` when given), with `fix`."""
    if not problems:
        return PASS
    reason = "; ".join(problems)
    return Verdict(
        False,
        measured=len(problems),
        bound=0,
        reason=f"{node}: {reason}" if node else reason,
        fix=fix,
    )


def judge_memlock(node: str, memlock: Memlock, expect: Expectations) -> Verdict:
    """Locked memory unlimited for the NCCL user, or at least `expect.gpu.memlock_min_kib`
    (NCCL: `Call to ibv_create_qp failed ... -12` otherwise)."""
    user = expect.gpu.nccl_user or "the SSH user"
    floor = expect.gpu.memlock_min_kib
    if memlock.unlimited or (floor is not None and (memlock.kib or 0) >= floor):
        return PASS
    value = memlock.error or f"{memlock.kib} KiB"
    want = "unlimited" if floor is None else f"at least {floor} KiB"
    return Verdict(
        False,
        measured=memlock.kib,
        bound=floor,
        reason=f"{node}: memlock (ulimit -l) for {user} is {value}, expected {want}",
        fix="set `* - memlock unlimited` in /etc/security/limits.d/ (and LimitMEMLOCK=infinity "
        "for containerd/slurmd), then log in again",
    )


def judge_modules(node: str, modules: LoadedModules, expect: Expectations) -> Verdict:
    """Every `expect.gpu.modules` kernel module loaded (`nvidia`; `nvidia_peermem` for GDR)."""
    if modules.error is not None:
        return Verdict(False, reason=f"{node}: {modules.error}", fix="re-run")
    missing = [m for m in expect.gpu.modules if not modules.loaded(m)]
    if not missing:
        return PASS
    return Verdict(
        False,
        reason=f"{node}: kernel module(s) not loaded: {', '.join(missing)}",
        fix=f"`modprobe {' '.join(missing)}` and make it persistent in /etc/modules-load.d/",
    )


def judge_rdma_pcie(node: str, sysfs: RdmaSysfs, expect: Expectations) -> Verdict:
    """Every RDMA device's PCIe link at its maximum speed and width (sysfs), and at least
    `expect.rdma.min_devices` devices described there."""
    if sysfs.error is not None:
        return Verdict(False, reason=f"{node}: RDMA sysfs: {sysfs.error}", fix="re-run")
    problems = []
    if len(sysfs.devices) < expect.rdma.min_devices:
        problems.append(
            f"{len(sysfs.devices)} devices in /sys/class/infiniband, "
            f"expected at least {expect.rdma.min_devices}"
        )
    for dev in sysfs.devices:
        pairs = (
            ("", dev.speed_gts, dev.speed_max_gts, " GT/s"),
            ("x", dev.width, dev.width_max, ""),
        )
        if any(cur is None or top is None for _, cur, top, _ in pairs):
            shown = ", ".join(f"{k}={v}" for k, v in dev.raw if k != "numa_node")
            problems.append(f"{dev.device} PCIe link not reported ({shown})")
            continue
        low = [f"{k}{cur:g}{u} of {k}{top:g}{u}" for k, cur, top, u in pairs if cur < top]  # type: ignore[operator]
        if low:
            problems.append(f"{dev.device} PCIe link {', '.join(low)}")
    return _verdict(
        node,
        problems,
        "a lasting downgrade is a bad slot, riser or BIOS setting: have the host repaired "
        "(on a virtual function without link data, set expect.gpu.rdma_sysfs: false)",
    )


def _matches(found: str, version: str) -> bool:
    """`2.28.7-1+cuda12.9` matches `2.28.7`; `2.28.70` does not."""
    return found == version or (found.startswith(version) and found[len(version)] in "-+~_ ")


def judge_versions(versions: Mapping[str, Mapping[str, str]], expect: Expectations) -> Verdict:
    """Each COMPARED component identical on every node, equal to `expect.versions.pin`, not in
    `expect.versions.known_bad` (with its reason).

    `versions` is node -> component -> version (a node lacking a component others have is a
    mismatch: `missing`).
    """
    pins = expect.versions.pin
    present = {c for found in versions.values() for c in found}
    components = [c for c in COMPARED if c in present] + sorted(set(pins) - set(COMPARED))
    problems: list[str] = []
    for comp in components:
        seen: dict[str, list[str]] = {}
        for node, found in versions.items():
            seen.setdefault(found.get(comp, "missing"), []).append(node)
        pin = pins.get(comp)
        if pin is not None:
            off = {v: n for v, n in seen.items() if not _matches(v, pin)}
            problems += [f"{comp} {v} on {', '.join(n)} (pinned {pin})" for v, n in off.items()]
        elif len(seen) > 1:
            usual = max(seen, key=lambda v: len(seen[v]))
            problems += [
                f"{comp} {v} on {', '.join(n)} (others {usual})"
                for v, n in seen.items()
                if v != usual
            ]
        for bad in expect.versions.known_bad:
            if bad.tool != comp:
                continue
            problems += [
                f"{comp} {v} on {', '.join(n)} is known bad: {bad.reason} ({bad.source})"
                for v, n in seen.items()
                if _matches(v, bad.version)
            ]
    return _verdict(
        None,
        problems,
        "install the same (pinned, not known-bad) version on every node and reboot if it is "
        "the driver",
    )


def _label(device: str, query: GpuQuery | None) -> str:
    """`GPU 3 (00000000:5D:00.0)` for topo's `GPU3`, the bus id from `--query-gpu`."""
    digits = device.removeprefix("GPU")
    gpu = query.gpu(int(digits)) if query is not None and digits.isdigit() else None
    return gpu.label if gpu is not None else f"GPU {digits} (bus ?)"


def judge_gpu_nic_numa(
    node: str, topo: Topology, sysfs: RdmaSysfs, query: GpuQuery | None = None
) -> Verdict:
    """Each GPU's NUMA node (`topo -m`) is that of one of its nearest RDMA devices (sysfs)."""
    if topo.error is not None:
        return Verdict(
            False, reason=f"{node}: nvidia-smi topo -m unreadable: {topo.error}", fix="re-run"
        )
    if sysfs.error is not None:
        return Verdict(False, reason=f"{node}: RDMA sysfs: {sysfs.error}", fix="re-run")
    nic_numa = {d.device: d.numa_node for d in sysfs.devices}
    problems = []
    for row in topo.gpus:
        nearest = topo.nearest_nics(row.device)
        numas = {nic: nic_numa.get(nic) for nic in nearest}
        gpu_numa = row.numa_affinity
        if gpu_numa is not None and gpu_numa in {str(v) for v in numas.values()}:
            continue
        shown = ", ".join(f"{n} on NUMA {v if v is not None else '?'}" for n, v in numas.items())
        problems.append(
            f"{_label(row.device, query)} on NUMA {row.numa_affinity or '?'}, "
            f"nearest RDMA device {shown or 'none'}"
        )
    return _verdict(
        node,
        problems,
        "check the instance type's NIC/GPU layout and "
        "/sys/class/infiniband/*/device/numa_node; pin each rank to its GPU's NUMA node",
    )


def judge_nccl_ib_hca(node: str, topo: Topology, hca: str | None) -> Verdict:
    """NCCL_IB_HCA selects every RDMA device that topology makes nearest to some GPU."""
    if topo.error is not None:
        return Verdict(
            False, reason=f"{node}: nvidia-smi topo -m unreadable: {topo.error}", fix="re-run"
        )
    needed = dict.fromkeys(nic for row in topo.gpus for nic in topo.nearest_nics(row.device))
    if not needed:
        return Verdict(
            False,
            reason=f"{node}: topo -m shows no RDMA device near any GPU",
            fix="check that the eRDMA devices are up (ibv_devinfo) and seen by nvidia-smi topo -m",
        )
    missed = [nic for nic in needed if not hca_selects(hca, nic)]
    if not missed:
        return PASS
    return Verdict(
        False,
        reason=f"{node}: NCCL_IB_HCA={hca} leaves out {', '.join(missed)} (nearest to some GPU)",
        fix=f"set NCCL_IB_HCA to cover {', '.join(needed)} (a prefix such as `erdma` covers all)",
    )
