"""Judge of the host's own hardware: CPU model and logical CPUs, memory (MemTotal), huge
pages and local NVMe against `expect.host`.

Each item is one measurement: judged against its `expect.host` key where the profile or
inventory sets one, else reported with "reported, not judged" as its source. Logical CPUs
and memory left unset are judged against the node's instance type as the control plane
describes it (`ecs:DescribeInstanceTypes`: `CpuCoreCount` vCPUs, `MemorySize` GiB), when the
session's cloud audit read it; the profile's value, when set, wins. A node where nothing is
judged is not measured (a value nobody bounds passes nothing); an item the output lacks
while a value is expected is not measured.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.host_hardware import HOST_HARDWARE, HostHardware
from pytest_hpcnet.requirements.verdict import (
    NOT_MEASURED,
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

SECTIONS = (HOST_HARDWARE.name,)
REPORTED = "reported, not judged (expect.host.{key} not set)"
FIX = (
    "check the instance type, then have the host repaired (a missing DIMM, CPUs offline or "
    "a disk not seen: `dmidecode -t memory`, `lscpu`, `nvme list`)"
)
GB = 1e9
CODES = {"hugepages": "HPCNET-HUGEPAGES"}
"""A setting the operator fixes; every other short item is the host's hardware (the
registry's default `HPCNET-HOST-HARDWARE`)."""
DESCRIBED = "ecs:DescribeInstanceTypes"


@dataclass(frozen=True)
class InstanceTypeFigures:
    """The node's instance type as the control plane describes it (`DescribeInstanceTypes`:
    `CpuCoreCount`, the vCPUs; `MemorySize`, GiB); None where the answer gives none."""

    instance_type: str
    cpus: int | None = None
    memory_gib: float | None = None


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _item(
    name: str, value: object, unit: str, key: str, bound: object, comparison: str
) -> Measurement:
    """One item: judged against `expect.host.<key>` when set, else reported."""
    if bound is None:
        return Measurement(name, value, unit, source=REPORTED.format(key=key))  # type: ignore[arg-type]
    outcome = NOT_MEASURED if value is None else None
    return Measurement(
        name,
        value,  # type: ignore[arg-type]
        unit,
        bound,  # type: ignore[arg-type]
        comparison,
        f"expect.host.{key}",
        outcome=outcome,
    )


def _memory(
    hw: HostHardware, expect: Expectations, described: InstanceTypeFigures | None
) -> tuple[Measurement, str | None]:
    """MemTotal against `memory_gib` (else the instance type's `MemorySize`) less
    `memory_lower`: the OS sees less than the nominal memory."""
    host = expect.host
    found = None if hw.mem_total_gib is None else round(hw.mem_total_gib, 1)
    nominal, origin = host.memory_gib, "expect.host.memory_gib"
    if nominal is None and described is not None and described.memory_gib is not None:
        nominal, origin = described.memory_gib, f"{DESCRIBED} MemorySize"
    if nominal is None:
        return _item("mem_total", found, "GiB", "memory_gib", None, ">="), None
    bound = round(nominal * (1 + host.memory_lower), 1)
    m = _item("mem_total", found, "GiB", "memory_gib", bound, ">=")
    source = f"{origin} {nominal:g} x (1 {host.memory_lower:+g})"
    if host.memory_gib is None:
        source += f" ({described.instance_type}; expect.host.memory_lower)"  # type: ignore[union-attr]
    m = replace(m, source=source)
    if found is not None and found < bound:
        shown = "published" if host.memory_gib is not None else f"{DESCRIBED}"
        return m, f"MemTotal {found:g} GiB < {bound:g} GiB ({nominal:g} GiB {shown})"
    return m, None


