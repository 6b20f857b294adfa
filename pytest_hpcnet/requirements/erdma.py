"""Judges of the eRDMA-in-depth requirements: one `Verdict` each, reading only
`expect.rdma` and `expect.erdma`.

The per-device findings of `erdma_judges` (verdicts whose subject names node and device) are
folded into one verdict whose reason names every failing "node07 erdma_1". A figure the
profile does not set (Alibaba publishes none) is reported by the suite, never judged here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.counters import CounterDelta
from pytest_hpcnet.probes.erdma import (
    ErdmaDriver,
    EriIdentities,
    GidTables,
    expected_active_mtu,
)
from pytest_hpcnet.probes.erdma_gdr import GdrState
from pytest_hpcnet.probes.eri_address import EriAddress
from pytest_hpcnet.probes.links import Interfaces
from pytest_hpcnet.probes.nccl_debug import NcclNetLog
from pytest_hpcnet.probes.rdma import RdmaDevices
from pytest_hpcnet.requirements.erdma_judges import (
    finding,
    instance_figure,
    judge_counters,
    judge_gid_index,
    judge_instance_bandwidth,
    judge_nccl_transport,
    judge_rdma_traffic,
)
from pytest_hpcnet.requirements.judges import Verdict, at_least
from pytest_hpcnet.requirements.rdma import no_eri
from pytest_hpcnet.requirements.verdict import Measurement, not_applicable, not_measured


def reported_first(verdict: Verdict, *found: Measurement) -> Verdict:
    """`verdict` with `found` recorded before its own measurements (`with_reported`)."""
    return verdict.with_reported(*found)


def no_sysfs(ids: EriIdentities) -> tuple[Measurement, ...]:
    """The measurement that says sysfs shows no RDMA device at all (none when it does)."""
    if not ids.no_devices:
        return ()
    return (Measurement("sysfs", "no /sys/class/infiniband", "", None, None, "sysfs"),)


def from_findings(findings: Sequence[Verdict], measured: float | None = None) -> Verdict:
    """Pass when every finding is ok (and there is one); else the failing ones' reasons."""
    bad = [f.reason for f in findings if not f.ok]
    if not findings:
        return not_measured("nothing judged (no device found)", measured=measured)
    found = tuple(m for f in findings for m in f.measurements)  # each with its device
    if bad:
        return Verdict(False, measured, reason="; ".join(bad), measurements=found)
    return Verdict(True, measured, reason="; ".join(f.reason for f in findings), measurements=found)


def expected_eris(expect: Expectations, node_min: int | None = None) -> tuple[int, str, bool]:
    """(count, source, exact): `expect.erdma.eris` exactly, else at least the RDMA minimum."""
    if expect.erdma.eris is not None:
        return expect.erdma.eris, "expect.erdma.eris", True
    if node_min is not None:
        return node_min, "inventory nodes[].rdma.min_devices", False
    return expect.rdma.min_devices, "expect.rdma.min_devices", False


def judge_erdma_identity(
    node: str,
    ids: EriIdentities,
    expect: Expectations,
    name_glob: str | None = None,
    node_min: int | None = None,
) -> Verdict:
    """The node's ERIs, found by driver `erdma` or PCI id 1ded:107f (not by name), number
    `expect.erdma.eris` (or at least the RDMA minimum when the profile gives no count);
    each ERI's NUMA node reported."""
    wanted, source, exact = expected_eris(expect, node_min)
    verdict = _identity(node, ids, expect, name_glob, node_min)
    count = Measurement(
        "eris", verdict.measured, "devices", wanted, "==" if exact else ">=", source
    )
    numa = (Measurement(f"{d.name} numa_node", d.numa_node, "", None, None, "sysfs")
            for d in ids.eris())  # fmt: skip
    return reported_first(verdict, *no_sysfs(ids), count, *numa)


