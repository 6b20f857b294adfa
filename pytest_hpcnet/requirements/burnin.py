"""Burn-in judged over time: one `burnin` requirement per node, one measurement per judged
quantity per GPU (or device), each naming the first time it went wrong.

One requirement, not one per quantity: a burn-in is one run with one duration, and its
certificate row says per node "pass" or the first failure with its time; the quantities are
its measurements (`burnin.xid`, `burnin.ecc_uncorrected`, `burnin.retired`,
`burnin.temperature`, `burnin.slowdown`, `burnin.tflops_drift`, `burnin.checksum`,
`burnin.copy_drift`, `burnin.pcie_link`, `burnin.duration`), each subject `GPU i`, and the
devices' (`burnin.aer`, `burnin.aer_correctable`, `burnin.nvlink_errors`,
`burnin.eri_counters`, `burnin.nic_errors`, `burnin.nic_drops`), subject `GPU i`, `erdma_N`
or its netdev, so a waiver or the gate still names one GPU or device.

- any Xid, uncorrectable ECC (volatile or aggregate rising), a new retired page or remapped
  row fails (bound 0 new; correctable ECC is reported, not judged);
- temperature over `expect.gpu_load.max_temperature_c`, or HW / HW thermal / SW thermal /
  power-brake slowdown in a sample, fails;
- TFLOPS more than `expect.gpu_load.burnin_tflops_drift` (default 5 %, none published)
  below the median of the GPU's first `BASELINE_WINDOWS` windows fails;
- a checksum differing from the node's first GPU's first window (or from the cluster's
  majority), or changing over time, fails;
- the devices, from the device lines (t=0 the baseline): a GPU's or ERI's non-fatal or fatal
  AER count rising fails (correctable: reported, or judged against
  `expect.host.aer_max_correctable` where set, as `pcie_aer`); a GPU's PCIe link generation
  or width below what it ran at under load at the start fails; NVLink replay, recovery or
  CRC errors rising more than `expect.gpu_load.nvlink_max_errors` fails (a profile without
  NVLink: not judged); an ERI's error, drop or connect-failure counter moving fails (bound 0),
  its netdev's errors or drops rising more than `expect.nic_max_errors` / `nic_max_dropped`
  fails (as `rdma_counters`); a counter that went back (reset) counts from 0 again;
- a window's copy GB/s more than `expect.gpu_load.burnin_copy_drift` below the median of
  the GPU's first windows fails;
- a burn-in shorter than asked (interrupted, node lost) is not measured, with the duration
  achieved and, for a lost node, the time it was last seen.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.burnin import (
    AER_KEYS,
    NIC_KEYS,
    NVLINK_KEYS,
    RDMA_KEYS,
    DeviceSample,
    NodeLines,
    Sample,
    Window,
)
from pytest_hpcnet.probes.gpu_load import SLOWDOWN_BITS
from pytest_hpcnet.requirements.verdict import FAIL, NOT_MEASURED, PASS, Measurement, Verdict

BASELINE_WINDOWS = 3
"""The first windows whose median TFLOPS a GPU's later windows are compared with."""
SECTION = "burnin_samples"
"""The evidence a burn-in verdict reads: the node's `samples.jsonl`, kept in the run folder."""
SOURCE_DRIFT = "expect.gpu_load.burnin_tflops_drift (none published; this suite's default 5 %)"
SOURCE_ZERO = "none: any is a hardware fault (NVIDIA Xid catalog, row remapping)"
SOURCE_SLOWDOWN = "nvml.h clock event reasons (HW, HW thermal, SW thermal, power brake)"
SOURCE_COPY_DRIFT = "expect.gpu_load.burnin_copy_drift (none published; this suite's default 5 %)"
SOURCE_AER = "no uncorrectable error (as pcie_aer)"
SOURCE_LINK = "the GPU's own link under load at the start (nvidia-smi pcie.link.*.current)"
SOURCE_ERI = "none: an ERI error, drop or connect-failure counter moving (BAD_COUNTERS)"
NO_DEVICE_LINE = "no device line (a burn-in program older than the device watch)"
CODES: dict[str, tuple[str, str]] = {
    "burnin.xid": ("HPCNET-BURNIN-XID", "read the Xid in NVIDIA's catalog; reset or reboot"),
    "burnin.ecc_uncorrected": (
        "HPCNET-BURNIN-ECC",
        "an uncorrectable ECC error under load: have the GPU replaced",
    ),
    "burnin.retired": (
        "HPCNET-BURNIN-RETIRED",
        "a page retired or row remapped under load: reboot to apply it; replace if it recurs",
    ),
    "burnin.temperature": (
        "HPCNET-BURNIN-THERMAL",
        "the GPU ran hot once soaked: have the host's cooling checked",
    ),
    "burnin.slowdown": (
        "HPCNET-BURNIN-THERMAL",
        "the GPU slowed itself down under load: have the host's cooling and power checked",
    ),
    "burnin.tflops_drift": (
        "HPCNET-BURNIN-DRIFT",
        "the GPU's throughput fell over time: check its clocks and cooling, then re-run",
    ),
    "burnin.checksum": (
        "HPCNET-BURNIN-CHECKSUM",
        "the GPU computed a wrong result: have it replaced (silent data corruption)",
    ),
    "burnin.copy_drift": (
        "HPCNET-BURNIN-COPY",
        "the GPU's memory copy bandwidth fell over time: check its clocks and cooling, re-run",
    ),
    "burnin.pcie_link": (
        "HPCNET-BURNIN-PCIE-LINK",
        "the GPU's PCIe link trained down under load: reseat it or have the slot repaired",
    ),
    "burnin.aer": (
        "HPCNET-BURNIN-AER",
        "an uncorrectable PCIe error under load: drain the node, have the link or device repaired",
    ),
    "burnin.aer_correctable": (
        "HPCNET-BURNIN-AER-CORRECTABLE",
        "correctable PCIe errors past the bound under load: reseat or replace device or riser",
    ),
    "burnin.nvlink_errors": (
        "HPCNET-BURNIN-NVLINK",
        "NVLink errors counted under load: reset the GPU; reseat or replace it if they recur",
    ),
    "burnin.eri_counters": (
        "HPCNET-BURNIN-NETWORK",
        "an ERI or NIC counted errors or drops during the burn-in: check its link, open a ticket",
    ),
    "burnin.nic_errors": (
        "HPCNET-BURNIN-NETWORK",
        "an ERI or NIC counted errors or drops during the burn-in: check its link, open a ticket",
    ),
    "burnin.nic_drops": (
        "HPCNET-BURNIN-NETWORK",
        "an ERI or NIC counted errors or drops during the burn-in: check its link, open a ticket",
    ),
    "burnin.sxid": (
        "HPCNET-BURNIN-SXID",
        "an NVSwitch error under load: look the SXid up in the Fabric Manager guide, reset the "
        "GPUs and switches or reboot, burn in again",
    ),
}
"""Each judged quantity's fault code (the registry's `burnin` codes) and what to do."""
INSTALL_TORCH = "install PyTorch with CUDA for the node's python3 (pip install torch)"


