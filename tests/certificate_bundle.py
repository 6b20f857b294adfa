"""A synthetic run bundle of any size for the certificate's layout tests: every kind of
row the page shows (failures by node, device and GPU, failing pairs, not measured, errors,
a waiver, excluded checks, a version mismatch), no lab needed."""

from __future__ import annotations

from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from pytest_hpcnet.inventory.models import Waiver
from pytest_hpcnet.report.certificate.page import render_certificate
from pytest_hpcnet.report.evidence import CheckRecord, CommandRecord, EvidenceBundle, Measurement
from pytest_hpcnet.report.records import RunScope, RunSummary, ScopeEntry
from pytest_hpcnet.requirements.verdict import judged

START = datetime(2026, 12, 1, 2, 0, tzinfo=timezone.utc)
KERNEL = "6.8.0-48-generic"


def _m(name: str, value: Any, unit: str = "", threshold: Any = None, cmp: Any = None, **kw: Any):
    """A measurement as a judge records it: its outcome decided (an unequal `==` fails)."""
    outcome = judged(value, threshold, cmp)
    if outcome is None and cmp is not None and threshold is not None:
        outcome = "fail"
    kw.setdefault("outcome", outcome)
    return Measurement(name=name, value=value, unit=unit, threshold=threshold, comparison=cmp, **kw)


def node_names(count: int) -> list[str]:
    return [f"node{i:02d}" for i in range(1, count + 1)]


def _record(check_id: str, requirement: str, subject: str, verdict: str, **kw: Any) -> CheckRecord:
    return CheckRecord(
        check_id=check_id,
        requirement=requirement,
        subject=subject,
        verdict=verdict,
        started_at=START,
        **kw,
    )


def records_for(nodes: list[str], digest: str) -> list[CheckRecord]:
    """One run's records: node02 has MTU 1500 and a slow pair, the last node's GPU3 has
    ECC errors, node03's erdma_1 is missing, one node's NCCL bound is unset."""
    bad_mtu, bad_gpu, bad_dev = nodes[1], nodes[-1], nodes[2 % len(nodes)]
    out: list[CheckRecord] = []
    for index, node in enumerate(nodes):
        kernel = "6.8.0-31-generic" if index == len(nodes) - 1 else KERNEL
        out.append(
            _record(
                "reachability",
                "Nodes reachable over SSH",
                node,
                "pass",
                measured=[
                    _m("kernel", kernel),
                    _m("instance_type", "ecs.ebmgn8v.48xlarge"),
                    _m("instance_id", f"i-{node}"),
                    _m("vswitch_id", "vsw-0def"),
                ],
                tool_versions={"kernel": kernel, "erdma": "0.2.38", "perftest": "24.01.0"},
                commands=[
                    CommandRecord(
                        node=node, command="uname -r", exit_status=0, output_digest=digest
                    )
                ],
            )
        )
        mtu = 1500 if node == bad_mtu else 8500
        out.append(
            _record(
                "mtu",
                "Jumbo MTU",
                node,
                "fail" if node == bad_mtu else "pass",
                measured=[_m("mtu", mtu, "bytes", 8500, "==", threshold_source="expect.mtu")],
                message=f"{node}: eth0 mtu {mtu} != 8500" if node == bad_mtu else "",
            )
        )
        count = 1 if node == bad_dev else 2
        out.append(
            _record(
                "erdma",
                "eRDMA devices",
                node,
                "fail" if node == bad_dev else "pass",
                measured=[_m("devices", count, "devices", 2, ">=")],
            )
        )
        gpus = [
            _m(
                "ecc_uncorrected",
                3 if (node == bad_gpu and g == 3) else 0,
                "errors",
                0,
                "<=",
                subject=f"GPU{g}",
            )
            for g in range(8)
        ]
        out.append(
            _record(
                "gpu_health",
                "GPU memory health (ECC, row remapping)",
                node,
                "fail" if node == bad_gpu else "pass",
                measured=gpus,
            )
        )
        out.append(
            _record(
                "gpu_inventory",
                "GPU count, model and driver modules",
                node,
                "pass",
                measured=[_m("gpus", 8, "GPUs", 8, "==")],
            )
        )
        out.append(
            _record(
                "memlock",
                "Locked memory for NCCL (ulimit -l)",
                node,
                "not_measured" if index == 0 else "pass",
                measured=[] if index == 0 else [_m("memlock", 12582912, "bytes", 12582912, ">=")],
                message="memlock section cut short" if index == 0 else "",
                commands=[CommandRecord(node=node, command="ulimit -l", exit_status=None)],
            )
        )
    for source in nodes:
        for target in nodes:
            if source == target:
                continue
            slow = bad_mtu in (source, target)
            value = 61.5 if slow else 182.0 + (len(source + target) + nodes.index(target)) % 7
            out.append(
                _record(
                    "ib_write_bw",
                    "RDMA write bandwidth (ib_write_bw)",
                    f"{source}->{target}",
                    "fail" if slow else "pass",
                    kind="pair",
                    measured=[_m("bw_avg", value, "Gb/s", 180.0, ">=", threshold_source="profile")],
                    suspect_nodes=[bad_mtu] if slow else [],
                )
            )
    out.append(
        _record(
            "ib_write_lat",
            "RDMA write latency (ib_write_lat)",
            f"{nodes[0]}->{nodes[1]}",
            "waived",
            kind="pair",
            measured=[_m("t_avg", 9.5, "us", 8.0, "<=")],
            waiver=Waiver(
                check="ib_write_lat",
                reason="known slow top-of-rack switch",
                by="Jane Roe",
                expires=date(2027, 1, 31),
            ),
        )
    )
    out.append(
        _record(
            "nccl_busbw",
            "NCCL bus bandwidth",
            "cluster",
            "error",
            kind="cluster",
            message="all_reduce_perf exited before its first size",
        )
    )
    return out


