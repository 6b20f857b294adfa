"""hpcnet lab emulation: the eight GPUs of a lab node and its kernel log (not real).

Each node has eight NVIDIA H200 as recorded in samples/nvidia_smi (driver 580.159.04, 143771
MiB, PCIe gen5 x16, ECC on, persistence on, MIG off, clocks idle), on the bus ids of a
typical 8-GPU HGX board. The node's GPU faults from `lab.json` change them on every call:
`gpu-missing` (that GPU is not enumerated), `gpu-ecc` (uncorrected errors and a pending row
remap), `gpu-throttle` (HW and HW thermal slowdown), `gpu-pcie-downgrade` (gen4 x8),
`driver-mismatch` (another driver version), `vbios` (another VBIOS on one GPU), `power-cap`
(one GPU's power limit lowered below its 700 W default). A GPU the emulated torch keeps busy
(its `gpu_busy/<slot>` file holds a time still to come) is under load: SM clock at its
maximum, power near its 700 W cap (`sw_power_cap`), 60-63 C; with `gpu-hot` it slows down
thermally (HW and HW thermal slowdown, 91 C) only then. `gpu-xid` lines live in the node's
kernel log file, `<state>/nodes/<node>/kernel.log`, read by the emulated `dmesg` and
`journalctl -k`. The burn-in's faults start at a time (`GPU@EPOCH`): `burnin-throttle` (HW
and HW thermal slowdown at 91 C), `burnin-ecc` (correctable errors counting, one
uncorrectable, a remapped row); the ECC aggregate, retired-page and remapped-row fields the
burn-in samples are listed too. A process holding a GPU (its busy file names `PID NAME`) is
a compute app, and a reset (`reset`) clears that GPU's `RESET_CLEARS` faults. Standard
library only: it runs on the node with the system
python3.
"""

from __future__ import annotations

import os
import time

import hpcnet_lab_node as node
import hpcnet_lab_rdma as lab

BUS_IDS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
"""Keep equal to `pytest_hpcnet.lab.emulation.GPU_BUS_IDS` (the XID lines name these)."""
DRIVER = "580.159.04"
NAME = "NVIDIA H200"
VBIOS = "96.00.A5.00.1A"
INFOROM_IMAGE = "G520.0282.02.02"
"""The InfoROM image of the recorded H200 (samples/nvidia_smi/query-gpu-all-fields.tsv)."""


def vbios(faults: dict[str, str], slot: int) -> str:
    """The GPU's VBIOS: fault `vbios` (`GPU VALUE`) gives that GPU another one."""
    gpu, _, value = faults.get("vbios", "").partition(" ")
    return value.upper() if gpu.isdigit() and int(gpu) == slot and value else VBIOS


POWER_LIMIT_W = 700.0
"""The H200 SXM's default and maximum power limit (samples/nvidia_smi/smi-q.txt)."""
MEMORY_CLOCK = "3201 MHz"
"""The H200's `clocks.current.memory` (samples/nvidia_smi/query-gpu-all-fields.tsv)."""


def power_limit(faults: dict[str, str], slot: int) -> float:
    """The GPU's enforced power limit: fault `power-cap` (`GPU WATTS`, default GPU 3 at 500 W)
    caps that GPU, as `nvidia-smi -pl` would."""
    value = faults.get("power-cap")
    if value is None:
        return POWER_LIMIT_W
    gpu, _, watts = value.partition(" ")
    capped = int(gpu) if gpu.isdigit() else 3
    return float(watts or 500) if slot == capped else POWER_LIMIT_W


def _fault_gpu(faults: dict[str, str], kind: str) -> int | None:
    """The GPU slot a fault hits (its argument, default 3), or None without the fault."""
    value = faults.get(kind)
    if value is None:
        return None
    return int(value) if value.isdigit() else 3


def timed_fault(faults: dict[str, str], kind: str) -> tuple[int, float] | None:
    """(GPU slot, the epoch it starts at) of a burn-in fault `GPU@EPOCH`, or None."""
    gpu, _, at = (faults.get(kind) or "").partition("@")
    try:
        return int(gpu), float(at)
    except ValueError:
        return None


