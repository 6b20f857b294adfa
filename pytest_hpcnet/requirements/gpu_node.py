"""Node-wide GPU judges: memlock, kernel modules, PCIe of the RDMA devices, versions across
nodes, GPU-NIC topology.

Same contract as `gpu`: pure, reading only `expect.gpu`, `expect.rdma` and `expect.versions`;
a Verdict naming node, value and fix, with the values as measurements (subject the device or
GPU); an output that could not be read whole is not measured, never a pass or a failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import GPU_QUERY, GpuQuery
from pytest_hpcnet.probes.gpu_host import (
    GPU_DRIVER,
    GPU_MEMLOCK,
    GPU_MODULES,
    LoadedModules,
    Memlock,
)
from pytest_hpcnet.probes.gpu_rdma import GPU_CUDA, RDMA_SYSFS, RdmaSysfs
from pytest_hpcnet.probes.gpu_topo import GPU_TOPO, Topology, hca_selects
from pytest_hpcnet.probes.versions import VERSIONS
from pytest_hpcnet.requirements.agreement import Entry, by_type, compare
from pytest_hpcnet.requirements.firmware import ITEMS as FIRMWARE_ITEMS
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

COMPARED = (
    "nvidia_driver",
    "cuda",
    "nccl",
    "dcgm",
    "torch",
    "os",
    "kernel",
    "erdma",
    "rdma-core",
    "perftest",
)
"""The components whose version must be identical on every node (where any node has them)."""
FIX_RERUN = "re-run; if the output is cut short again, run the command on the node by hand"


def _verdict(
    node: str | None,
    problems: Sequence[str],
    fix: str,
    unread: Sequence[str] = (),
    **kw,
) -> Verdict:
    """Fail naming each problem (after `node: ` when given) with `fix`; else not measured
    naming what could not be read; else pass. `kw` (measurements, sections) is kept."""
    named = [*problems, *unread]
    reason = "; ".join(named)
    reason = f"{node}: {reason}" if node and reason else reason
    if problems:
        return failing(reason, fix, measured=len(problems), bound=0, **kw)
    if unread:
        return not_measured(reason, FIX_RERUN, **kw)
    return passing(**kw)


def judge_memlock(node: str, memlock: Memlock, expect: Expectations) -> Verdict:
    """Locked memory unlimited for the NCCL user, or at least `expect.gpu.memlock_min_kib`
    (NCCL: `Call to ibv_create_qp failed ... -12` otherwise). An unreadable `ulimit -l`
    (no value, `command not found`, an unknown user) is not measured, whatever the floor."""
    user = expect.gpu.nccl_user or "the SSH user"
    floor = expect.gpu.memlock_min_kib
    shown = "unlimited" if memlock.unlimited else memlock.kib
    measured = Measurement(
        "memlock",
        shown,
        "KiB",
        "unlimited" if floor is None else floor,
        ">=",
        "expect.gpu.memlock_min_kib",
    )
    common = {"measurements": (measured,), "sections": (GPU_MEMLOCK.name,)}
    if memlock.unlimited:
        return passing(**common)
    if memlock.error is not None or memlock.kib is None:
        return not_measured(
            f"{node}: memlock (ulimit -l) for {user} unreadable: {memlock.error or 'no value'}",
            "check that the NCCL user exists (expect.gpu.nccl_user) and `ulimit -l` runs "
            "in its login shell",
            **common,
        )
    if floor is not None and memlock.kib >= floor:
        return passing(**common, measured=memlock.kib, bound=floor)
    want = "unlimited" if floor is None else f"at least {floor} KiB"
    return failing(
        f"{node}: memlock (ulimit -l) for {user} is {memlock.kib} KiB, expected {want}",
        "set `* - memlock unlimited` in /etc/security/limits.d/ (and LimitMEMLOCK=infinity "
        "for containerd/slurmd), then log in again",
        measured=memlock.kib,
        bound=floor,
        **common,
    )


def judge_modules(node: str, modules: LoadedModules, expect: Expectations) -> Verdict:
    """Every `expect.gpu.modules` kernel module loaded (`nvidia`; `nvidia_peermem` for GDR);
    each module measured `loaded` or `not loaded`."""
    sections = (GPU_MODULES.name,)
    if modules.error is not None:
        return not_measured(f"{node}: {modules.error}", FIX_RERUN, sections=sections)
    measurements = tuple(
        Measurement(
            name,
            "loaded" if modules.loaded(name) else "not loaded",
            "",
            "loaded",
            "==",
            "expect.gpu.modules",
        )
        for name in expect.gpu.modules
    )
    missing = [m for m in expect.gpu.modules if not modules.loaded(m)]
    if not missing:
        return passing(measurements=measurements, sections=sections)
    return failing(
        f"{node}: kernel module(s) not loaded: {', '.join(missing)}",
        f"`modprobe {' '.join(missing)}` and make it persistent in /etc/modules-load.d/",
        measurements=measurements,
        sections=sections,
        code="HPCNET-GPU-MODULES",
    )


def judge_rdma_pcie(node: str, sysfs: RdmaSysfs, expect: Expectations) -> Verdict:
    """Every RDMA device's PCIe link at its maximum speed and width (sysfs; `pcie_speed` and
    `pcie_width` per device), and at least `expect.rdma.min_devices` devices described there.
    A device whose link sysfs does not report is not measured."""
    sections = (RDMA_SYSFS.name,)
    if sysfs.error is not None:
        return not_measured(f"{node}: RDMA sysfs: {sysfs.error}", FIX_RERUN, sections=sections)
    want = expect.rdma.min_devices
    measurements = [
        Measurement("rdma_devices", len(sysfs.devices), "", want, ">=", "expect.rdma.min_devices")
    ]
    problems, unread = [], []
    if len(sysfs.devices) < want:
        problems.append(
            f"{len(sysfs.devices)} devices in /sys/class/infiniband, expected at least {want}"
        )
    for dev in sysfs.devices:
        pairs = (
            ("", dev.speed_gts, dev.speed_max_gts, " GT/s"),
            ("x", dev.width, dev.width_max, ""),
        )
        measurements += [
            Measurement(
                "pcie_speed",
                dev.speed_gts,
                "GT/s",
                dev.speed_max_gts,
                ">=",
                "max_link_speed",
                dev.device,
            ),
            Measurement(
                "pcie_width", dev.width, "lanes", dev.width_max, ">=", "max_link_width", dev.device
            ),
        ]
        if any(cur is None or top is None for _, cur, top, _ in pairs):
            shown = ", ".join(f"{k}={v}" for k, v in dev.raw if k != "numa_node")
            unread.append(f"{dev.device} PCIe link not reported ({shown})")
            continue
        low = [f"{k}{cur:g}{u} of {k}{top:g}{u}" for k, cur, top, u in pairs if cur < top]  # type: ignore[operator]
        if low:
            problems.append(f"{dev.device} PCIe link {', '.join(low)}")
    return _verdict(
        node,
        problems,
        "a lasting downgrade is a bad slot, riser or BIOS setting: have the host repaired "
        "(on a virtual function without link data, set expect.gpu.rdma_sysfs: false)",
        unread,
        measurements=tuple(measurements),
        sections=sections,
    )


def _matches(found: str, version: str) -> bool:
    """`2.28.7-1+cuda12.9` matches `2.28.7`; `2.28.70` does not."""
    return found == version or (found.startswith(version) and found[len(version)] in "-+~_ ")


def judge_versions(
    versions: Mapping[str, Mapping[str, str] | None],
    expect: Expectations,
    types: Mapping[str, str | None] | None = None,
) -> Verdict:
    """Each COMPARED component identical on every node of one instance type (`types`: node
    -> its type; the odd nodes named with the majority value and count, an even split
    failing as `no majority`), equal to `expect.versions.pin`, not in
    `expect.versions.known_bad` (with its reason); each component's versions measured.

    `versions` is node -> component -> version (a node lacking a component others have is a
    mismatch: `missing`); None for a node whose versions could not be read (not measured,
    unless the others already disagree). `extra["suspects"]` names the nodes at fault (none
    where there is no majority).
    """
    pins = expect.versions.pin
    read = {n: found for n, found in versions.items() if found is not None}
    unread = sorted(n for n, found in versions.items() if found is None)
    present = {c for found in read.values() for c in found}
    pinned = set(pins) - set(COMPARED) - set(FIRMWARE_ITEMS)  # firmware: its own check
    components = [c for c in COMPARED if c in present] + sorted(pinned)
    groups = by_type(list(read), types)
    problems: list[str] = []
    suspects: list[str] = []
    measurements: list[Measurement] = []
    for comp in components:
        entries = [Entry(node, "", found.get(comp, "missing")) for node, found in read.items()]
        compared = compare(comp, entries, groups, pins.get(comp), matches=_matches)
        problems += compared.problems
        suspects += compared.suspects
        measurements += compared.measurements
        seen: dict[str, list[str]] = {}
        for entry in entries:
            seen.setdefault(entry.value, []).append(entry.node)
        for bad in expect.versions.known_bad:
            if bad.tool != comp:
                continue
            hit = {v: n for v, n in seen.items() if _matches(v, bad.version)}
            problems += [
                f"{comp} {v} on {', '.join(n)} is known bad: {bad.reason} ({bad.source})"
                for v, n in hit.items()
            ]
            suspects += [node for nodes in hit.values() for node in nodes]
    return _verdict(
        None,
        problems,
        "install the same (pinned, not known-bad) version on every node and reboot if it is "
        "the driver",
        [f"versions unreadable on {', '.join(unread)}"] if unread else [],
        measurements=tuple(measurements),
        sections=(VERSIONS.name, GPU_QUERY.name, GPU_DRIVER.name, GPU_CUDA.name),
        extra={"suspects": [n for n in read if n in set(suspects)]},
    )


def _label(device: str, query: GpuQuery | None) -> str:
    """`GPU 3 (00000000:5D:00.0)` for topo's `GPU3`, the bus id from `--query-gpu`."""
    digits = device.removeprefix("GPU")
    gpu = query.gpu(int(digits)) if query is not None and digits.isdigit() else None
    return gpu.label if gpu is not None else f"GPU {digits} (bus ?)"


