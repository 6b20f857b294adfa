"""NVIDIA GPUs on a node: `nvidia-smi --query-gpu` and its error states.

Field names and value formats are those of `nvidia-smi --help-query-gpu` and a recorded
H200 run (tests/fixtures/samples/nvidia_smi/). `--format=csv` prints a header with units
(`memory.total [MiB]`) and values such as `143771 MiB`, `Enabled`, `[N/A]` or
`[Not Supported]`; columns are read by header name, so any subset and order parses.
Parsers never raise: an unreadable output is a result whose `error` says why. The host
side (kernel driver, modules, memlock) is in `gpu_host`, topology in `gpu_topo`, XIDs in
`gpu_xid`, RDMA sysfs in `gpu_rdma`; the judges are in `requirements/gpu`.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass
from typing import Literal

from pytest_hpcnet.probes.sections import Section, on_gpu
from pytest_hpcnet.probes.text import PARSE_CACHE, strip_ansi

QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "serial",
    "driver_version",
    "vbios_version",
    "pci.bus_id",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "persistence_mode",
    "pstate",
    "clocks_event_reasons.active",
    "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.volatile.total",
    "retired_pages.pending",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "mig.mode.current",
    "memory.total",
    "enforced.power.limit",
    "power.default_limit",
    "power.max_limit",
)
"""What the GPU checks read; every name is in `--help-query-gpu` of driver 580."""

OLD_NAMES = {"clocks_event_reasons.active": "clocks_throttle_reasons.active"}
"""Drivers before `clocks_event_reasons` (R535) know only the older alias."""

CLOCK_EVENT_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
"""`nvmlClocksEventReason*` bits of `clocks_event_reasons.active` (nvml.h; the recorded
`clocks_event_reasons.supported` is 0x1FF: these nine)."""

NOT_AVAILABLE = re.compile(r"^\[?(N/A|Not Supported|Unknown Error|GPU is lost|Requested .*)\]?$")

SmiState = Literal["ok", "no-tool", "no-driver", "version-mismatch", "no-devices", "error"]

_NOT_FOUND_RE = re.compile(r"nvidia-smi: (?:command )?not found|nvidia-smi: No such file")
_NO_DRIVER = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
_MISMATCH = "Driver/library version mismatch"
_LOST_RE = re.compile(
    r"Unable to determine the device handle for (?:GPU|gpu )?\s*"
    r"(?P<bus>[0-9A-Fa-f:.]+):\s*(?P<why>.*)"
)


def query_gpu_command(fields: tuple[str, ...] = QUERY_FIELDS) -> str:
    """`nvidia-smi --query-gpu=... --format=csv` (stderr merged), retried with old field names.

    A driver that does not know one field refuses the whole query, so the retry swaps
    `clocks_event_reasons.*` for `clocks_throttle_reasons.*`.
    """
    new = ",".join(fields)
    old = ",".join(OLD_NAMES.get(f, f) for f in fields)
    first = f"nvidia-smi --query-gpu={shlex.quote(new)} --format=csv 2>&1"
    if old == new:
        return first
    return (
        f"(out=$({first}); rc=$?; "
        "if [ $rc -ne 0 ] && printf '%s' \"$out\" | grep -q 'not a valid field'; then "
        f"nvidia-smi --query-gpu={shlex.quote(old)} --format=csv 2>&1; "
        "else printf '%s\\n' \"$out\"; exit $rc; fi)"
    )


def value_or_none(value: str | None) -> str | None:
    """The value, or None for `[N/A]`, `[Not Supported]`, `[Unknown Error]`, blank."""
    if value is None:
        return None
    value = value.strip()
    if not value or NOT_AVAILABLE.match(value):
        return None
    return value


def _int(value: str | None) -> int | None:
    """`143771 MiB` -> 143771, `0x0000000000000001` -> 1, `16` -> 16; None when not a number."""
    value = value_or_none(value)
    if value is None:
        return None
    m = re.fullmatch(r"(0x[0-9A-Fa-f]+|\d+)(?:\s*[A-Za-z%/]+)?", value)
    if not m:
        return None
    return int(m.group(1), 0)


def _float(value: str | None) -> float | None:
    """`700.00 W` -> 700.0, `700` -> 700.0; None when not a number."""
    value = value_or_none(value)
    if value is None:
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(?:\s*[A-Za-z%/]+)?", value)
    return float(m.group(1)) if m else None


def _yes_no(value: str | None) -> bool | None:
    """`Yes`/`Enabled` -> True, `No`/`Disabled` -> False, otherwise None."""
    value = (value_or_none(value) or "").lower()
    if value in ("yes", "enabled", "on"):
        return True
    if value in ("no", "disabled", "off"):
        return False
    return None


def bus_key(bus_id: str | None) -> tuple[int, int, int] | None:
    """(domain, bus, device) of `00000000:5D:00.0`, `0000:5d:00` or `PCI:0000:5d:00`."""
    if not bus_id:
        return None
    m = re.search(r"([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})", bus_id)
    if not m:
        return None
    return int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16)


@dataclass(frozen=True)
class Gpu:
    """One GPU as `--query-gpu` reported it; None where not queried or not available."""

    index: int | None
    name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    driver_version: str | None = None
    vbios_version: str | None = None
    bus_id: str | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    persistence_mode: bool | None = None
    pstate: str | None = None
    clock_events: int | None = None
    """The `clocks_event_reasons.active` bitmask (see CLOCK_EVENT_BITS)."""
    ecc_mode: bool | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_corrected_volatile: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    mig_mode: bool | None = None
    memory_total_mib: int | None = None
    power_limit_w: float | None = None
    """`enforced.power.limit`: the ceiling the power management holds the board to."""
    power_default_limit_w: float | None = None
    power_max_limit_w: float | None = None
    fields: tuple[tuple[str, str], ...] = ()
    """Every (field, raw value) of the row, header units removed from the field name."""

    @property
    def label(self) -> str:
        """`GPU 3 (00000000:5D:00.0)`, as every reason names a GPU."""
        return f"GPU {self.index if self.index is not None else '?'} ({self.bus_id or 'bus ?'})"

    def raw(self, field: str) -> str | None:
        """The raw value of `field` (either alias of a renamed field)."""
        found = dict(self.fields)
        alias = OLD_NAMES.get(field) or {v: k for k, v in OLD_NAMES.items()}.get(field)
        return found.get(field, found.get(alias or ""))

    @property
    def clock_event_names(self) -> tuple[str, ...]:
        """The active clock event (throttle) reasons by name."""
        mask = self.clock_events or 0
        return tuple(name for bit, name in CLOCK_EVENT_BITS.items() if mask & bit)


@dataclass(frozen=True)
class GpuQuery:
    """The GPUs of one node, or why there are none."""

    gpus: tuple[Gpu, ...] = ()
    state: SmiState = "ok"
    error: str | None = None
    """One line when the output could not be read whole (the GPUs read so far remain)."""
    lost: tuple[tuple[str, str], ...] = ()
    """(bus id, nvidia-smi's message) of each GPU it could not open ("GPU is lost")."""

    def gpu(self, index: int) -> Gpu | None:
        return next((g for g in self.gpus if g.index == index), None)


def smi_state(text: str) -> tuple[SmiState, str] | None:
    """The error state of any `nvidia-smi` output, with its line; None when none applies."""
    for line in strip_ansi(text).splitlines():
        stripped = line.strip()
        if _NOT_FOUND_RE.search(stripped):
            return "no-tool", stripped
        if _NO_DRIVER in stripped:
            return "no-driver", stripped
        if _MISMATCH in stripped:
            return "version-mismatch", stripped
        if stripped == "No devices were found":
            return "no-devices", stripped
    return None


_FIELD_RE = re.compile(r"^[a-z][a-z0-9_.]*(?:\s*\[[^\]]*\])?$")


def _field_name(header: str) -> str:
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", header.strip())


def _gpu_from(row: dict[str, str]) -> Gpu:
    def get(name: str) -> str | None:
        return row.get(name, row.get(OLD_NAMES.get(name, "")))

    return Gpu(
        index=_int(get("index")),
        name=value_or_none(get("name")),
        uuid=value_or_none(get("uuid")),
        serial=value_or_none(get("serial")),
        driver_version=value_or_none(get("driver_version")),
        vbios_version=value_or_none(get("vbios_version")),
        bus_id=value_or_none(get("pci.bus_id")),
        pcie_gen=_int(get("pcie.link.gen.current")),
        pcie_gen_max=_int(get("pcie.link.gen.max")),
        pcie_width=_int(get("pcie.link.width.current")),
        pcie_width_max=_int(get("pcie.link.width.max")),
        persistence_mode=_yes_no(get("persistence_mode")),
        pstate=value_or_none(get("pstate")),
        clock_events=_int(get("clocks_event_reasons.active")),
        ecc_mode=_yes_no(get("ecc.mode.current")),
        ecc_uncorrected_volatile=_int(get("ecc.errors.uncorrected.volatile.total")),
        ecc_corrected_volatile=_int(get("ecc.errors.corrected.volatile.total")),
        retired_pages_pending=_yes_no(get("retired_pages.pending")),
        remapped_rows_pending=_yes_no(get("remapped_rows.pending")),
        remapped_rows_failure=_yes_no(get("remapped_rows.failure")),
        mig_mode=_yes_no(get("mig.mode.current")),
        memory_total_mib=_int(get("memory.total")),
        power_limit_w=_float(get("enforced.power.limit")),
        power_default_limit_w=_float(get("power.default_limit")),
        power_max_limit_w=_float(get("power.max_limit")),
        fields=tuple(row.items()),
    )


@functools.lru_cache(maxsize=PARSE_CACHE)
def parse_query_gpu(text: str, fields: tuple[str, ...] | None = None) -> GpuQuery:
    """Parse `--query-gpu ... --format=csv` output (with header; or `noheader` given `fields`).

    Fail closed: a row with fewer or more values than the header, or no row at all, sets
    `error`; lines `Unable to determine the device handle for ...` become `lost`.
    """
    state = smi_state(text)
    if state is not None:
        return GpuQuery(state=state[0], error=state[1])
    lost: list[tuple[str, str]] = []
    rows: list[list[str]] = []
    header: list[str] | None = list(fields) if fields else None
    problems: list[str] = []
    for line in strip_ansi(text).splitlines():
        if not line.strip() and (header is None or len(header) > 1):
            continue  # a one-field query prints an empty value as an empty line
        m = _LOST_RE.search(line)
        if m:
            lost.append((m.group("bus"), m.group("why").strip()))
            continue
        cells = [c.strip() for c in line.split(",")]
        if header is None:
            if not all(_FIELD_RE.match(c) for c in cells):
                problems.append(f"not a --query-gpu header: {line.strip()[:100]!r}")
                break
            header = [_field_name(c) for c in cells]
            continue
        if [_field_name(c) for c in cells] == header:
            continue  # a repeated header (two queries concatenated)
        if len(cells) != len(header):
            problems.append(
                f"row {len(rows) + 1} has {len(cells)} of {len(header)} fields (cut short?): "
                f"{line.strip()[:80]!r}"
            )
            continue
        rows.append(cells)
    if header is None and not problems:
        problems.append("no output from nvidia-smi")
    gpus = tuple(_gpu_from(dict(zip(header or [], row, strict=True))) for row in rows)
    if header is not None and not rows and not lost and not problems:
        problems.append("a header but no GPU row")
    return GpuQuery(
        gpus=gpus,
        state="ok" if not problems else "error",
        error="; ".join(problems) or None,
        lost=tuple(lost),
    )


GPU_QUERY: Section[GpuQuery] = Section(
    "gpu_query", parse_query_gpu, build=on_gpu(query_gpu_command())
)
"""The facts section `nvidia-smi --query-gpu` runs under, with its parser."""