@dataclass(frozen=True)
class NodeBurnin:
    """One node's burn-in as the controller collected it: its sample lines, the duration asked,
    when it was last seen (epoch), and why it was not run or stopped answering."""

    node: str
    asked_s: float
    lines: NodeLines = field(default_factory=NodeLines)
    started: str = ""
    """How it was started: `systemd`, `setsid`, `already` (re-attached)."""
    missing: str = ""
    """Why the node ran no burn-in (unreachable at start, no PyTorch), with `fix`."""
    fix: str = ""
    lost: str = ""
    """Why the node stopped answering during the run ("" while it answers)."""
    last_seen: float | None = None
    gpus: int = 0

    @property
    def achieved_s(self) -> float:
        ts = [s.t for s in self.lines.samples]
        if self.lines.end_t is not None:
            ts.append(self.lines.end_t)
        return max(ts, default=0.0)


def _when(t: float) -> str:
    """`t=1234 s (0h20m34s)`: seconds since the burn-in started."""
    h, rest = divmod(int(t), 3600)
    return f"t={t:g} s ({h}h{rest // 60:02d}m{rest % 60:02d}s)"


def _by_gpu(samples: tuple[Sample, ...]) -> dict[int, list[Sample]]:
    out: dict[int, list[Sample]] = {}
    for s in sorted(samples, key=lambda s: (s.gpu, s.t)):
        out.setdefault(s.gpu, []).append(s)
    return out