def _link_to(topo: Topology, gpu: str, nic: str) -> str | None:
    """`topo -m`'s link word from a GPU to an RDMA device named by the legend."""
    column = {name: col for col, name in topo.nic_names}.get(nic, nic)
    link = topo.link(gpu, column)
    return link.strip() if link else None


def _topo_unreadable(node: str, topo: Topology) -> Verdict | None:
    if topo.error is None:
        return None
    return not_measured(
        f"{node}: nvidia-smi topo -m unreadable: {topo.error}", FIX_RERUN, sections=(GPU_TOPO.name,)
    )


def judge_gpu_nic_numa(
    node: str, topo: Topology, sysfs: RdmaSysfs, query: GpuQuery | None = None
) -> Verdict:
    """Each GPU's NUMA node (`topo -m`) is that of one of its nearest RDMA devices (sysfs;
    `numa_node` per GPU). A GPU on a NUMA node with no RDMA device at all, which `topo -m`
    also shows crossing the SMP link (SYS), is the instance's layout: said in the reason, not
    failed. A NUMA node neither side reports is not measured."""
    bad = _topo_unreadable(node, topo)
    if bad is not None:
        return bad
    sections = (
        (GPU_TOPO.name, RDMA_SYSFS.name, GPU_QUERY.name)
        if query
        else (GPU_TOPO.name, RDMA_SYSFS.name)
    )
    if sysfs.error is not None:
        return not_measured(f"{node}: RDMA sysfs: {sysfs.error}", FIX_RERUN, sections=sections)
    nic_numa = {d.device: d.numa_node for d in sysfs.devices}
    local = {str(v) for v in nic_numa.values() if v is not None}
    problems, unread, remote = [], [], {}
    measurements = []
    for row in topo.gpus:
        nearest = topo.nearest_nics(row.device)
        numas = {nic: nic_numa.get(nic) for nic in nearest}
        gpu_numa = row.numa_affinity
        subject = f"GPU {row.device.removeprefix('GPU')}"
        wanted = sorted({str(v) for v in numas.values() if v is not None})
        measurements.append(
            Measurement("numa_node", gpu_numa, "", wanted, "in", "nearest RDMA device", subject)
        )
        if gpu_numa is not None and gpu_numa in wanted:
            continue
        known = None not in numas.values()  # no nearest device at all is known too: a fault
        crossing = all(_link_to(topo, row.device, nic) == "SYS" for nic in nearest)
        if gpu_numa is not None and numas and known and crossing and gpu_numa not in local:
            remote.setdefault(gpu_numa, []).append(subject)
            measurements[-1] = replace(measurements[-1], comparison=None)  # not judged
            continue  # the instance's layout: no RDMA device at all on this GPU's NUMA node
        shown = ", ".join(f"{n} on NUMA {v if v is not None else '?'}" for n, v in numas.items())
        found = (
            f"{_label(row.device, query)} on NUMA {gpu_numa or '?'}, "
            f"nearest RDMA device {shown or 'none'}"
        )
        (problems if gpu_numa is not None and known else unread).append(found)
    verdict = _verdict(
        node,
        problems,
        "check the instance type's NIC/GPU layout and "
        "/sys/class/infiniband/*/device/numa_node; pin each rank to its GPU's NUMA node",
        unread,
        measurements=tuple(measurements),
        sections=sections,
    )
    if verdict and remote:
        layout = "; ".join(
            f"no RDMA device on NUMA {n} ({', '.join(g)})" for n, g in remote.items()
        )
        return verdict.with_reason(f"{node}: {layout}: their traffic crosses the SMP link")
    return verdict