def _identity(
    node: str,
    ids: EriIdentities,
    expect: Expectations,
    name_glob: str | None,
    node_min: int | None,
) -> Verdict:
    wanted, _, exact = expected_eris(expect, node_min)
    found = ids.eris(name_glob)
    if ids.problems and not ids.devices:
        return Verdict(False, None, wanted, reason=f"{node}: {ids.problems[0]}")
    why = ids.reason(wanted if exact else None, name_glob)
    if why is None and not exact and len(found) < wanted:
        names = ", ".join(d.name for d in found)
        why = f"{len(found)} eRDMA devices ({names}), at least {wanted} expected"
    count = float(len(found))
    if why is not None:
        return Verdict(False, count, float(wanted), None, f"{node}: {why}")
    names = ", ".join(d.name for d in found)
    return Verdict(True, count, float(wanted), None, f"{node}: {names}")


def judge_erdma_driver(node: str, driver: ErdmaDriver, expect: Expectations) -> Verdict:
    """erdma loaded, `compat_mode` and (where set) the congestion control and version as
    `expect.erdma` says. CC not readable (no `eadm`) fails only when expected; so does a
    version sysfs, modinfo and the package all leave unreported (the public driver sets no
    MODULE_VERSION) only where `driver_version` pins one. The version, compat_mode, each
    device's congestion control and nominal port rate are reported."""
    e = expect.erdma
    pin = e.driver_version
    where = f"erdma version ({driver.version_source or 'not reported'})"
    found = [Measurement("version", driver.version, "", pin, "==" if pin else None, where)]
    want = None if e.compat_mode is None else str(e.compat_mode)  # unset: reported only
    found.append(Measurement("compat_mode", str(driver.compat_mode), "", want,
                             "==" if want else None, "expect.erdma.compat_mode"))  # fmt: skip
    for dev, algo in sorted((driver.cc or {}).items()):
        seen = algo or (driver.cc_notes or {}).get(dev, "not readable")
        found.append(Measurement(f"{dev} cc", seen, "", e.cc, "==" if e.cc else None,
                                 "expect.erdma.cc"))  # fmt: skip
    for dev, rate in sorted((driver.rates or {}).items()):
        # the driver hard-codes "100 Gb/sec (4X EDR)": reported, never a threshold
        found.append(Measurement(f"{dev} port rate (nominal)", rate, "", None, None,
                                 "sysfs, not a capacity"))  # fmt: skip
    return reported_first(_driver(node, driver, expect), *found)


def _driver(node: str, driver: ErdmaDriver, expect: Expectations) -> Verdict:
    if driver.loaded is not True:
        why = "not loaded" if driver.loaded is False else driver.problems[0]
        return Verdict(False, reason=f"{node}: erdma module {why}")
    problems = []
    pin = expect.erdma.driver_version
    if pin is not None and driver.version is None:
        problems.append(f"erdma version not reported (sysfs, modinfo, package), {pin} pinned")
    elif pin is not None and driver.version != pin:
        problems.append(f"erdma {driver.version} ({driver.version_source}), {pin} pinned")
    want = expect.erdma.compat_mode
    if want is not None and driver.compat_mode is not want:
        seen = {True: "Y", False: "N", None: "unreadable"}[driver.compat_mode]
        problems.append(f"compat_mode is {seen}, {'Y' if want else 'N'} expected")
    cc = expect.erdma.cc
    for dev, algo in sorted((driver.cc or {}).items()) if cc else ():
        if algo != cc:
            note = (driver.cc_notes or {}).get(dev) or f"is {algo}"
            problems.append(f"{dev} congestion control {note}, {cc} expected")
    if cc and not driver.cc:
        problems.append(f"no device's congestion control read, {cc} expected")
    if problems:
        return Verdict(False, reason=f"{node}: {'; '.join(problems)}")
    algos = ", ".join(f"{d} {a or 'cc not readable'}" for d, a in sorted((driver.cc or {}).items()))
    mode = {True: "Y", False: "N", None: "unread"}[driver.compat_mode]
    version = (
        f"{driver.version} ({driver.version_source})"
        if driver.version
        else "version not reported (no MODULE_VERSION, modinfo or package)"
    )
    return Verdict(True, reason=f"{node}: erdma {version}, compat_mode {mode}; {algos}")