def _rise(samples: list[Sample], key: str) -> Sample | None:
    """The first sample where counter `key` is above the first sample's value."""
    first = next((getattr(s, key) for s in samples if getattr(s, key) is not None), None)
    if first is None:
        return None
    return next((s for s in samples if (getattr(s, key) or first) > first), None)


def _first_failure(
    name: str,
    gpu: int,
    at: Sample | None,
    value: object,
    unit: str,
    bound: object,
    comparison: str,
    source: str,
) -> Measurement:
    """A measurement of one GPU's quantity: failed at sample `at` (its time in the value)."""
    shown = value if at is None else f"{value} at {_when(at.t)}"
    return Measurement(
        name,
        shown,
        unit,
        bound,
        comparison,
        source,
        subject=f"GPU {gpu}",
        outcome=PASS if at is None else FAIL,
    )


def gpu_measurements(
    gpu: int, samples: list[Sample], expect: Expectations, reference: str | None
) -> list[Measurement]:
    """Every judged quantity of one GPU's samples (in time order)."""
    out: list[Measurement] = []
    xid = next((s for s in samples if s.xid), None)
    out.append(
        _first_failure(
            "burnin.xid",
            gpu,
            xid,
            ",".join(map(str, xid.xid)) if xid else 0,
            "",
            0,
            "==",
            SOURCE_ZERO,
        )
    )
    ecc = next((s for s in samples if (s.ecc_uv or 0) > 0), None) or _rise(samples, "ecc_ua")
    out.append(
        _first_failure(
            "burnin.ecc_uncorrected",
            gpu,
            ecc,
            (ecc.ecc_uv or ecc.ecc_ua) if ecc else 0,
            "errors",
            0,
            "==",
            SOURCE_ZERO,
        )
    )
    retired = next(
        (r for k in ("rp_sbe", "rp_dbe", "rr_c", "rr_u") if (r := _rise(samples, k))), None
    )
    out.append(
        _first_failure(
            "burnin.retired", gpu, retired, "new" if retired else 0, "rows", 0, "==", SOURCE_ZERO
        )
    )
    corrected = max((s.ecc_cv or 0 for s in samples), default=0)
    out.append(Measurement("burnin.ecc_corrected", corrected, "errors", subject=f"GPU {gpu}"))
    ceiling = expect.gpu_load.max_temperature_c
    temps = [s for s in samples if s.temp is not None]
    hottest = max((s.temp for s in temps), default=None)
    if ceiling is None:
        out.append(Measurement("burnin.temperature", hottest, "C", subject=f"GPU {gpu}"))
    else:
        hot = next((s for s in temps if s.temp > ceiling), None)
        out.append(
            _first_failure(
                "burnin.temperature",
                gpu,
                hot,
                hot.temp if hot else hottest,
                "C",
                ceiling,
                "<=",
                "expect.gpu_load.max_temperature_c",
            )
        )
    slow = next((s for s in samples if (s.events or 0) & sum(SLOWDOWN_BITS)), None)
    out.append(
        _first_failure(
            "burnin.slowdown",
            gpu,
            slow,
            f"0x{slow.events:x}" if slow else "none",
            "",
            "none",
            "==",
            SOURCE_SLOWDOWN,
        )
    )
    out.append(_drift(gpu, samples, expect.gpu_load.burnin_tflops_drift))
    out.append(_checksum(gpu, samples, reference))
    out.append(_drift(gpu, samples, expect.gpu_load.burnin_copy_drift, COPY))
    out.append(_pcie_link(gpu, samples))
    return out


@dataclass(frozen=True)
class Timed:
    """A load window with the time of the sample that reported it."""

    t: float
    window: Window


