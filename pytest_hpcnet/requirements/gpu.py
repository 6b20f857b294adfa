"""Judges of each GPU's health: a node's parsed `--query-gpu` and `expect.gpu` in, a Verdict out.

Each judge names the node, the GPU index and bus id and the value found, says the fix, and
returns every GPU's value as a `Measurement` (subject `GPU 3`), so the certificate shows
numbers, not prose. Fail closed, and never blame what was not measured: an output that is
cut, unparseable or from a node without `nvidia-smi`, or a field a GPU could not report, is
`not_measured`; a driver that does not answer, a driver/library mismatch and "No devices
were found" are what nvidia-smi measured, and fail. Node-wide judges (memlock, modules, PCIe
of the RDMA devices, versions, GPU-NIC topology) are in `gpu_node`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import GPU_QUERY, Gpu, GpuQuery, bus_key
from pytest_hpcnet.probes.gpu_xid import GPU_KLOG, XID_SOURCE, XidLog
from pytest_hpcnet.requirements.registry import REPAIRS, fault, xid_code
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

HARD_SLOWDOWN = {
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}
"""Clock event reasons that mean hardware or thermal trouble; idle, power cap, application
clocks, sync boost and display are normal."""

QUERY = GPU_QUERY.name
KLOG = GPU_KLOG.name
"""The facts sections these judges read."""

FIX_NO_TOOL = "install the NVIDIA driver (it ships nvidia-smi) and check `nvidia-smi -L`"
FIX_DRIVER = "load the NVIDIA kernel driver (`modprobe nvidia`; check dmesg for NVRM errors)"
FIX_MISMATCH = "reboot or reload the nvidia modules so kernel and user-space driver agree"
FIX_RERUN = "re-run; if nvidia-smi hangs or is cut short, check the GPUs (`nvidia-smi -q`, dmesg)"
FIX_UNREAD = "re-run; read the field by hand (`nvidia-smi -q -i <index>`): a GPU that cannot "
FIX_UNREAD += "report it is not judged"


def gpu_subject(gpu: Gpu) -> str:
    """`GPU 3`: a measurement's subject within the node."""
    return f"GPU {gpu.index if gpu.index is not None else '?'}"


def unreadable(node: str, query: GpuQuery, section: str = QUERY) -> Verdict | None:
    """The verdict of a query that did not produce a whole GPU list, else None: nvidia-smi
    missing or its output unreadable is not measured; a driver it cannot talk to, a
    driver/library mismatch and no devices are measured faults."""
    sections = (section,)
    if query.state == "no-tool":
        return not_measured(f"{node}: {query.error}", FIX_NO_TOOL, sections=sections)
    faults = {"no-driver": FIX_DRIVER, "version-mismatch": FIX_MISMATCH, "no-devices": FIX_DRIVER}
    if query.state in faults:
        shown = "nvidia-smi: No devices were found" if query.state == "no-devices" else query.error
        return failing(f"{node}: {shown}", faults[query.state], sections=sections)
    if query.error is not None:
        why = f"{node}: nvidia-smi output unreadable: {query.error}"
        return not_measured(why, FIX_RERUN, sections=sections)
    return None


@dataclass(frozen=True)
class GpuReading:
    """What one judge found on one GPU: faults, fields it could not read, its measurements."""

    faults: tuple[str, ...] = ()
    unread: tuple[str, ...] = ()
    measurements: tuple[Measurement, ...] = ()


def per_gpu(
    node: str,
    query: GpuQuery,
    read: Callable[[Gpu], GpuReading],
    fix: str,
    unread_fix: str = FIX_UNREAD,
) -> Verdict:
    """Judge every GPU with `read`: a failure naming each GPU at fault (and what could not be
    read on any), else not measured naming the unread fields, else a pass; every GPU's
    measurements kept. `measured` is the number of GPUs at fault."""
    bad = unreadable(node, query)
    if bad is not None:
        return bad
    readings = [(g, read(g)) for g in query.gpus]
    measurements = tuple(m for _, r in readings for m in r.measurements)
    named = [(g, r.faults + r.unread) for g, r in readings if r.faults or r.unread]
    reason = f"{node}: " + "; ".join(f"{g.label} {', '.join(p)}" for g, p in named)
    at_fault = sum(1 for _, r in readings if r.faults)
    common = {"measurements": measurements, "sections": (QUERY,), "measured": at_fault, "bound": 0}
    if at_fault:
        return failing(reason, fix, **common)
    if named:
        return not_measured(reason, unread_fix, **common)
    return passing(**common)


def _shown(flag: bool | None) -> str | None:
    return None if flag is None else ("Yes" if flag else "No")