def write_bundle(run_dir: Path, count: int, lab: bool = False) -> Path:
    """Write and render a synthetic `count`-node bundle; return the certificate's path."""
    nodes = node_names(count)
    bundle = EvidenceBundle(run_dir)
    digest = bundle.store_output(KERNEL + "\n")
    for record in records_for(nodes, digest):
        bundle.append(record)
    scope = RunScope(
        excluded=[
            ScopeEntry(check_id="cloud_audit", reason="no credentials for the control plane"),
            ScopeEntry(check_id="cpfs", reason="no CPFS on this cluster"),
        ],
        incomplete=[
            ScopeEntry(
                check_id="memlock",
                subject=nodes[0],
                reason="memlock section cut short",
                kind="not_measured",
            ),
        ]
        + [
            ScopeEntry(
                check_id="erdma_gdr_bw", subject=n, reason="no GPUDirect run", kind="skipped"
            )
            for n in nodes
        ],
    )
    bundle.close(
        RunSummary(
            run_id=run_dir.name,
            cluster="prod-gpu-01",
            started_at=START,
            lab=lab,
            profile="ebmgn8v",
            scope=scope,
        )
    )
    context = {
        "cluster": "prod-gpu-01",
        "region": "cn-wulanchabu",
        "zone": "cn-wulanchabu-c",
        "nodes": [{"name": n, "instance_type": "ecs.ebmgn8v.48xlarge"} for n in nodes],
        "contacts": [
            {"name": "Alice Provider", "role": "Alibaba Cloud SA"},
            {"name": "Bob Customer", "role": "Platform lead"},
        ],
    }
    return render_certificate(bundle.run_dir, context)


def write_accepted_bundle(run_dir: Path, count: int) -> Path:
    """A synthetic bundle in which every check passed."""
    nodes = node_names(count)
    bundle = EvidenceBundle(run_dir)
    for node in nodes:
        bundle.append(
            _record(
                "mtu", "Jumbo MTU", node, "pass", measured=[_m("mtu", 8500, "bytes", 8500, "==")]
            )
        )
    bundle.close(
        RunSummary(
            run_id=run_dir.name,
            cluster="c",
            started_at=START,
            verdict="ACCEPTED",
            scope=RunScope(required=["mtu"]),
        )
    )
    context = {
        "cluster": "c",
        "nodes": [{"name": n} for n in nodes],
        "requirements": [{"check_id": "mtu", "requirement": "Jumbo MTU"}],
        "contacts": [{"name": "Alice Provider"}, {"name": "Bob Customer"}],
    }
    return render_certificate(bundle.run_dir, context)