def _windows(samples: list[Sample]) -> list[Timed]:
    """Each load window once, in order, with the time it was first reported."""
    seen: set[int] = set()
    out = []
    for s in samples:
        for w in s.windows:
            if w.number not in seen:
                seen.add(w.number)
                out.append(Timed(s.t, w))
    return out


@dataclass(frozen=True)
class Figure:
    """A per-window figure judged for drift: its measurement, window field, unit, source."""

    name: str
    field: str
    unit: str
    source: str


TFLOPS = Figure("burnin.tflops_drift", "tflops", "TFLOPS", SOURCE_DRIFT)
COPY = Figure("burnin.copy_drift", "copy_gbps", "GB/s", SOURCE_COPY_DRIFT)


def _drift(gpu: int, samples: list[Sample], drift: float, figure: Figure = TFLOPS) -> Measurement:
    def of(w: Timed) -> float:
        return getattr(w.window, figure.field) or 0.0

    windows = [w for w in _windows(samples) if getattr(w.window, figure.field) is not None]
    if len(windows) <= BASELINE_WINDOWS:
        why = f"{len(windows)} windows (more than {BASELINE_WINDOWS} needed)"
        return Measurement(figure.name, why, "%", subject=f"GPU {gpu}", outcome=NOT_MEASURED)
    base = statistics.median(of(w) for w in windows[:BASELINE_WINDOWS])
    floor = base * (1 - drift)
    later = windows[BASELINE_WINDOWS:]
    low = next((w for w in later if of(w) < floor), None)
    found = of(low) if low else min(of(w) for w in later)
    value = round(100.0 * (base - found) / base, 1) if base else None
    shown = (
        f"{value} % ({found} of {base:g} {figure.unit}, window {low.window.number}) "
        f"at {_when(low.t)}"
        if low
        else value
    )
    return Measurement(
        figure.name,
        shown,
        "%",
        round(drift * 100, 1),
        "<=",
        figure.source,
        subject=f"GPU {gpu}",
        outcome=FAIL if low else PASS,
        basis=f"median of the first {BASELINE_WINDOWS} windows: {base:g} {figure.unit}",
    )


def _pcie_link(gpu: int, samples: list[Sample]) -> Measurement:
    """The link's generation and width in every sample after the load started at least
    what they were under load at the start (the highest up to the first sample with a
    finished window: an idle GPU may run its link slower)."""
    read = [s for s in samples if s.pcie_gen is not None and s.pcie_width is not None]
    if not read:
        return Measurement(
            "burnin.pcie_link", "not in the samples", subject=f"GPU {gpu}", outcome=NOT_MEASURED
        )
    loaded = next((i for i, s in enumerate(read) if s.windows), 0)
    gen = max(s.pcie_gen or 0 for s in read[: loaded + 1])
    width = max(s.pcie_width or 0 for s in read[: loaded + 1])
    low = next(
        (s for s in read[loaded + 1 :] if (s.pcie_gen or 0) < gen or (s.pcie_width or 0) < width),
        None,
    )
    last = read[-1]
    shown = (
        f"gen {low.pcie_gen} x{low.pcie_width} at {_when(low.t)}"
        if low
        else f"gen {last.pcie_gen} x{last.pcie_width}"
    )
    top = f"; the GPU's max gen {last.pcie_gen_max} x{last.pcie_width_max}"
    return Measurement(
        "burnin.pcie_link",
        shown,
        "",
        f"gen {gen} x{width}",
        ">=",
        SOURCE_LINK,
        subject=f"GPU {gpu}",
        outcome=FAIL if low else PASS,
        basis=f"under load at {_when(read[loaded].t)}" + (top if last.pcie_gen_max else ""),
    )


def _checksum(gpu: int, samples: list[Sample], reference: str | None) -> Measurement:
    sums = [w for w in _windows(samples) if w.window.checksum]
    if not sums:
        return Measurement(
            "burnin.checksum", "no window", subject=f"GPU {gpu}", outcome=NOT_MEASURED
        )
    want = reference or sums[0].window.checksum
    bad = next((w for w in sums if w.window.checksum != want), None)
    shown = f"{bad.window.checksum} (window {bad.window.number}) at {_when(bad.t)}" if bad else want
    return Measurement(
        "burnin.checksum",
        shown,
        "",
        want,
        "==",
        "the same seeded product on every GPU and window (gpu_load_program.py)",
        subject=f"GPU {gpu}",
        outcome=FAIL if bad else PASS,
    )