def nic_map(topo: Topology) -> str:
    """`GPU0=erdma_0,GPU1=erdma_0,...`: each GPU's nearest RDMA device(s) (`+` between ties)."""
    return ",".join(f"{r.device}={'+'.join(topo.nearest_nics(r.device)) or '-'}" for r in topo.gpus)


def judge_nccl_ib_hca(node: str, topo: Topology, hca: str | None) -> Verdict:
    """NCCL_IB_HCA selects every RDMA device that topology makes nearest to some GPU; the
    GPU-NIC map (`nic_map`) and NCCL_IB_HCA measured as they are."""
    bad = _topo_unreadable(node, topo)
    if bad is not None:
        return bad
    common = {
        "measurements": (
            Measurement("nic_map", nic_map(topo) or None, "", None, None, "nvidia-smi topo -m"),
            Measurement("NCCL_IB_HCA", hca or "unset (all)", "", None, None, "benchmarks.nccl.env"),
        ),
        "sections": (GPU_TOPO.name,),
    }
    needed = dict.fromkeys(nic for row in topo.gpus for nic in topo.nearest_nics(row.device))
    if not needed:
        return failing(
            f"{node}: topo -m shows no RDMA device near any GPU",
            "check that the eRDMA devices are up (ibv_devinfo) and seen by nvidia-smi topo -m",
            **common,
        )
    missed = [nic for nic in needed if not hca_selects(hca, nic)]
    if not missed:
        return passing(**common)
    return failing(
        f"{node}: NCCL_IB_HCA={hca} leaves out {', '.join(missed)} (nearest to some GPU)",
        f"set NCCL_IB_HCA to cover {', '.join(needed)} (a prefix such as `erdma` covers all)",
        **common,
    )