def write_crowded_bundle(run_dir: Path, count: int, lab: bool = False) -> Path:
    """The most a page must hold: every requirement judged on every node, a quarter of the
    nodes failing each one with its own value, a failing pair per node, many waivers, many
    excluded and unmeasured checks, several kernels and unreachable nodes."""
    from pytest_hpcnet.requirements.registry import certificate_specs

    nodes = node_names(count)
    specs = certificate_specs()
    bundle = EvidenceBundle(run_dir)
    judged, missing = specs[:-2], specs[-2:]
    for number, (check_id, requirement) in enumerate(judged):
        for index, node in enumerate(nodes):
            bad = (index + number) % 4 == 0
            value = 100.0 - index - number if bad else 200.0
            bundle.append(
                _record(
                    check_id,
                    requirement,
                    node,
                    "fail" if bad else "pass",
                    measured=[
                        _m("value", value, "Gb/s", 150.0, ">=", subject=f"erdma_{index % 2}")
                    ],
                    tool_versions={"kernel": f"6.8.0-{40 + index % 5}-generic", "fio": "3.36"},
                    waiver=Waiver(
                        check=check_id,
                        reason="accepted for the pilot, see ticket",
                        by="Jane Roe",
                        expires=date(2027, 1, 31),
                    )
                    if bad and number < 12 and index < 4
                    else None,
                )
            )
    for index, node in enumerate(nodes):
        target = nodes[(index + 1) % len(nodes)]
        bundle.append(
            _record(
                "ib_write_bw",
                "RDMA write bandwidth (ib_write_bw)",
                f"{node}->{target}",
                "fail",
                kind="pair",
                measured=[_m("bw_avg", 90.0 + index, "Gb/s", 180.0, ">=")],
            )
        )
    scope = RunScope(
        required=[c for c, _ in specs],
        expected={"mtu": nodes + [f"spare{i:02d}" for i in range(10)]},
        excluded=[ScopeEntry(check_id=c, reason=f"excluded by the site ({c})") for c, _ in missing],
    )
    bundle.close(
        RunSummary(
            run_id=run_dir.name,
            cluster="prod-gpu-01",
            started_at=START,
            scope=scope,
            unreachable_nodes=[f"spare{i:02d}" for i in range(10)],
            lab=lab,
        )
    )
    context = {
        "cluster": "prod-gpu-01",
        "nodes": [{"name": n, "instance_type": "ecs.ebmgn8v.48xlarge"} for n in nodes],
        "contacts": [{"name": "Alice Provider"}, {"name": "Bob Customer"}],
        "requirements": [{"check_id": c, "requirement": r} for c, r in specs],
    }
    return render_certificate(bundle.run_dir, context)


PRINT_WAIVERS = (
    Waiver(
        check="mtu[node01]",
        reason="NIC swap booked (ticket 4411)",
        by="Ops lead",
        expires=date(2026, 12, 20),
    ),
    Waiver(
        check="ib_write_bw",
        reason="vendor: switch firmware 4.2 pending",
        by="Vendor QA",
        expires=date(2026, 12, 28),
    ),
    Waiver(
        check="gpu_health[node01 GPU 3]", reason="RMA 991 open", by="QA", expires=date(2026, 12, 31)
    ),
    Waiver(
        check="tuning", reason="sysctl rollout next week", by="Platform", expires=date(2026, 11, 20)
    ),
)


MANIFEST = {
    "nvidia_driver": "580.159.04",
    "cuda": "13.0",
    "nccl": "2.27.7-1+cuda12.9",
    "os": "Ubuntu 22.04.5 LTS",
    "kernel": KERNEL,
    "erdma": "0.2.38",
    "rdma-core": "50.0-2ubuntu0.2",
    "vbios": "96.00.A5.00.1A",
    "inforom_image": "G520.0282.02.02",
    "gsp_firmware": "580.159.04",
    "ecc_mode": "Enabled",
    "nic_driver": "virtio_net 1.0.0",
    "nic_firmware": "",
    "bios_vendor": "Alibaba Cloud",
    "bios_version": "0.0.0",
}
"""A whole manifest as the versions and firmware judges measure it, per instance type."""


def print_manifest(nodes: list[str], odd: bool) -> CheckRecord:
    """The agreed manifest of each instance type (two with `odd`, and a VBIOS off its
    type's on a third of the nodes' GPU 3) as one cluster record's measurements."""
    from pytest_hpcnet.requirements.agreement import AGREED, ODD

    types = ["ecs.ebmgn8v.48xlarge", "ecs.ebmgn8is.32xlarge"] if odd else ["ecs.ebmgn8v.48xlarge"]
    measured = [
        _m(item, value, basis=AGREED, subject=kind, outcome="pass")
        for kind in types
        for item, value in MANIFEST.items()
    ]
    measured += [
        _m(
            "vbios",
            "96.00.A5.00.1B",
            "",
            "96.00.A5.00.1A",
            "==",
            subject=f"{node} GPU 3 (00000000:5D:00.0)",
            basis=ODD,
        )
        for node in (nodes[::3] if odd else [])
    ]
    return _record(
        "firmware",
        "GPU, NIC and BIOS firmware agree",
        "cluster",
        "fail" if odd else "pass",
        kind="cluster",
        measured=measured,
    )