@dataclass(frozen=True)
class Rise:
    """How far a counter rose over the samples: the total increase (a reset counts the new
    value from 0), the first time it went past the bound, and when it went back (reset)."""

    total: int
    readings: int
    over_at: float | None = None
    resets: tuple[float, ...] = ()


def counter_rise(points: list[tuple[float, int | None]], bound: int) -> Rise:
    """The rise of one counter read at times `points` (None: not read that time)."""
    total, readings, over_at, resets = 0, 0, None, []
    previous = None
    for t, value in points:
        if value is None:
            continue
        readings += 1
        if previous is not None:
            if value < previous:
                resets.append(t)
                total += value
            else:
                total += value - previous
            if total > bound and over_at is None:
                over_at = t
        previous = value
    return Rise(total, readings, over_at, tuple(resets))


def _device_series(devices: tuple[DeviceSample, ...]) -> dict[str, list[DeviceSample]]:
    out: dict[str, list[DeviceSample]] = {}
    for d in sorted(devices, key=lambda d: d.t):
        out.setdefault(d.device, []).append(d)
    return out


def _counters_measurement(
    name: str,
    device: str,
    series: list[DeviceSample],
    keys: tuple[str, ...],
    bound: int | None,
    source: str,
) -> Measurement:
    """The largest rise of `keys` over a device's samples, failing past `bound` at the first
    counter's time (None bound: reported); not measured without two readings of any."""
    rises = {
        k: counter_rise([(d.t, d.counters.get(k)) for d in series], bound or 0)
        for k in keys
        if any(k in d.counters for d in series)
    }
    read = {k: r for k, r in rises.items() if r.readings >= 2}
    if not read:
        why = "read once" if any(r.readings for r in rises.values()) else "not read"
        outcome = NOT_MEASURED if bound is not None else None  # reported only: as pcie_aer
        return Measurement(name, why, "", subject=device, outcome=outcome)
    over = [(r.over_at, k) for k, r in read.items() if r.over_at is not None]
    judged = bound is not None
    resets = [f"{k} reset at {_when(r.resets[0])}" for k, r in read.items() if r.resets]
    basis = "; ".join([f"{k} +{r.total}" for k, r in read.items() if r.total] + resets)
    worst = max(r.total for r in read.values())
    if judged and over:
        at, key = min(over)
        value: object = f"{key} +{read[key].total} at {_when(at or 0.0)}"
    else:
        value = worst
    unread = sorted(set(keys) - set(read))
    if unread and rises:
        basis = "; ".join(filter(None, [basis, f"not read: {', '.join(unread)}"]))
    return Measurement(
        name,
        value,  # type: ignore[arg-type]
        "errors",
        bound,
        "<=" if judged else None,
        source,
        subject=device,
        outcome=(FAIL if over else PASS) if judged else None,
        basis=basis or "no counter moved",
    )


SOURCE_DROPS = (
    "expect.nic_max_dropped per hour of burn-in, at least once (as rdma_counters, for a "
    "phase of minutes; Linux counts frames of protocols nobody handles as rx_dropped)"
)


def drops_bound(per_phase: int, asked_s: float) -> int:
    """NIC drops allowed over a burn-in: `nic_max_dropped` an hour, at least once (a healthy
    node's rx_dropped grows with time: frames of protocols nobody handles)."""
    return max(per_phase, math.ceil(per_phase * asked_s / 3600.0))


