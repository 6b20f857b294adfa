"""The certificate's GPU section: per node its GPUs, driver and health, and the GPU-NIC map.

A pure function of the evidence records (so `verify` re-renders it identically), read by
`templates/certificate_gpu.html.j2`; None when the run has no GPU measurements (a CPU-only
profile skips every GPU check). Node output reaches the page only through Jinja's
autoescaping.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_hpcnet.report.certificate.format import format_threshold, format_value
from pytest_hpcnet.report.records import CheckRecord, Measurement
from pytest_hpcnet.requirements.registry import (
    GPU_NODES,
    GPUS_UNDER_LOAD,
    group_columns,
    group_requirements,
    title,
)
from pytest_hpcnet.requirements.verdict import JUDGE

GPU_CHECKS = group_requirements(GPU_NODES)
"""The per-node GPU requirements, in registry order (the cluster-wide `versions` is in the
versions table)."""
BAD = ("fail", "error")


def _measured(record: CheckRecord) -> dict[str, Any]:
    return {m.name: m.value for m in record.measured}


def _nic_map(value: Any) -> dict[str, str]:
    """`GPU0=erdma_0,GPU1=erdma_1` -> {"GPU0": "erdma_0", ...} (what the suite measures)."""
    pairs = (item.partition("=") for item in str(value or "").split(",") if "=" in item)
    return {gpu.strip(): nic.strip() for gpu, _, nic in pairs}


def _node(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "gpus": None,
        "model": None,
        "driver": None,
        "cuda": None,
        "issues": [],
        "not_measured": [],
        "unmeasured": False,
        "nic_map": {},
    }


def gpu_section(records: Sequence[CheckRecord]) -> dict[str, Any] | None:
    """{"nodes": [...], "columns": [GPU0, ...]} for the template, or None without GPU data."""
    mine = [r for r in records if r.check_id in GPU_CHECKS and r.kind == "node"]
    if not any(r.verdict != "skipped" for r in mine):
        return None
    nodes: dict[str, dict[str, Any]] = {}
    for record in sorted(mine, key=lambda r: (r.subject, GPU_CHECKS.index(r.check_id))):
        node = nodes.setdefault(record.subject, _node(record.subject))
        gaps = node["not_measured"]
        measured = _measured(record)
        if record.check_id == "gpu_inventory" and "gpus" in measured:
            count = measured["gpus"]
            node["gpus"] = int(count) if isinstance(count, float) and count.is_integer() else count
            node["model"] = measured.get("model")
        if "nic_map" in measured:
            node["nic_map"] = _nic_map(measured["nic_map"])
        node["driver"] = node["driver"] or record.tool_versions.get("nvidia_driver")
        node["cuda"] = node["cuda"] or record.tool_versions.get("cuda")
        if record.verdict in BAD:
            node["issues"].append(f"{title(record.check_id)}: {record.message}")
        elif record.verdict == "not_measured":
            node["unmeasured"] = True
        if record.verdict in ("skipped", "not_measured") and record.message not in gaps:
            gaps.append(record.message)  # why it was not measured
    columns = sorted(
        {gpu for node in nodes.values() for gpu in node["nic_map"]},
        key=lambda g: (len(g), g),
    )
    for node in nodes.values():
        node["healthy"] = not node["issues"] and not node["unmeasured"] and node["gpus"] is not None
    return {"nodes": list(nodes.values()), "columns": columns}


# -- GPUs under load: one row per GPU from the gpu_load records' measurements ----------------

LOAD_CHECKS = group_requirements(GPUS_UNDER_LOAD)
P2P_FIGURES = {"p2p_nvlink_gbs": "NVLink", "p2p_pcie_gbs": "PCIe"}
"""A GPU pair's figure (subject `GPU 0 -> GPU 1`), shown in its source GPU's row: the slowest."""
LOAD_COLUMNS = group_columns(GPUS_UNDER_LOAD)
LOAD_FIGURES = tuple(f.name for f in LOAD_COLUMNS)


_CHECKSUM = {"pass": "agrees", "fail": "differs ({})", "not_measured": "not measured"}


def _problem(m: Measurement) -> str:
    """What the judge said of one GPU's failed or unmeasured measurement."""
    if m.name == JUDGE:
        return str(m.value)
    said = "not measured" if m.outcome == "not_measured" else format_threshold(m)
    return f"{m.name} {format_value(m.value, m.unit)} ({said})"