def judge_count_model(node: str, query: GpuQuery, expect: Expectations) -> Verdict:
    """`expect.gpu.count` GPUs, each named `expect.gpu.model` (case and spacing ignored)
    when a model is set. Measures `gpus` and `model` for the node, `gpu_model` per GPU."""
    count, model = expect.gpu.count or 0, expect.gpu.model
    bad = unreadable(node, query)
    listed = bad is None or query.state == "no-devices"
    names = sorted({g.name or "?" for g in query.gpus})
    node_wide = (
        Measurement(
            "gpus", len(query.gpus) if listed else None, "GPUs", count, "==", "expect.gpu.count"
        ),
        Measurement(
            "model",
            ", ".join(names) or None,
            "",
            model,
            "==" if model else None,
            "expect.gpu.model",
        ),
    )
    if bad is not None:
        return bad.with_measurements(*node_wide)
    found = len(query.gpus)
    if found != count:
        indexes = ",".join(str(g.index) for g in query.gpus)
        lost = "".join(f"; {bus} {why}" for bus, why in query.lost)
        return failing(
            f"{node}: {found} GPUs (index {indexes or '-'}), expected {count}{lost}",
            "reseat or replace the missing GPU (check `lspci -d 10de:` and dmesg for Xid 79); "
            "then reboot",
            measurements=node_wide,
            sections=(QUERY,),
            measured=found,
            bound=count,
        )
    if not model:
        return passing(measurements=node_wide, sections=(QUERY,), measured=found, bound=count)
    want = " ".join(model.lower().split())

    def read(gpu: Gpu) -> GpuReading:
        judged = Measurement(
            "gpu_model", gpu.name, "", model, "==", "expect.gpu.model", gpu_subject(gpu)
        )
        if gpu.name is None:
            return GpuReading(unread=("name unreadable",), measurements=(judged,))
        if " ".join(gpu.name.lower().split()) == want:
            return GpuReading(measurements=(judged,))
        return GpuReading(faults=(f"is {gpu.name!r}, expected {model!r}",), measurements=(judged,))

    verdict = per_gpu(
        node, query, read, "this instance type does not carry the profile's GPU: check the profile"
    )
    return verdict.with_measurements(*node_wide).with_code("HPCNET-GPU-MODEL")


ECC_OFF = "HPCNET-GPU-ECC-OFF"
ECC_FLAG_CODES = {
    "retired_pages_pending": "HPCNET-GPU-PAGE-RETIRE-PENDING",
    "remapped_rows_pending": "HPCNET-GPU-ROW-REMAP-PENDING",
    "remapped_rows_failure": "HPCNET-GPU-ROW-REMAP-FAIL",
}
"""The fault code of each memory-health figure that fails (the registry's `gpu_health`)."""


def _ecc(gpu: Gpu) -> GpuReading:
    subject = gpu_subject(gpu)
    faults: list[str] = []
    unread: list[str] = []
    if gpu.ecc_mode is False:
        faults.append("ECC mode Disabled")
    elif gpu.ecc_mode is None:
        unread.append(f"ECC mode unreadable ({gpu.raw('ecc.mode.current')})")
    count = gpu.ecc_uncorrected_volatile
    if count is None:
        unread.append(
            f"volatile uncorrected ECC count unreadable "
            f"({gpu.raw('ecc.errors.uncorrected.volatile.total')})"
        )
    elif count > 0:
        faults.append(f"{count} volatile uncorrected ECC errors")
    flags = (
        ("retired_pages_pending", "retired pages pending"),
        ("remapped_rows_pending", "row remapping pending"),
        ("remapped_rows_failure", "row remapping failure"),
    )
    faults += [text for attr, text in flags if getattr(gpu, attr) is True]
    if gpu.retired_pages_pending is None and gpu.remapped_rows_pending is None:
        unread.append("neither retired pages nor remapped rows readable")
    mode = None if gpu.ecc_mode is None else ("Enabled" if gpu.ecc_mode else "Disabled")
    measurements = (
        Measurement("ecc_mode", mode, "", "Enabled", "==", "ECC on", subject, code=ECC_OFF),
        Measurement(
            "ecc_uncorrected_volatile",
            count,
            "errors",
            0,
            "==",
            "no uncorrected error",
            subject,
            code="HPCNET-GPU-ECC-DBE",
        ),
        Measurement(
            "ecc_corrected_volatile",
            gpu.ecc_corrected_volatile,
            "errors",
            None,
            None,
            "reported (corrected errors are not judged)",
            subject,
        ),
        *(  # a flag the GPU does not have (`[N/A]`: retired pages on Hopper) is reported
            Measurement(
                attr,
                _shown(getattr(gpu, attr)),
                "",
                *(("No", "==") if getattr(gpu, attr) is not None else (None, None)),
                "nothing pending",
                subject,
                code=ECC_FLAG_CODES[attr],
            )
            for attr, _ in flags
        ),
    )
    return GpuReading(tuple(faults), tuple(unread), measurements)