def device_measurements(found: NodeBurnin, expect: Expectations) -> list[Measurement]:
    """The devices' counters over the run: AER of each GPU and ERI, NVLink errors of each
    GPU (where the profile expects NVLink), each ERI's counters and its netdev's."""
    if not found.lines.devices:
        return [Measurement("burnin.devices", NO_DEVICE_LINE, "", outcome=NOT_MEASURED)]
    series = _device_series(found.lines.devices)
    gpus = sorted({s.gpu for s in found.lines.samples})
    gpu_names = [f"GPU {g}" for g in gpus]
    eris = sorted(n for n, ds in series.items() if ds[0].kind == "eri")
    nics = sorted(n for n, ds in series.items() if ds[0].kind == "nic")
    out: list[Measurement] = []
    limit = expect.host.aer_max_correctable
    for device in gpu_names + [n for n in eris if n not in gpu_names]:
        got = series.get(device, [])
        out.append(_counters_measurement("burnin.aer", device, got, AER_KEYS[1:], 0, SOURCE_AER))
        out.append(
            _counters_measurement(
                "burnin.aer_correctable",
                device,
                got,
                AER_KEYS[:1],
                limit,
                "expect.host.aer_max_correctable"
                if limit is not None
                else "reported, not judged (none published: expect.host.aer_max_correctable)",
            )
        )
    if expect.gpu_load.nvlink_links is not None:
        for device in gpu_names:
            out.append(
                _counters_measurement(
                    "burnin.nvlink_errors",
                    device,
                    series.get(device, []),
                    NVLINK_KEYS,
                    expect.gpu_load.nvlink_max_errors,
                    "expect.gpu_load.nvlink_max_errors",
                )
            )
    rdma = [n for n in eris if any(k in d.counters for d in series[n] for k in RDMA_KEYS)]
    for device in rdma:
        out.append(
            _counters_measurement(
                "burnin.eri_counters", device, series[device], RDMA_KEYS, 0, SOURCE_ERI
            )
        )
    for device in nics:
        out.append(
            _counters_measurement(
                "burnin.nic_errors",
                device,
                series[device],
                NIC_KEYS[:2],
                expect.nic_max_errors,
                "expect.nic_max_errors (as rdma_counters)",
            )
        )
        out.append(
            _counters_measurement(
                "burnin.nic_drops",
                device,
                series[device],
                NIC_KEYS[2:],
                drops_bound(expect.nic_max_dropped, found.asked_s),
                SOURCE_DROPS,
            )
        )
    if expect.rdma.min_devices and not rdma:
        out.append(
            Measurement(
                "burnin.eri_counters",
                "no ERI counters read",
                "",
                subject="ERI",
                outcome=NOT_MEASURED,
            )
        )
    if rdma and not nics:
        out.append(
            Measurement(
                "burnin.nic_errors",
                "no netdev of an ERI read",
                "",
                subject="NIC",
                outcome=NOT_MEASURED,
            )
        )
    return out


SOURCE_SXID = (
    "none: a fatal or non-fatal SXid is an NVSwitch fault (NVIDIA Fabric Manager user guide, "
    "SXid errors); correctable: reported"
)
KLOG_UNREAD = "kernel log unreadable (dmesg needs root or kernel.dmesg_restrict=0) from"


def switch_measurements(lines: NodeLines, expect: Expectations) -> list[Measurement]:
    """The NVSwitch SXids the kernel logged (where the profile has NVSwitch, or any was
    logged): a fatal or non-fatal one fails at its time, correctable ones are reported."""
    errors = lines.switch_errors
    if not expect.gpu_load.nvswitch and not errors:
        return []
    first = next((e for e in errors if e.severity != "Correctable"), None)
    value = (
        f"{first.switch} SXid {first.sxid} ({first.severity}) at {_when(first.t)}" if first else 0
    )
    out = [
        Measurement(
            "burnin.sxid",
            value,
            "",
            0,
            "==",
            SOURCE_SXID,
            subject="NVSwitch",
            outcome=FAIL if first else PASS,
        )
    ]
    if corrected := [e for e in errors if e.severity == "Correctable"]:
        shown = ", ".join(sorted({f"{e.switch} {e.sxid}" for e in corrected}))
        out.append(
            Measurement(
                "burnin.sxid_correctable", len(corrected), "", subject="NVSwitch", basis=shown
            )
        )
    return out