def _gpu_key(subject: str) -> int:
    tail = subject.rpartition(" ")[2]
    return int(tail) if tail.isdigit() else -1


def _load_row(node: str, subject: str) -> dict[str, Any]:
    row: dict[str, Any] = {"node": node, "gpu": subject, "problems": [], "bad": []}
    row.update(dict.fromkeys(LOAD_FIGURES))
    row.update({"throttle": None, "checksum": None, "nvlink": None, "dcgm": None})
    row.update({"p2p": None, "p2p_min": None, "fabric": None})
    return row


def gpu_load_section(records: Sequence[CheckRecord]) -> dict[str, Any] | None:
    """{"rows": [per GPU], "unmeasured": [(node, check, why)], "columns": [(figure,
    header)] from the registry} for the template's "under load" table, or None when no load
    check ran."""
    mine = [r for r in records if r.check_id in LOAD_CHECKS and r.kind == "node"]
    if not any(r.verdict != "skipped" for r in mine):
        return None
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    unmeasured: list[tuple[str, str, str]] = []
    for record in sorted(mine, key=lambda r: (r.subject, LOAD_CHECKS.index(r.check_id))):
        if record.verdict in ("not_measured", "skipped", "error"):
            unmeasured.append((record.subject, title(record.check_id), record.message))
        if record.verdict in ("skipped", "error"):
            continue
        for m in record.measured:
            if not m.subject.startswith("GPU "):
                continue
            gpu = m.subject.partition(" -> ")[0]
            row = rows.setdefault((record.subject, gpu), _load_row(record.subject, gpu))
            if m.name in P2P_FIGURES and isinstance(m.value, int | float):
                if row["p2p_min"] is None or m.value < row["p2p_min"]:
                    row["p2p_min"] = m.value
                    row["p2p"] = f"{m.value:g} ({P2P_FIGURES[m.name]})"
            elif m.name == "fabric_state":
                row["fabric"] = m.value
            elif m.name in LOAD_FIGURES:
                row[m.name] = m.value
            elif m.name == "slowdown":
                row["throttle"] = m.value if m.value != "none" else row["throttle"] or "none"
            elif m.name == "power_cap" and row["throttle"] in (None, "none"):
                row["throttle"] = "power cap (reported)"
            elif m.name == "nvlink_active":
                row["nvlink"] = f"{m.value} of {m.threshold} up"
            elif m.name == "nvlink_errors_max" and m.value:
                row["nvlink"] = f"{row['nvlink'] or ''} errors {m.value}".strip()
            elif m.name == "dcgm":
                row["dcgm"] = m.value
            elif m.name == "checksum":
                row["checksum"] = _CHECKSUM.get(m.outcome, "not judged").format(m.value)
            if m.outcome in ("fail", "not_measured"):
                row["bad"].append(m)
        clauses = record.message.partition(" (fix: ")[0].split("; ")
        for (node, gpu), row in rows.items():
            if node != record.subject or not row["bad"]:
                continue
            label = f"{node} {gpu}"
            said = [c for c in clauses if f"{label} (" in c or f"{label}:" in c]
            # the judge decided which GPUs failed (the outcomes); its words say why
            row["problems"].extend(c.removeprefix(f"{node}: ") for c in said)
            row["problems"].extend(_problem(m) for m in row["bad"] if not said)
            row["bad"] = []
    for row in rows.values():
        row.pop("bad")
    ordered = sorted(rows.values(), key=lambda r: (r["node"], _gpu_key(r["gpu"])))
    columns = [(f.name, f.column) for f in LOAD_COLUMNS]
    return {"rows": ordered, "unmeasured": unmeasured, "columns": columns}
