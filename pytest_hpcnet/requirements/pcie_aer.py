"""Judges of the PCIe devices that carry the work (GPUs, ERIs, NVMe): their AER counters,
and the NVMe devices' links (the GPUs' and ERIs' links are `gpu_node.judge_rdma_pcie` and
`gpu.judge_pcie`).

AER counts since boot. A non-fatal or fatal error on any device fails, naming the node, the
device, its bus id and the counter; correctable errors are counted per device and judged
only against `expect.host.aer_max_correctable` (none published: reported otherwise).
"""

from __future__ import annotations

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.pcie_aer import PCIE_DEVICES, PcieDevice, PcieDevices
from pytest_hpcnet.requirements.verdict import (
    NOT_MEASURED,
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

SECTIONS = (PCIE_DEVICES.name,)
KINDS = {"gpu": "GPU", "eri": "ERI", "nvme": "NVMe"}
UNCORRECTABLE = ("nonfatal", "fatal")
FIX_AER = (
    "an uncorrectable PCIe error means a bad link, riser or device: drain the node and have "
    "the host repaired (`journalctl -k | grep -i aer` shows when it happened)"
)
FIX_CORRECTABLE = "correctable errors past the bound: reseat or replace the device or riser"
FIX_RERUN = "re-run; if the output is cut short again, list /sys/bus/pci/devices by hand"


def _name(device: PcieDevice) -> str:
    return f"{KINDS.get(device.kind, device.kind)} {device.bdf}"


def _detail(device: PcieDevice, severity: str) -> str:
    bits = device.aer_detail.get(severity, ())
    return f" ({', '.join(f'{k} {v}' for k, v in bits)})" if bits else ""


CODES = {"aer_correctable": "HPCNET-PCIE-AER-CORRECTABLE"}
"""Correctable errors over their bound: a marginal link; uncorrectable ones are the
registry's default `HPCNET-PCIE-AER`."""


def judge_pcie_aer(node: str, found: PcieDevices, expect: Expectations) -> Verdict:
    """No GPU, ERI or NVMe device with a non-fatal or fatal AER error; correctable errors
    at most `expect.host.aer_max_correctable` where set. A device whose AER files sysfs
    lacks, or a listing cut short, is not measured."""
    if not found.complete:
        return not_measured(f"{node}: PCIe device listing cut short", FIX_RERUN, sections=SECTIONS)
    if not found.devices:
        return not_measured(
            f"{node}: no GPU, ERI or NVMe device in /sys/bus/pci/devices",
            "check sysfs is mounted and readable",
            sections=SECTIONS,
        )
    limit = expect.host.aer_max_correctable
    measurements: list[Measurement] = []
    problems, unread = [], []
    for device in found.devices:
        name = _name(device)
        for severity in (*UNCORRECTABLE, "correctable"):
            count = device.aer.get(severity)
            judged = severity in UNCORRECTABLE or limit is not None
            bound = (0 if severity in UNCORRECTABLE else limit) if judged else None
            source = (
                "no uncorrectable error"
                if severity in UNCORRECTABLE
                else "expect.host.aer_max_correctable"
                if judged
                else "reported, not judged (none published: expect.host.aer_max_correctable)"
            )
            measurements.append(
                Measurement(
                    f"aer_{severity}",
                    count,
                    "errors",
                    bound,
                    "<=" if judged else None,
                    source,
                    name,
                    outcome=NOT_MEASURED if count is None and judged else None,
                )
            )
            if count is None:
                continue
            if judged and count > bound:  # type: ignore[operator]
                problems.append(f"{name} aer_dev_{severity} {count}{_detail(device, severity)}")
        if not device.aer:
            unread.append(f"{name} has no AER counters in sysfs")
    kw = {"measurements": tuple(measurements), "sections": SECTIONS}
    if problems:
        only_correctable = all("aer_dev_correctable" in p for p in problems)
        fix = FIX_CORRECTABLE if only_correctable else FIX_AER
        return failing(f"{node}: " + "; ".join(problems), fix, **kw).with_codes(CODES)
    if unread:
        return not_measured(
            f"{node}: " + "; ".join(unread),
            "a kernel without CONFIG_PCIEAER or with AER off (pci=noaer) shows none",
            **kw,
        )
    return passing(**kw)


def judge_nvme_pcie(node: str, found: PcieDevices) -> Verdict:
    """Every NVMe device's PCIe link at its maximum speed and width (sysfs), where the profile
    expects local NVMe (the suite decides that). No NVMe device, or a link sysfs does not
    report, is not measured."""
    if not found.complete:
        return not_measured(f"{node}: PCIe device listing cut short", FIX_RERUN, sections=SECTIONS)
    disks = found.of_kind("nvme")
    if not disks:
        return not_measured(
            f"{node}: no NVMe device in /sys/bus/pci/devices", FIX_RERUN, sections=SECTIONS
        )
    measurements, problems, unread = [], [], []
    for dev in disks:
        name = _name(dev)
        pairs = (
            ("pcie_speed", dev.speed_gts, dev.speed_max_gts, "GT/s", "max_link_speed"),
            ("pcie_width", dev.width, dev.width_max, "lanes", "max_link_width"),
        )
        for label, cur, top, unit, key in pairs:
            measurements.append(Measurement(label, cur, unit, top, ">=", key, name))
        if any(cur is None or top is None for _, cur, top, _, _ in pairs):
            unread.append(f"{name} PCIe link not reported")
            continue
        low = [f"{cur:g} of {top:g} {unit}" for _, cur, top, unit, _ in pairs if cur < top]  # type: ignore[operator]
        if low:
            problems.append(f"{name} PCIe link {', '.join(low)}")
    kw = {"measurements": tuple(measurements), "sections": SECTIONS}
    if problems:
        return failing(
            f"{node}: " + "; ".join(problems),
            "a lasting downgrade is a bad slot, backplane or cable: have the host repaired",
            **kw,
        )
    if unread:
        return not_measured(f"{node}: " + "; ".join(unread), FIX_RERUN, **kw)
    return passing(**kw)