def _cpus(
    hw: HostHardware, expect: Expectations, described: InstanceTypeFigures | None
) -> tuple[Measurement, str | None]:
    """Logical CPUs against `cpus`, else the instance type's `CpuCoreCount`."""
    wanted = expect.host.cpus
    if wanted is not None or described is None or described.cpus is None:
        m = _item("cpus", hw.cpus, "CPUs", "cpus", wanted, "==")
        if wanted is not None and hw.cpus is not None and hw.cpus != wanted:
            return m, f"{hw.cpus} logical CPUs, expected {wanted}"
        return m, None
    m = _item("cpus", hw.cpus, "CPUs", "cpus", described.cpus, "==")
    m = replace(m, source=f"{DESCRIBED} CpuCoreCount ({described.instance_type})")
    if hw.cpus is not None and hw.cpus != described.cpus:
        return m, f"{hw.cpus} logical CPUs, expected {described.cpus} ({DESCRIBED})"
    return m, None


def judge_host_hardware(
    node: str,
    hw: HostHardware,
    expect: Expectations,
    described: InstanceTypeFigures | None = None,
) -> Verdict:
    """CPU model (a part of lscpu's `Model name`), logical CPUs, MemTotal, huge pages and
    local NVMe namespaces as `expect.host` says (CPUs and memory it leaves unset as the
    `described` instance type says); each item measured."""
    host = expect.host
    problems: list[str] = []
    model_ok = None
    if host.cpu_model is not None and hw.cpu_model is not None:
        model_ok = _norm(host.cpu_model) in _norm(hw.cpu_model)
    measurements = [
        Measurement(
            "cpu_model",
            hw.cpu_model,
            "",
            host.cpu_model,
            "==" if host.cpu_model else None,
            "expect.host.cpu_model" if host.cpu_model else REPORTED.format(key="cpu_model"),
            outcome=None
            if host.cpu_model is None
            else ("pass" if model_ok else "fail" if model_ok is False else NOT_MEASURED),
        ),
    ]
    if model_ok is False:
        problems.append(f"CPU {hw.cpu_model!r}, expected {host.cpu_model!r}")
    for item in (_cpus, _memory):
        m, problem = item(hw, expect, described)
        measurements.append(m)
        problems += [problem] if problem else []
    measurements.append(
        _item("hugepages", hw.hugepages_total, "pages", "hugepages", host.hugepages, ">=")
    )
    pages = hw.hugepages_total
    if host.hugepages is not None and pages is not None and pages < host.hugepages:
        problems.append(f"{pages} huge pages, expected at least {host.hugepages}")
    disks = hw.nvme
    count = None if disks is None else len(disks)
    measurements.append(_item("nvme_count", count, "disks", "nvme_count", host.nvme_count, "=="))
    if host.nvme_count is not None and count is not None and count != host.nvme_count:
        problems.append(f"{count} local NVMe disks, expected {host.nvme_count}")
    for disk in disks or ():
        size = round(disk.size_bytes / GB, 1)
        m = _item("nvme_size", size, "GB", "nvme_min_gb", host.nvme_min_gb, ">=")
        measurements.append(replace(m, subject=disk.name))
        if host.nvme_min_gb is not None and size < host.nvme_min_gb:
            problems.append(f"{disk.name} {size:g} GB < {host.nvme_min_gb:g} GB")
    kw = {"measurements": tuple(measurements), "sections": SECTIONS}
    if problems:
        return failing(f"{node}: " + "; ".join(problems), FIX, **kw).with_codes(CODES)
    if hw.problems and all(m.value is None for m in measurements):
        return not_measured(f"{node}: {'; '.join(hw.problems[:2])}", "re-run", **kw)
    unread = [m.name for m in measurements if m.outcome == NOT_MEASURED]
    if unread:
        why = "; ".join(hw.problems[:2]) or "not in the output"
        return not_measured(f"{node}: {', '.join(unread)} not read ({why})", "re-run", **kw)
    if not any(m.comparison for m in measurements):
        return not_measured(
            f"{node}: measured, not judged: no expected value (set expect.host.cpus, "
            "memory_gib, cpu_model from a known-good node, or let the cloud audit read the "
            f"instance type's vCPUs and memory: {DESCRIBED})",
            **kw,
        )
    return passing(**kw)
