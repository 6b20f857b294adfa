"""Judges of each GPU's health: a node's parsed `--query-gpu` and `expect.gpu` in, a Verdict out.

Each judge fails closed (an unreadable output, a missing field, a node without
`nvidia-smi` is a failure with its reason) and names the node, the GPU index and bus id,
the value found, and says the fix in `Verdict.fix`; `measured` is the number of GPUs at
fault (or found, for the count). Node-wide judges (memlock, modules, PCIe of the RDMA
devices, versions, GPU-NIC topology) are in `gpu_node`.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import Gpu, GpuQuery, bus_key
from pytest_hpcnet.probes.gpu_xid import XID_SOURCE, XidLog
from pytest_hpcnet.requirements.judges import Verdict

HARD_SLOWDOWN = {
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}
"""Clock event reasons that mean hardware or thermal trouble; idle, power cap, application
clocks, sync boost and display are normal."""

FIX_NO_TOOL = "install the NVIDIA driver (it ships nvidia-smi) and check `nvidia-smi -L`"
FIX_DRIVER = "load the NVIDIA kernel driver (`modprobe nvidia`; check dmesg for NVRM errors)"
FIX_MISMATCH = "reboot or reload the nvidia modules so kernel and user-space driver agree"


PASS = Verdict(True)


def _unreadable(node: str, query: GpuQuery) -> Verdict | None:
    """The failure of a query that did not produce a GPU list, else None."""
    fixes = {"no-tool": FIX_NO_TOOL, "no-driver": FIX_DRIVER, "version-mismatch": FIX_MISMATCH}
    if query.state in fixes:
        return Verdict(False, reason=f"{node}: {query.error}", fix=fixes[query.state])
    if query.state == "no-devices":
        return Verdict(False, reason=f"{node}: nvidia-smi: No devices were found", fix=FIX_DRIVER)
    if query.error is not None:
        return Verdict(
            False, reason=f"{node}: nvidia-smi output unreadable: {query.error}", fix="re-run"
        )
    return None


def _per_gpu(
    node: str,
    query: GpuQuery,
    problem: Callable[[Gpu], str | None],
    fix: str,
) -> Verdict:
    """Fail with every GPU for which `problem(gpu)` says something."""
    bad = _unreadable(node, query)
    if bad is not None:
        return bad
    found = [(g, p) for g in query.gpus if (p := problem(g))]
    if not found:
        return PASS
    reason = f"{node}: " + "; ".join(f"{g.label} {p}" for g, p in found)
    return Verdict(False, measured=len(found), bound=0, reason=reason, fix=fix)


def judge_count_model(node: str, query: GpuQuery, expect: Expectations) -> Verdict:
    """`expect.gpu.count` GPUs, each named `expect.gpu.model` (case and spacing ignored)
    when a model is set."""
    count, model = expect.gpu.count or 0, expect.gpu.model
    bad = _unreadable(node, query)
    if bad is not None:
        return bad
    found = len(query.gpus)
    lost = "".join(f"; {bus} {why}" for bus, why in query.lost)
    if found != count:
        indexes = ",".join(str(g.index) for g in query.gpus)
        return Verdict(
            False,
            measured=found,
            bound=count,
            reason=f"{node}: {found} GPUs (index {indexes or '-'}), expected {count}{lost}",
            fix="reseat or replace the missing GPU (check `lspci -d 10de:` and dmesg for Xid 79); "
            "then reboot",
        )
    if model:
        want = " ".join(model.lower().split())
        return _per_gpu(
            node,
            query,
            lambda g: (
                None
                if " ".join((g.name or "").lower().split()) == want
                else f"is {g.name!r}, expected {model!r}"
            ),
            "this instance type does not carry the profile's GPU: check the profile",
        )
    return PASS


def _ecc_problem(gpu: Gpu) -> str | None:
    problems = []
    if gpu.ecc_mode is not True:
        shown = "Disabled" if gpu.ecc_mode is False else gpu.raw("ecc.mode.current")
        problems.append(f"ECC mode {shown}")
    if gpu.ecc_uncorrected_volatile is None:
        problems.append(
            f"volatile uncorrected ECC count unreadable "
            f"({gpu.raw('ecc.errors.uncorrected.volatile.total')})"
        )
    elif gpu.ecc_uncorrected_volatile > 0:
        problems.append(f"{gpu.ecc_uncorrected_volatile} volatile uncorrected ECC errors")
    for attr, field in (
        ("retired_pages_pending", "retired pages pending"),
        ("remapped_rows_pending", "row remapping pending"),
        ("remapped_rows_failure", "row remapping failure"),
    ):
        if getattr(gpu, attr) is True:
            problems.append(field)
    if gpu.retired_pages_pending is None and gpu.remapped_rows_pending is None:
        problems.append("neither retired pages nor remapped rows readable")
    return ", ".join(problems) or None


def judge_ecc(node: str, query: GpuQuery) -> Verdict:
    """ECC enabled; no volatile uncorrected errors; no pending or failed remaps/retirements."""
    return _per_gpu(
        node,
        query,
        _ecc_problem,
        "`nvidia-smi -e 1` and reboot if ECC is off; with pending remaps or errors reset the "
        "GPU (`nvidia-smi -r`); after a remap failure or repeated errors replace the GPU",
    )


def judge_xid(
    node: str, log: XidLog, expect: Expectations, query: GpuQuery | None = None
) -> Verdict:
    """No XID since boot other than `expect.gpu.allowed_xids`; each named with its meaning
    and GPU (its index and bus id from `query`)."""
    if log.error is not None:
        return Verdict(
            False, reason=f"{node}: {log.error}", fix="run the checks as root or in group adm"
        )
    allow = set(expect.gpu.allowed_xids)
    bad = [e for e in log.events if e.xid not in allow]
    if not bad:
        return PASS
    by_bus = {bus_key(g.bus_id): g for g in (query.gpus if query else ())}
    parts = []
    for xid in sorted({e.xid for e in bad}):
        events = [e for e in bad if e.xid == xid]
        where = []
        for bus in dict.fromkeys(e.bus_id for e in events):
            gpu = by_bus.get(bus_key(bus))
            where.append(gpu.label if gpu else f"GPU at {bus}")
        times = f" x{len(events)}" if len(events) > 1 else ""
        parts.append(f"Xid {xid}{times} ({events[0].meaning}) on {', '.join(where)}")
    return Verdict(
        False,
        measured=len(bad),
        bound=0,
        reason=f"{node}: " + "; ".join(parts),
        fix=f"act on each Xid as {XID_SOURCE} says (reset the GPU, reboot or replace); allow an "
        "application-caused Xid in the inventory only after reading its cause",
    )


def judge_throttle(node: str, query: GpuQuery) -> Verdict:
    """No hardware or thermal slowdown reason active."""

    def problem(gpu: Gpu) -> str | None:
        if gpu.clock_events is None:
            return f"clock event reasons unreadable ({gpu.raw('clocks_event_reasons.active')})"
        active = [name for bit, name in HARD_SLOWDOWN.items() if gpu.clock_events & bit]
        return f"slowdown active: {', '.join(active)} (0x{gpu.clock_events:X})" if active else None

    return _per_gpu(
        node, query, problem, "check cooling, fans, power supply and the BMC's power brake"
    )


def _mode_judge(attr: str, field: str, what: str, fix: str):
    def judge(node: str, query: GpuQuery, expect: Expectations) -> Verdict:
        expected: bool = getattr(expect.gpu, "mig" if attr == "mig_mode" else "persistence")
        want = "Enabled" if expected else "Disabled"

        def problem(gpu: Gpu) -> str | None:
            value = getattr(gpu, attr)
            if value is None and field == "mig.mode.current" and not expected:
                return None  # a GPU without MIG runs without MIG
            if value is expected:
                return None
            return f"{what} {gpu.raw(field) or 'unreadable'}, expected {want}"

        return _per_gpu(node, query, problem, fix.format(flag=int(expected)))

    judge.__doc__ = f"{what} as `expect.gpu` says on every GPU."
    return judge


judge_persistence = _mode_judge(
    "persistence_mode",
    "persistence_mode",
    "persistence mode",
    "`nvidia-smi -pm {flag}` (better: enable nvidia-persistenced at boot)",
)
judge_mig = _mode_judge(
    "mig_mode", "mig.mode.current", "MIG mode", "`nvidia-smi -mig {flag}`, then reset the GPU"
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


def idle_gen_not_measured(node: str, query: GpuQuery) -> str | None:
    """A `not measured:` reason naming the idle GPUs whose link gen `judge_pcie` left out."""
    idle = [g for g in query.gpus if _idle_gen_only(g)]
    if not idle:
        return None
    named = "; ".join(
        f"{g.label} at gen{g.pcie_gen} of gen{g.pcie_gen_max} in pstate {g.pstate}" for g in idle
    )
    return (
        f"not measured: {node}: {named} (a GPU lowers its PCIe gen when idle): "
        "run the check while the GPUs are busy"
    )


def judge_pcie(node: str, query: GpuQuery) -> Verdict:
    """PCIe link generation and width at their maximum on every GPU; a lower gen on an idle
    GPU is left out (`idle_gen_not_measured` says so), a narrow link never is."""

    def problem(gpu: Gpu) -> str | None:
        pairs = (("gen", gpu.pcie_gen, gpu.pcie_gen_max), ("x", gpu.pcie_width, gpu.pcie_width_max))
        if any(cur is None or top is None for _, cur, top in pairs):
            return "PCIe link generation or width unreadable"
        if _idle_gen_only(gpu):
            return None
        low = [f"{k}{cur} of {k}{top}" for k, cur, top in pairs if cur < top]  # type: ignore[operator]
        return f"PCIe link {', '.join(low)}" if low else None

    return _per_gpu(
        node,
        query,
        problem,
        "re-check under load; a lasting downgrade is a bad riser, slot or BIOS setting: "
        "reseat the GPU or have the host repaired",
    )