def judge_erdma_active_mtu(
    node: str,
    devinfo: RdmaDevices,
    eris: Sequence[str],
    netdev_of: Mapping[str, str],
    netdev_mtu: Mapping[str, int],
) -> Verdict:
    """Each ERI's port-1 `active_mtu` is what the driver derives from its netdev's MTU
    (8500 -> 4096, 1400 -> 1024, S12): anything else means the MTU changed underneath."""
    findings = []
    for name in eris:
        dev = devinfo.device(name)
        port = dev.port(1) if dev else None
        netdev = netdev_of.get(name)
        mtu = netdev_mtu.get(netdev or "")
        if port is None or port.active_mtu is None:
            findings.append(finding(False, f"{node} {name}: no active_mtu reported", node, name))
        elif mtu is None:
            why = f"netdev {netdev or '(none found)'} MTU not known"
            findings.append(finding(False, f"{node} {name}: {why}", node, name))
        else:
            want = expected_active_mtu(mtu)
            ok = port.active_mtu == want
            why = f"active_mtu {port.active_mtu}, {want} expected for {netdev} MTU {mtu}"
            findings.append(finding(ok, f"{node} {name}: {why}", node, name))
    return from_findings(findings)


def judge_eri_active_mtu(
    node: str,
    devinfo: RdmaDevices,
    ids: EriIdentities,
    eris: Sequence[str],
    netdevs: Mapping[str, tuple[str, str]],
    links: Interfaces,
) -> Verdict:
    """`judge_erdma_active_mtu` on the node's ERIs, each ERI's netdev from sysfs (else
    `rdma link`) and its MTU from `ip -s link`; a node without an ERI fails."""
    if not eris:
        return reported_first(no_eri(node), *no_sysfs(ids))
    netdev_of = {dev: netdev for dev, (netdev, _) in netdevs.items()}
    mtus = {i.name: i.mtu for i in links.interfaces if i.mtu}
    verdict = judge_erdma_active_mtu(node, devinfo, eris, netdev_of, mtus)
    said = Measurement("active_mtu", "ok" if verdict else "mismatch", "", None, None,
                       "erdma_query_port: 8500 -> 4096, 1400 -> 1024 (S12)")  # fmt: skip
    return reported_first(verdict, *no_sysfs(ids), said)


def eri_found(node: str, eris: Sequence[str]) -> Verdict:
    """The node has an ERI; else it fails (`rdma.no_eri`)."""
    return no_eri(node) if not eris else Verdict(True)


def judge_eri_gid(
    node: str,
    tables: GidTables,
    eris: Sequence[str],
    used: Mapping[str, int | None],
    addresses: Mapping[str, EriAddress],
) -> Verdict:
    """`judge_erdma_gid` with each ERI's GID index and own address reported; a node without
    an ERI fails."""
    if not eris:
        return no_eri(node)
    found = [
        Measurement(f"{dev} gid_index", index, "", None, None, "ibv_devinfo -v (IPv4 GID)")
        for dev, index in used.items()
    ]
    found += [
        Measurement(f"{dev} address", own.address, "", None, None, own.note)
        for dev, own in addresses.items()
    ]
    return reported_first(judge_erdma_gid(node, tables, eris, used, addresses), *found)