def burnin_state(faults: dict[str, str], slot: int, now: float) -> tuple[bool, float]:
    """(throttling, seconds of ECC errors) of a slot under the burn-in faults at `now`:
    `burnin-throttle` (HW and HW thermal slowdown at 91 C from its time on), `burnin-ecc`
    (correctable errors counting, one uncorrectable and a remapped row from its time on)."""
    hot = timed_fault(faults, "burnin-throttle")
    ecc = timed_fault(faults, "burnin-ecc")
    throttling = hot is not None and hot[0] == slot and now >= hot[1]
    ecc_s = now - ecc[1] if ecc is not None and ecc[0] == slot and now >= ecc[1] else -1.0
    return throttling, ecc_s


def _uuid(name: str, index: int) -> str:
    import hashlib  # only here: `topo -m` and the kernel log do not pay for it

    h = hashlib.sha256(f"{name}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _busy_files() -> dict[int, list[str]]:
    """Each slot's busy file (`gpu_busy/<slot>`) as its words: `UNTIL [PID NAME]`."""
    folder = lab.state_dir() / "nodes" / lab.node_name() / "gpu_busy"
    out = {}
    for slot in range(len(BUS_IDS)):
        try:
            out[slot] = (folder / str(slot)).read_text().split()
        except OSError:
            continue
    return out


def busy_slots() -> set[int]:
    """The slots the emulated torch has work queued on (their busy file's time is to come)."""
    now = time.time()
    out = set()
    for slot, words in _busy_files().items():
        try:
            if words and float(words[0]) > now:
                out.add(slot)
        except ValueError:
            continue
    return out


def holders() -> dict[int, tuple[int, str]]:
    """slot -> (pid, name) of the compute process holding that GPU: a busy file that names a
    process (`UNTIL PID NAME`) still alive. The emulated torch writes `UNTIL` alone, so its
    load shows in the clocks and power but holds no GPU against a reset."""
    out = {}
    for slot, words in _busy_files().items():
        if len(words) < 3 or not words[1].isdigit():
            continue
        try:
            os.kill(int(words[1]), 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        out[slot] = (int(words[1]), " ".join(words[2:]))
    return out


RESET_CLEARS = ("gpu-ecc",)
"""The GPU faults a reset of their GPU clears: volatile ECC counts start again from zero and
a pending row remap takes effect (NVIDIA: "a GPU reset is required to complete row
remapping")."""


def reset(slots: set[int]) -> list[str]:
    """Reset the GPUs in `slots`: drop this node's `RESET_CLEARS` faults on them from
    `lab.json` under the lab's lock (as `hpcnet lab heal` would); returns what cleared."""
    import fcntl
    import json

    root = lab.state_dir()
    cleared = []
    with open(root / "lab.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = root / "lab.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return []
        me = next((n for n in data.get("nodes", []) if n.get("name") == lab.node_name()), None)
        if me is None:
            return []
        faults = me.get("faults") or {}
        for fault_id in list(faults):
            kind = fault_id.partition(":")[0]
            if kind in RESET_CLEARS and _fault_gpu({kind: faults[fault_id]}, kind) in slots:
                faults.pop(fault_id)
                (me.get("undo") or {}).pop(fault_id, None)
                cleared.append(fault_id)
        if cleared:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=2))
            tmp.replace(path)
    return cleared


def load_values(slot: int, hot: bool) -> dict[str, str]:
    """What nvidia-smi shows of a GPU under load (`hot`: the gpu-hot fault)."""
    if hot:
        return {"clocks": "1230 MHz", "power": "612.40 W", "temp": "91", "events": 0x48}
    return {
        "clocks": "1980 MHz",
        "power": f"69{slot}.20 W",
        "temp": str(60 + slot % 4),
        "events": 0x4,
    }


def gpus() -> list[dict[str, str]]:
    """The node's visible GPUs in index order: field -> value as `--query-gpu` prints it."""
    name = lab.node_name()
    faults = node.faults()
    driver = faults.get("driver-mismatch") or DRIVER
    missing = _fault_gpu(faults, "gpu-missing")
    busy = busy_slots()
    now = time.time()
    out = []
    for slot, bus in enumerate(BUS_IDS):
        if slot == missing:
            continue
        ecc = slot == _fault_gpu(faults, "gpu-ecc")
        slow = slot == _fault_gpu(faults, "gpu-throttle")
        pcie = slot == _fault_gpu(faults, "gpu-pcie-downgrade")
        events = "0x0000000000000048" if slow else "0x0000000000000001"
        clocks, power, temp = "345 MHz", "78.89 W", "88" if slow else "40"
        if slot in busy:
            load = load_values(slot, slot == _fault_gpu(faults, "gpu-hot"))
            mask = load["events"] | (0x48 if slow else 0)
            clocks, power, temp, events = (
                load["clocks"],
                load["power"],
                load["temp"],
                f"0x{mask:016X}",
            )
        throttling, ecc_s = burnin_state(faults, slot, now)
        if throttling:
            mask = int(events, 16) | 0x48
            clocks, power, temp, events = "1230 MHz", "612.40 W", "91", f"0x{mask:016X}"
        corrected = str(int(ecc_s * 3) + 1) if ecc_s >= 0 else "0"
        uncorrected = "1" if ecc_s >= 0 else "0"
        out.append(
            {
                "index": str(len(out)),
                "name": NAME,
                "uuid": _uuid(name, slot),
                "serial": str(1654124006920 + slot),
                "driver_version": driver,
                "vbios_version": vbios(faults, slot),
                "pci.bus_id": f"00000000:{bus}:00.0",
                "pcie.link.gen.current": "4" if pcie else "5",
                "pcie.link.gen.max": "5",
                "pcie.link.width.current": "8" if pcie else "16",
                "pcie.link.width.max": "16",
                "persistence_mode": "Enabled",
                "pstate": "P0",
                "temperature.gpu": temp,
                "power.draw": power,
                "clocks.current.sm": clocks,
                "clocks.sm": clocks,
                "clocks.max.sm": "1980 MHz",
                "clocks.current.memory": MEMORY_CLOCK,
                "clocks.mem": MEMORY_CLOCK,
                "clocks_event_reasons.active": events,
                "clocks_throttle_reasons.active": events,
                "ecc.mode.current": "Enabled",
                "ecc.errors.uncorrected.volatile.total": "4" if ecc else uncorrected,
                "ecc.errors.corrected.volatile.total": "17" if ecc else corrected,
                "retired_pages.pending": "[N/A]",
                "ecc.errors.corrected.aggregate.total": corrected if ecc_s >= 0 else "0",
                "ecc.errors.uncorrected.aggregate.total": uncorrected,
                "retired_pages.single_bit_ecc.count": "[N/A]",
                "retired_pages.double_bit.count": "[N/A]",
                "remapped_rows.correctable": "0",
                "remapped_rows.uncorrectable": uncorrected,
                "remapped_rows.pending": "Yes" if ecc else "No",
                "remapped_rows.failure": "No",
                "mig.mode.current": "Disabled",
                "memory.total": "143771 MiB",
                "power.limit": f"{power_limit(faults, slot):.2f} W",
                "enforced.power.limit": f"{power_limit(faults, slot):.2f} W",
                "power.default_limit": f"{POWER_LIMIT_W:.2f} W",
                "power.max_limit": f"{POWER_LIMIT_W:.2f} W",
            }
        )
    return out


def boot_log() -> list[tuple[float, str]]:
    """The kernel messages every lab node has since boot: (seconds, message)."""
    driver = node.faults().get("driver-mismatch") or DRIVER
    return [
        (0.0, f"Linux version {os.uname().release} (hpcnet lab emulation of the kernel log)"),
        (5.112233, "nvidia: loading out-of-tree module taints kernel."),
        (
            5.301122,
            f"NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  {driver}  Release Build  "
            "(nixbld@)  ",
        ),
    ]


def kernel_log() -> list[tuple[float, str]]:
    """The boot messages, then the node's `kernel.log` lines (`[ seconds] message`)."""
    lines = boot_log()
    path = lab.state_dir() / "nodes" / lab.node_name() / "kernel.log"
    try:
        text = path.read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        stamp, _, message = line.partition("]")
        try:
            lines.append((float(stamp.strip(" [")), message.strip()))
        except ValueError:
            continue
    return lines
