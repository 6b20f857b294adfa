"""The `firmware` judge: GPU (VBIOS, InfoROM image, GSP firmware, ECC mode), NIC (driver,
firmware) and BIOS (vendor, version) the same on every node of one instance type, and equal
to `expect.versions.pin` where an item is pinned.

Pure, reading only `expect.versions`; a value off the majority names its node (and GPU or
NIC), the value and the majority with its count; a type split evenly fails as `no majority`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.firmware import BIOS, GPU_FIRMWARE, NIC_INFO, NodeFirmware
from pytest_hpcnet.probes.metadata import METADATA
from pytest_hpcnet.requirements.agreement import Entry, by_type, compare
from pytest_hpcnet.requirements.verdict import (
    FAIL,
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)

ITEMS = (
    "vbios",
    "inforom_image",
    "gsp_firmware",
    "ecc_mode",
    "nic_driver",
    "nic_firmware",
    "bios_vendor",
    "bios_version",
)
"""The compared items, in the order they are named; each may be pinned (`expect.versions.pin`)."""
UNITS = dict.fromkeys(ITEMS[:4], "GPUs") | dict.fromkeys(ITEMS[4:6], "NICs")
"""What an item's majority counts (the BIOS items: nodes)."""
FIX = (
    "flash the firmware the other nodes (or the pin) run, or have the provider replace the "
    "node; set the pin in expect.versions.pin once the right version is known"
)
FIRMWARE_CODE = "HPCNET-FIRMWARE"
CODES = {"ecc_mode": "HPCNET-ECC-MODE"}
"""The fault code of an item off its peers or pin (the registry's `firmware` codes): ECC is
a setting the operator changes; the rest is firmware the provider owns."""
FIX_RERUN = "re-run; if the output is cut short again, run nvidia-smi -q / ethtool -i by hand"


def judge_firmware(
    firmware: Mapping[str, NodeFirmware | None],
    expect: Expectations,
    types: Mapping[str, str | None] | None = None,
) -> Verdict:
    """Each item (`ITEMS`) the same across the nodes of one instance type (`types`: node ->
    its type) and equal to its pin. `firmware` is node -> its items, None for a node whose
    sections were not given whole (not measured, unless others already disagree).
    `extra["suspects"]` names the nodes at fault (none where there is no majority)."""
    pins = expect.versions.pin
    read = {n: f for n, f in firmware.items() if f is not None}
    unread = [f"firmware unreadable on {n}" for n, f in firmware.items() if f is None]
    unread += [f"{n}: {why}" for n, f in read.items() for why in f.unread]
    groups = by_type(list(read), types)
    problems: list[str] = []
    suspects: list[str] = []
    measurements: list[Measurement] = []
    for item in ITEMS:
        entries = [
            Entry(node, entry.where, entry.value)
            for node, found in read.items()
            for entry in found.items
            if entry.item == item
        ]
        found = compare(item, entries, groups, pins.get(item), UNITS.get(item, "nodes"))
        problems += found.problems
        suspects += found.suspects
        code = CODES.get(item, FIRMWARE_CODE)
        measurements += [
            replace(m, code=code) if m.outcome == FAIL else m for m in found.measurements
        ]
    for item in sorted(set(pins) & set(ITEMS)):
        if not any(m.name == item for m in measurements):
            unread.append(f"{item} pinned ({pins[item]}) but read on no node")
    sections = (GPU_FIRMWARE.name, NIC_INFO.name, BIOS.name, METADATA.name)
    kept = {"measurements": tuple(measurements), "sections": sections}
    extra = {"suspects": [n for n in read if n in set(suspects)]}
    if problems:
        return failing(
            "; ".join(problems), FIX, measured=len(problems), bound=0, extra=extra, **kept
        )
    if unread:
        return not_measured("; ".join(unread), FIX_RERUN, extra=extra, **kept)
    return passing(extra=extra, **kept)