def judge_erdma_gid(
    node: str,
    tables: GidTables,
    eris: Sequence[str],
    used: Mapping[str, int | None],
    addresses: Mapping[str, EriAddress],
) -> Verdict:
    """The GID index perftest and NCCL get on each ERI is the IPv4 GID of that ERI's own
    interface address (`ibv_devinfo -v`; erdma_1 carries eth1's); an ERI whose netdev has
    no IPv4 address in a whole `ip addr` listing fails, one whose listing was not read
    whole (missing, cut) is not measured, one whose netdev is unknown is judged on the
    data-plane interface's address and says so. A failure beside an ERI not measured fails
    and names both."""
    findings, unread = [], []
    for dev in eris:
        own = addresses.get(dev)
        if own is not None and own.address is None:
            if own.unread:
                unread.append(f"{node} {own.note}")
            else:
                findings.append(finding(False, f"{node} {own.note}", node, dev))
            continue
        found = judge_gid_index(node, dev, tables, used.get(dev), own.address if own else None)
        if own is not None and own.fallback:
            found = finding(found.ok, f"{found.reason} ({own.note})", node, dev)
        findings.append(found)
    if not unread:
        return from_findings(findings)
    missing = "; ".join(unread)
    judged = from_findings(findings) if findings else None
    if judged is not None and judged.outcome == "fail":
        return judged.with_reason(f"{judged.reason}; not measured: {missing}")
    return not_measured(missing)


def judge_erdma_numa(node: str, ids: EriIdentities, expect: Expectations) -> Verdict:
    """Each device in `expect.erdma.numa` sits on that NUMA node (sysfs numa_node)."""
    by_name = {d.name: d for d in ids.devices}
    findings = []
    for dev, want in sorted(expect.erdma.numa.items()):
        seen = by_name[dev].numa_node if dev in by_name else None
        why = "not in sysfs" if dev not in by_name else f"NUMA node {seen}, {want} expected"
        findings.append(finding(seen == want, f"{node} {dev}: {why}", node, dev))
    return reported_first(from_findings(findings), *no_sysfs(ids))


def eri_bound(expect: Expectations) -> float | None:
    """The per-ERI floor in Gbit/s (`per_eri_gbps` x `bw_fraction`), None when unpublished."""
    e = expect.erdma
    return None if e.per_eri_gbps is None else e.per_eri_gbps * e.bw_fraction


def judge_eri_bw(
    node_pair: str,
    device: str,
    gbps: float | None,
    error: str | None,
    expect: Expectations,
    tool: str = "ib_write_bw",
) -> Verdict:
    """One ERI pair's `tool` run (ib_write_bw) at least `per_eri_gbps` x `bw_fraction`."""
    bound = eri_bound(expect)
    where = f"{node_pair} {device}"
    if error is not None:
        return Verdict(False, None, bound, None, f"{where}: {tool} failed: {error}")
    text = f"{where}: no bandwidth measured"
    if gbps is not None and bound is not None:
        text = (
            f"{where}: {gbps:.2f} Gbit/s < {bound:.2f} ({expect.erdma.bw_fraction:.0%} of "
            f"{expect.erdma.per_eri_gbps:g} per ERI)"
        )
    return at_least(gbps, bound, text, ceiling=expect.ib_write_bw.max_gbps)


def judge_gdr_bw(
    node_pair: str,
    device: str,
    gpus: tuple[int | None, int | None],
    gbps: float | None,
    error: str | None,
    expect: Expectations,
) -> Verdict:
    """One ERI pair's ib_write_bw from GPU memory (`--use_cuda`, GPUs `gpus` of the client
    and the server) at least `per_eri_gbps` x `bw_fraction`, as from host memory."""
    shown = "/".join("?" if g is None else f"GPU{g}" for g in gpus)
    label = f"{device} ({shown})"
    return judge_eri_bw(node_pair, label, gbps, error, expect, "ib_write_bw --use_cuda")