def _kernel_log_unread(measured: list[Measurement], since: float) -> list[Measurement]:
    """Xid and SXid measurements that passed on an unreadable kernel log: not measured."""
    return [
        replace(m, value=f"{KLOG_UNREAD} {_when(since)}", outcome=NOT_MEASURED)
        if m.name in ("burnin.xid", "burnin.sxid") and m.outcome == PASS
        else m
        for m in measured
    ]


def reference_checksum(nodes: Mapping[str, NodeBurnin]) -> str | None:
    """The checksum most GPUs of the cluster gave in their first window (None without one)."""
    firsts: Counter[str] = Counter()
    for found in nodes.values():
        for samples in _by_gpu(found.lines.samples).values():
            first = next((w for w in _windows(samples) if w.window.checksum), None)
            if first is not None and first.window.checksum:
                firsts[first.window.checksum] += 1
    return firsts.most_common(1)[0][0] if firsts else None


def judge_burnin(
    found: NodeBurnin, nodes: Mapping[str, NodeBurnin], expect: Expectations
) -> Verdict:
    """One node's burn-in: each GPU's quantities over time, then the duration achieved."""
    if found.missing:
        return Verdict(
            reason=f"no burn-in: {found.missing}",
            fix=found.fix,
            outcome=NOT_MEASURED,
            sections=(SECTION,),
            subject=found.node,
        )
    by_gpu = _by_gpu(found.lines.samples)
    reference = reference_checksum(nodes)
    measured = [
        m
        for gpu, samples in by_gpu.items()
        for m in gpu_measurements(gpu, samples, expect, reference)
    ]
    if by_gpu:
        measured += device_measurements(found, expect)
        measured += switch_measurements(found.lines, expect)
    if found.lines.kernel_log_unread is not None:
        measured = _kernel_log_unread(measured, found.lines.kernel_log_unread)
    measured = [
        replace(m, code=CODES[m.name][0]) if m.outcome == FAIL and m.name in CODES else m
        for m in measured
    ]
    failed = [m for m in measured if m.outcome == FAIL]
    achieved = found.achieved_s
    duration = Measurement(
        "burnin.duration",
        round(achieved, 1),
        "s",
        found.asked_s,
        ">=",
        "--hpcnet-burnin / burnin.duration",
        outcome=PASS if achieved >= found.asked_s - 0.5 else NOT_MEASURED,
    )
    short = duration.outcome == NOT_MEASURED
    code = fix = ""
    if failed:
        first = min(failed, key=_failed_at)
        code, fix = CODES.get(first.name, ("", ""))
        reason = f"{first.subject} {first.name.removeprefix('burnin.')} {first.value}"
        if len(failed) > 1:
            reason += f" (and {len(failed) - 1} more)"
        outcome = FAIL
    elif not by_gpu:
        reason, outcome = "no sample collected", NOT_MEASURED
    elif short:
        reason = f"burn-in {achieved:g} s of {found.asked_s:g} s asked"
        outcome = NOT_MEASURED
    elif unmeasured := [m for m in measured if m.outcome == NOT_MEASURED]:
        first_unmeasured = unmeasured[0]
        reason = (
            f"not measured: {first_unmeasured.subject} "
            f"{first_unmeasured.name.removeprefix('burnin.')} {first_unmeasured.value}".replace(
                "  ", " "
            )
        )
        if len(unmeasured) > 1:
            reason += f" (and {len(unmeasured) - 1} more)"
        outcome = NOT_MEASURED
    else:
        reason, outcome = f"pass over {achieved:g} s, {len(by_gpu)} GPUs", PASS
    if found.lost:
        seen = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(found.last_seen or 0))
        reason += f"; stopped answering ({found.lost}), last seen {seen}"
        outcome = FAIL if outcome == FAIL else NOT_MEASURED
    return Verdict(
        reason=reason,
        fix=fix if outcome == FAIL else "",
        code=code if outcome == FAIL else "",
        outcome=outcome,
        measurements=(*measured, duration),
        sections=(SECTION,),
        subject=found.node,
    )


def _failed_at(m: Measurement) -> float:
    text = str(m.value)
    _, _, after = text.partition(" at t=")
    number = after.split(" ", 1)[0]
    try:
        return float(number)
    except ValueError:
        return float("inf")