def judge_ecc(node: str, query: GpuQuery) -> Verdict:
    """ECC enabled; no volatile uncorrected errors; no pending or failed remaps/retirements.
    Per GPU: `ecc_mode`, the volatile uncorrected and corrected counts, the remap flags."""
    return per_gpu(
        node,
        query,
        _ecc,
        "`nvidia-smi -e 1` and reboot if ECC is off; with pending remaps or errors reset the "
        "GPU (`nvidia-smi -r`); after a remap failure or repeated errors replace the GPU",
    )


def worst_xid_code(xids: list[int]) -> str:
    """The code of the Xid among `xids` whose repair is the most drastic."""
    codes = sorted({xid_code(x) for x in xids})
    return max(codes, key=lambda c: REPAIRS.index(fault(c).repair))  # type: ignore[union-attr]


def judge_xid(
    node: str, log: XidLog, expect: Expectations, query: GpuQuery | None = None
) -> Verdict:
    """No XID since boot other than `expect.gpu.allowed_xids`; each named with its meaning
    and GPU (its index and bus id from `query`). A log that could not be read whole is not
    measured (unless what was read already holds a disallowed XID)."""
    allow = set(expect.gpu.allowed_xids)
    bad = [e for e in log.events if e.xid not in allow]
    by_bus = {bus_key(g.bus_id): g for g in (query.gpus if query else ())}

    def where(bus: str) -> tuple[str, str]:
        gpu = by_bus.get(bus_key(bus))
        return (gpu.label, gpu_subject(gpu)) if gpu else (f"GPU at {bus}", f"GPU at {bus}")

    measurements = [
        Measurement("xid_events", len(bad), "", 0, "==", "expect.gpu.allowed_xids"),
        Measurement("kernel_log", log.source, "", None, None, "journalctl -k or dmesg"),
    ]
    for bus in dict.fromkeys(e.bus_id for e in bad):
        xids = [e.xid for e in bad if e.bus_id == bus]
        subject = where(bus)[1]
        measurements.append(
            Measurement(
                "xid_events",
                len(xids),
                "",
                0,
                "==",
                "expect.gpu.allowed_xids",
                subject,
                code=worst_xid_code(xids),
            )
        )
        measurements.append(
            Measurement("xids", ", ".join(map(str, sorted(set(xids)))), "", None, None, "", subject)
        )
    common = {"measurements": tuple(measurements), "sections": (KLOG, QUERY) if query else (KLOG,)}
    if not bad:
        if log.error is not None:
            return not_measured(
                f"{node}: {log.error}",
                "run the checks as root or in group adm; re-run if the log was cut short",
                **common,
            )
        return passing(**common)
    parts = []
    for xid in sorted({e.xid for e in bad}):
        events = [e for e in bad if e.xid == xid]
        named = [where(bus)[0] for bus in dict.fromkeys(e.bus_id for e in events)]
        times = f" x{len(events)}" if len(events) > 1 else ""
        parts.append(f"Xid {xid}{times} ({events[0].meaning}) on {', '.join(named)}")
    allowed = f" (allowed: {', '.join(map(str, sorted(allow)))})" if allow else ""
    measurements[0] = replace(measurements[0], code=worst_xid_code([e.xid for e in bad]))
    common["measurements"] = tuple(measurements)
    return failing(
        f"{node}: " + "; ".join(parts) + allowed,
        f"act on each Xid as {XID_SOURCE} says (reset the GPU, reboot or replace); allow an "
        "application-caused Xid in the inventory only after reading its cause",
        measured=len(bad),
        bound=0,
        **common,
    )


def judge_throttle(node: str, query: GpuQuery) -> Verdict:
    """No hardware or thermal slowdown reason active; per GPU its active ones (`slowdown`)."""

    def read(gpu: Gpu) -> GpuReading:
        mask = gpu.clock_events
        active = [name for bit, name in HARD_SLOWDOWN.items() if mask is not None and mask & bit]
        value = None if mask is None else (", ".join(active) or "none")
        measured = (
            Measurement(
                "slowdown",
                value,
                "",
                "none",
                "==",
                "clocks_event_reasons.active",
                gpu_subject(gpu),
            ),
        )
        if mask is None:
            raw = gpu.raw("clocks_event_reasons.active")
            return GpuReading(
                unread=(f"clock event reasons unreadable ({raw})",), measurements=measured
            )
        if active:
            found = f"slowdown active: {', '.join(active)} (0x{mask:X})"
            return GpuReading(faults=(found,), measurements=measured)
        return GpuReading(measurements=measured)

    found = per_gpu(
        node, query, read, "check cooling, fans, power supply and the BMC's power brake"
    )
    return found.with_code("HPCNET-GPU-SLOWDOWN")