def judge_instance_bw(
    node: str,
    per_device: Mapping[str, float | None],
    devices: Sequence[str],
    expect: Expectations,
    nic_indexes: Sequence[int] | None = None,
) -> Verdict:
    """All of a node's ERIs at once reach `bw_fraction` of the per-instance figure
    (`same_nic_index_gbps` when the cloud audit found every ERI on one NIC index, on the
    family that publishes that rule; the rated figure when the indexes are unknown, and a
    failure then says the cap may explain it)."""
    e = expect.erdma
    if e.per_instance_gbps is None:
        return Verdict(False, reason=f"{node}: no per-instance figure (expect.erdma)")
    figure, note = instance_figure(e.per_instance_gbps, nic_indexes, e.same_nic_index_gbps)
    judged = judge_instance_bandwidth(node, per_device, devices, figure, e.bw_fraction, note)
    if not judged.ok and nic_indexes is None and e.same_nic_index_gbps is not None:
        cap = f"{e.same_nic_index_gbps:g} Gbit/s, source S1"
        judged = judged.with_reason(
            f"{judged.reason}; the one-NIC-index cap ({cap}) may explain it: the cloud "
            "audit was not in scope to tell (NetworkCardIndex of each ERI)"
        )
    total = (
        sum(per_device[d] or 0.0 for d in devices)
        if all(per_device.get(d) is not None for d in devices)
        else None
    )
    bound = figure * e.bw_fraction
    margin = (total - bound) / bound if total is not None else None
    return Verdict(judged.ok, total, bound, margin, judged.reason)


def judge_nccl_network(
    log: NcclNetLog, nodes: Sequence[str], expect: Expectations, device_glob: str | None
) -> Verdict:
    """NCCL chose `expect.erdma.nccl_network` on every node (a Socket fallback fails and
    names the nodes), on devices matching the glob, with GPUDirect RDMA on where expected."""
    network = expect.erdma.nccl_network or "IB"
    findings = judge_nccl_transport(log, nodes, network, device_glob, expect.erdma.gdr is True)
    return from_findings(findings)


def judge_counter_deltas(
    deltas: Mapping[str, CounterDelta], bounds: Mapping[str, int] | None = None
) -> Verdict:
    """No error, drop, rate-limit-drop or connect-failure counter moved during the phase."""
    return from_findings(
        [f for node, d in sorted(deltas.items()) for f in judge_counters(node, d, bounds)]
    )


def judge_traffic(
    deltas: Mapping[str, CounterDelta], devices: Mapping[str, Sequence[str]], min_bytes: int
) -> Verdict:
    """Every node's ERIs moved at least `min_bytes` during NCCL: it really ran over RDMA."""
    findings = [
        f
        for node, d in sorted(deltas.items())
        for f in judge_rdma_traffic(node, d, devices.get(node, ()), min_bytes)
    ]
    return from_findings(findings)


def judge_erdma_gdr(node: str, state: GdrState, expect: Expectations) -> Verdict:
    """Where `expect.erdma.gdr` is true: PCIe ACS off on every bridge (S14) and the ACS
    state readable; the peer-memory module is reported (dma-buf needs none, S13; NCCL's
    GDRDMA line in `nccl_transport` is the proof)."""
    found = (
        Measurement("peer_memory", state.peermem or "none", "", None, None, "/proc/modules"),
        Measurement("acs_on_bridges", len(state.acs_on), "", 0, "==", "S14: ACS off for P2P"),
    )
    return reported_first(_gdr(node, state), *found)


def _gdr(node: str, state: GdrState) -> Verdict:
    if state.problems:
        return Verdict(False, reason=f"{node}: {state.problems[0]}")
    if state.acs_on:
        shown = ", ".join(state.acs_on[:4]) + (" ..." if len(state.acs_on) > 4 else "")
        return Verdict(
            False,
            float(len(state.acs_on)),
            0.0,
            reason=f"{node}: PCIe ACS on (ACSCtl SrcValid+) at {shown}: GPU-ERI P2P blocked",
        )
    peer = state.peermem or "no peer-memory module (dma-buf needed: NCCL >= 2.27)"
    return Verdict(True, 0.0, 0.0, reason=f"{node}: ACS off on {state.acs_read} bridges; {peer}")