def write_print_case(
    run_dir: Path, verdict: str, count: int, judged: int = 0, waivers: int = len(PRINT_WAIVERS)
) -> Path:
    """A handover bundle as a person signs it: every requirement of the registry judged on
    every node, the inventory's waivers (one waiving node01's MTU, one expired), and
    REJECTED: a third of the nodes failing each requirement, failing pairs; INCOMPLETE: the
    last node unreachable and a bound unset; ACCEPTED: nothing else. `judged`: only the
    first requirements judged, the others not applicable (as on a cluster without GPUs);
    `waivers`: the inventory declares only the first (at least the one waiving the MTU)."""
    from pytest_hpcnet.requirements.registry import certificate_specs

    nodes = node_names(count)
    specs = certificate_specs()
    bundle_skips: list[tuple[str, str]] = []
    for check_id, requirement in specs[judged or len(specs) :]:
        bundle_skips.append((check_id, requirement))
    specs = specs[: judged or len(specs)]
    unreachable = [nodes[-1]] if verdict == "INCOMPLETE" else []
    bundle = EvidenceBundle(run_dir)
    for check_id, requirement in bundle_skips:
        bundle.append(
            _record(
                check_id,
                requirement,
                "cluster",
                "skipped",
                kind="cluster",
                message="not applicable: the inventory expects nothing here",
            )
        )
    for number, (check_id, requirement) in enumerate(specs):
        for index, node in enumerate(nodes):
            waived = check_id == "mtu" and index == 0
            bad = waived or (verdict == "REJECTED" and (index + number) % 3 == 0)
            state = "waived" if waived else "fail" if bad else "pass"
            if node in unreachable:
                state, bad = "not_measured", False
            bundle.append(
                _record(
                    check_id,
                    requirement,
                    node,
                    state,
                    measured=[]
                    if node in unreachable
                    else [_m("value", 100.0 - number if bad else 200.0, "Gb/s", 150.0, ">=")],
                    message=f"{node}: unreachable (connection refused)"
                    if node in unreachable
                    else "",
                    tool_versions={"kernel": KERNEL, "fio": "3.36"},
                    waiver=PRINT_WAIVERS[0] if waived else None,
                )
            )
    bundle.append(print_manifest(nodes, verdict == "REJECTED"))
    if verdict != "ACCEPTED" and count > 1:
        for index, node in enumerate(nodes):
            target = nodes[(index + 1) % count]
            slow = verdict == "REJECTED"
            bundle.append(
                _record(
                    "ib_write_bw",
                    "RDMA write bandwidth (ib_write_bw)",
                    f"{node}->{target}",
                    "fail" if slow else "pass",
                    kind="pair",
                    measured=[_m("bw_avg", 90.0 + index if slow else 196.0, "Gb/s", 180.0, ">=")],
                )
            )
    if verdict == "INCOMPLETE":
        bundle.append(
            _record(
                "nccl_busbw",
                "NCCL bus bandwidth",
                "cluster",
                "not_measured",
                kind="cluster",
                message="no bound set (expect.nccl.min_busbw_largest_gbs)",
            )
        )
    bundle.close(
        RunSummary(
            run_id=run_dir.name,
            cluster="prod-gpu-01",
            started_at=START,
            profile="ebmgn8v",
            unreachable_nodes=unreachable,
            scope=RunScope(required=[c for c, _ in specs]),
        )
    )
    specs = certificate_specs()
    context = {
        "cluster": "prod-gpu-01",
        "region": "cn-wulanchabu",
        "zone": "cn-wulanchabu-c",
        "operator": "Dana Ops <dana@example.com>",
        "nodes": [{"name": n, "instance_type": "ecs.ebmgn8v.48xlarge"} for n in nodes],
        "contacts": [
            {"name": "Alice Provider", "role": "Alibaba Cloud SA"},
            {"name": "Bob Customer", "role": "Platform lead"},
        ],
        "requirements": [{"check_id": c, "requirement": r} for c, r in specs],
        "waivers": [w.model_dump() for w in PRINT_WAIVERS[: max(1, waivers)]],
    }
    return render_certificate(bundle.run_dir, context)