def _mode_judge(attr: str, field: str, what: str, key: str, fix: str, code: str):
    def judge(node: str, query: GpuQuery, expect: Expectations) -> Verdict:
        expected: bool = getattr(expect.gpu, key)
        want = "Enabled" if expected else "Disabled"

        def read(gpu: Gpu) -> GpuReading:
            value = getattr(gpu, attr)
            shown = None if value is None else ("Enabled" if value else "Disabled")
            measured = (
                Measurement(attr, shown, "", want, "==", f"expect.gpu.{key}", gpu_subject(gpu)),
            )
            if value is None and attr == "mig_mode" and not expected:
                return GpuReading(measurements=measured)  # a GPU without MIG runs without MIG
            if value is None:
                found = f"{what} unreadable ({gpu.raw(field)}), expected {want}"
                return GpuReading(unread=(found,), measurements=measured)
            if value is not expected:
                return GpuReading(
                    faults=(f"{what} {shown}, expected {want}",), measurements=measured
                )
            return GpuReading(measurements=measured)

        return per_gpu(node, query, read, fix.format(flag=int(expected))).with_code(code)

    judge.__doc__ = f"{what} as `expect.gpu.{key}` says on every GPU (`{attr}` per GPU)."
    return judge


judge_persistence = _mode_judge(
    "persistence_mode",
    "persistence_mode",
    "persistence mode",
    "persistence",
    "`nvidia-smi -pm {flag}` (better: enable nvidia-persistenced at boot)",
    "HPCNET-GPU-PERSISTENCE",
)
judge_mig = _mode_judge(
    "mig_mode",
    "mig.mode.current",
    "MIG mode",
    "mig",
    "`nvidia-smi -mig {flag}`, then reset the GPU",
    "HPCNET-GPU-MIG",
)


IDLE_PSTATE = 5
"""From P5 on a GPU is in a low-power state and may run its PCIe link below its top gen."""


def _idle_gen_only(gpu: Gpu) -> bool:
    """Gen below max, width at max, and an idle pstate: the link gen cannot be judged."""
    if None in (gpu.pcie_gen, gpu.pcie_gen_max, gpu.pcie_width, gpu.pcie_width_max):
        return False
    number = (gpu.pstate or "").lstrip("P")
    idle = number.isdigit() and int(number) >= IDLE_PSTATE
    return idle and gpu.pcie_gen < gpu.pcie_gen_max and gpu.pcie_width >= gpu.pcie_width_max  # type: ignore[operator]


def judge_pcie(node: str, query: GpuQuery) -> Verdict:
    """PCIe link generation and width at their maximum on every GPU (`pcie_gen`, `pcie_width`
    per GPU). A lower gen on an idle GPU is not measured (a GPU lowers its link gen when
    idle); a narrow link is a fault in any pstate."""

    def read(gpu: Gpu) -> GpuReading:
        subject = gpu_subject(gpu)
        pairs = (("gen", gpu.pcie_gen, gpu.pcie_gen_max), ("x", gpu.pcie_width, gpu.pcie_width_max))
        measured = tuple(
            Measurement(name, cur, "", top, ">=", field, subject)
            for (name, field), (_, cur, top) in zip(
                (("pcie_gen", "pcie.link.gen.max"), ("pcie_width", "pcie.link.width.max")),
                pairs,
                strict=True,
            )
        )
        if any(cur is None or top is None for _, cur, top in pairs):
            return GpuReading(
                unread=("PCIe link generation or width unreadable",), measurements=measured
            )
        if _idle_gen_only(gpu):
            idle = (
                f"at gen{gpu.pcie_gen} of gen{gpu.pcie_gen_max} in pstate {gpu.pstate} "
                "(a GPU lowers its PCIe gen when idle)"
            )
            return GpuReading(unread=(idle,), measurements=measured)
        low = [f"{k}{cur} of {k}{top}" for k, cur, top in pairs if cur < top]  # type: ignore[operator]
        faults = (f"PCIe link {', '.join(low)}",) if low else ()
        return GpuReading(faults=faults, measurements=measured)

    return per_gpu(
        node,
        query,
        read,
        "re-check under load; a lasting downgrade is a bad riser, slot or BIOS setting: "
        "reseat the GPU or have the host repaired",
        unread_fix="run the check while the GPUs are busy (an unreadable link: "
        "`nvidia-smi -q -d PCIE`)",
    )