def eri_count_expected(expect: Expectations) -> Verdict:
    """An ERI count is expected (`expect.erdma.eris`); else not applicable."""
    if expect.erdma.eris is None:
        return not_applicable("no ERI count expected (expect.erdma.eris is null)")
    return Verdict(True)


def judge_eri_attachments(
    node: str, problem: str | None, eris: Sequence[tuple[str, int | None]], expect: Expectations
) -> Verdict:
    """`judge_eri_nic_indexes` on the instance's ERIs as the control plane lists them, the
    count and (where the profile publishes the one-index cap) the distinct NIC indexes
    recorded; the node is `extra["suspects"]` when it fails. An unread node is not measured."""
    wanted = expect.erdma.eris
    if wanted is None:
        return eri_count_expected(expect)
    if problem:
        return not_measured(problem)
    found = [Measurement("eris", len(eris), "interfaces", wanted, ">=", "expect.erdma.eris")]
    if expect.erdma.same_nic_index_gbps is not None:
        indexes = len({i for _, i in eris if i is not None})
        found.append(Measurement("nic_indexes", indexes, "", min(wanted, 2), ">=", "source S1"))
    verdict = reported_first(judge_eri_nic_indexes(node, eris, expect), *found)
    verdict.extra["suspects"] = [] if verdict else [node]
    return verdict


def judge_eri_nic_indexes(
    node: str, eris: Sequence[tuple[str, int | None]], expect: Expectations
) -> Verdict:
    """The instance carries `expect.erdma.eris` ERIs (HighPerformance ENIs, given as
    (ENI id, NetworkCardIndex)) and, where the profile publishes the one-NIC-index cap
    (`same_nic_index_gbps`: ebmgn7ex, S1), they sit on distinct NIC indexes."""
    e = expect.erdma
    wanted = e.eris or 1
    ids = ", ".join(i for i, _ in eris) or "none"
    if len(eris) < wanted:
        return Verdict(
            False,
            len(eris),
            wanted,
            reason=f"{node}: {len(eris)} ERI{'s' if len(eris) != 1 else ''} ({ids}), "
            f"expect.erdma.eris {wanted}: create an ENI with "
            "NetworkInterfaceTrafficMode=HighPerformance and attach it (AttachNetworkInterface)",
        )
    if e.same_nic_index_gbps is None:
        return Verdict(True, len(eris), wanted, reason=f"{node}: {len(eris)} ERIs ({ids})")
    unknown = [i for i, index in eris if index is None]
    if unknown:
        return Verdict(
            False,
            None,
            wanted,
            reason=f"{node}: {', '.join(f'{i}: NetworkCardIndex not reported' for i in unknown)} "
            "(ecs:DescribeNetworkInterfaces Attachment)",
        )
    on: dict[int, list[str]] = {}
    for interface, index in eris:
        on.setdefault(int(index), []).append(interface)  # type: ignore[arg-type]
    shared = [(index, found) for index, found in sorted(on.items()) if len(found) > 1]
    if shared:
        cap, rated = e.same_nic_index_gbps, e.per_instance_gbps
        rated_text = f" instead of {rated:g}" if rated is not None else ""
        why = "; ".join(f"ERIs {', '.join(f)} share NIC index {i}" for i, f in shared)
        return Verdict(
            False,
            len(on),
            wanted,
            reason=f"{node}: {why}: the instance is capped at {cap:g} Gbit/s{rated_text} "
            "(source S1); attach one with another NetworkCardIndex "
            "(AttachNetworkInterface)",
        )
    where = ", ".join(f"{i} on {index}" for i, index in eris)
    return Verdict(True, len(on), wanted, reason=f"{node}: ERIs on distinct NIC indexes ({where})")
