"""Burn-in on the nodes: the detached start, the incremental collection and pure parsers.

`start_command` saves the burn-in program (`burnin_program.py`) and the GPU load program
beside it in `/var/tmp/hpcnet-burnin/RUN/` (`$HPCNET_BURNIN_DIR/RUN/` where set) and starts
it detached: a transient systemd unit `hpcnet-burnin-RUN` where systemd runs, else `setsid
nohup`. It never starts a run twice (the
folder is the lock), so a resumed controller re-attaches. `collect_command` touches the
heartbeat file and prints the samples file from a byte offset (at most `MAX_COLLECT_BYTES`);
`parse_collect` keeps whole lines only, so the next offset never cuts a sample. Parsers never
raise: an unreadable line is counted, not judged.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from pytest_hpcnet.probes.counters import CONNECT_FAILURES, NIC_ERRORS, RATE_LIMIT_DROPS

PROGRAM = Path(__file__).parent / "remote" / "burnin_program.py"
LOAD_PROGRAM = Path(__file__).parent / "remote" / "gpu_load_program.py"
NODE_ROOT = "/var/tmp/hpcnet-burnin"
MAX_COLLECT_BYTES = 4 << 20
"""At most this much of a node's samples per collection (8 GPUs x 30 s: ~9 h of samples)."""
HEADER = "hpcnet-burnin-collect"
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$")
EXTRA_S = 300
"""The node's own hard limit beyond duration and heartbeat (`timeout -k`)."""


def node_folder(run: str) -> str:
    """The run's folder on the node, as a shell word: under `$HPCNET_BURNIN_DIR` where the
    node's environment sets it (another disk; the lab's nodes, which share one file system),
    else `/var/tmp/hpcnet-burnin`."""
    if not RUN_ID.match(run):
        raise ValueError(f"burn-in run id {run!r}: letters, digits, '.', '_', '-'")
    return f'"${{HPCNET_BURNIN_DIR:-{NODE_ROOT}}}/{run}"'


def start_command(
    run: str, gpus: int, seconds: float, interval: float, heartbeat: float, size: int
) -> str:
    """Save the programs and start the burn-in detached, once per run (prints
    `hpcnet-burnin started systemd|setsid` or `hpcnet-burnin already`). The unit gets the
    session's PATH, PYTHONPATH and LD_LIBRARY_PATH, so it finds the python3 (and torch) the
    facts found; `HPCNET_BURNIN_DETACH=setsid` in the node's environment skips systemd."""
    args = (
        f"--dir $d --seconds {seconds:g} --interval {interval:g} --heartbeat {heartbeat:g} "
        f"--gpus {int(gpus)} --size {int(size)}"
    )
    limit = int(seconds + heartbeat + EXTRA_S)
    program = f'timeout -k 30 {limit} "$py" $d/burnin.py {args}'
    unit = shlex.quote(f"hpcnet-burnin-{run}")
    env = " ".join(
        f'--setenv={name}="${{{name}:-}}"' for name in ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH")
    )
    return "\n".join(
        [
            f"d={node_folder(run)}; py=$(command -v python3) || exit 1",
            'mkdir -p "$(dirname "$d")" || exit 1',
            "if ! mkdir $d 2>/dev/null; then echo 'hpcnet-burnin already'; exit 0; fi",
            "cat >$d/burnin.py <<'HPCNET_BURNIN_EOF'",
            PROGRAM.read_text().rstrip("\n"),
            "HPCNET_BURNIN_EOF",
            "cat >$d/gpu_load.py <<'HPCNET_BURNIN_EOF'",
            LOAD_PROGRAM.read_text().rstrip("\n"),
            "HPCNET_BURNIN_EOF",
            "touch $d/heartbeat $d/samples.jsonl",
            'if [ "${HPCNET_BURNIN_DETACH:-systemd}" = systemd ] && [ -d /run/systemd/system ] '
            "&& command -v systemd-run >/dev/null 2>&1 && "
            f"systemd-run --quiet --unit {unit} {env} {program} >/dev/null 2>&1; then "
            "echo 'hpcnet-burnin started systemd'; else "
            f"setsid nohup {program} >$d/log 2>&1 </dev/null & "
            "echo 'hpcnet-burnin started setsid'; fi",
        ]
    )


def collect_command(run: str, offset: int) -> str:
    """Touch the heartbeat; print the samples file's size, then its bytes from `offset`."""
    start = int(offset) + 1
    return (
        f"d={node_folder(run)}; if [ ! -d $d ]; then echo '{HEADER} missing'; exit 0; fi; "
        f"touch $d/heartbeat; "
        f'echo "{HEADER} size=$(stat -c %s $d/samples.jsonl 2>/dev/null || echo 0)"; '
        f"tail -c +{start} $d/samples.jsonl 2>/dev/null | head -c {MAX_COLLECT_BYTES}"
    )


@dataclass(frozen=True)
class Collected:
    """One collection from one node: the whole sample lines read, the bytes they take (the
    next offset moves by that), the file's size, and what could not be read."""

    lines: tuple[str, ...] = ()
    consumed: int = 0
    size: int | None = None
    missing: bool = False
    error: str | None = None


def parse_collect(text: str) -> Collected:
    """Read `collect_command`'s output: whole lines only (a line still being written waits
    for the next collection)."""
    head, _, body = text.partition("\n")
    if head.strip() == f"{HEADER} missing":
        return Collected(missing=True)
    m = re.fullmatch(rf"{HEADER} size=(\d+)", head.strip())
    if not m:
        return Collected(error="no collection header in the output")
    whole, _, _ = body.rpartition("\n")
    lines = tuple(whole.split("\n")) if whole else ()
    consumed = len((whole + "\n").encode()) if whole else 0
    return Collected(lines, consumed, int(m.group(1)))


AER_KEYS = ("aer_correctable", "aer_nonfatal", "aer_fatal")
"""A device line's `aer` values, in order (the program's `AER`)."""
NVLINK_KEYS = ("nvlink_replay", "nvlink_recovery", "nvlink_crc")
"""`nvl`: a GPU's NVLink error totals over its links (the program's `NVLINK`)."""
RDMA_KEYS = RATE_LIMIT_DROPS + CONNECT_FAILURES
"""`rdma`: an ERI's error, drop and connect-failure counters (the program's `RDMA`)."""
NIC_KEYS = NIC_ERRORS
"""`nic`: an ERI netdev's error and drop counters (the program's `NIC`)."""
DEVICE_VALUES = {"aer": AER_KEYS, "nvl": NVLINK_KEYS, "rdma": RDMA_KEYS, "nic": NIC_KEYS}


@dataclass(frozen=True)
class Window:
    """One load window of one GPU: its number, median steady TFLOPS, checksum and
    device-to-device copy GB/s (None in a window of an older program: `[w, tflops, sum]`)."""

    number: int
    tflops: float | None
    checksum: str | None
    copy_gbps: float | None = None


@dataclass(frozen=True)
class Sample:
    """One GPU at one interval of the burn-in (`t`: seconds since its start)."""

    t: float
    gpu: int
    temp: float | None = None
    power: float | None = None
    sm: float | None = None
    events: int | None = None
    ecc_cv: int | None = None
    ecc_uv: int | None = None
    ecc_ca: int | None = None
    ecc_ua: int | None = None
    rp_sbe: int | None = None
    rp_dbe: int | None = None
    rr_c: int | None = None
    rr_u: int | None = None
    xid: tuple[int, ...] = ()
    windows: tuple[Window, ...] = ()
    """The load windows the GPU finished since the previous sample."""
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    """The PCIe link (nvidia-smi `pcie.link.{gen,width}.{current,max}`; None: not read)."""
    mem: float | None = None
    """The memory clock (MHz, nvidia-smi `clocks.mem`; None: not read)."""


@dataclass(frozen=True)
class DeviceSample:
    """One device at one interval: `GPU 3`, `erdma_0` (an ERI) or `eth0` (an ERI's netdev),
    and its counters read then (`aer_*`, `nvlink_*`, the ERI's `RDMA_KEYS`, the NIC's
    `NIC_KEYS`; None: not read that time; a counter absent: not read by that line)."""

    t: float
    device: str
    counters: dict[str, int | None] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """`gpu`, `eri` (it has RDMA counters or an ERI's name) or `nic`."""
        if self.device.startswith("GPU "):
            return "gpu"
        if any(k in self.counters for k in NIC_KEYS) and not any(
            k in self.counters for k in RDMA_KEYS
        ):
            return "nic"
        return "eri"


@dataclass(frozen=True)
class SwitchError:
    """An NVSwitch `SXid` the kernel logged: when (the sample that read it), the switch
    (`nvidia-nvswitch0`), the SXid number and its severity (`Fatal`, `Non-fatal`,
    `Correctable`)."""

    t: float
    switch: str
    sxid: int
    severity: str


@dataclass(frozen=True)
class NodeLines:
    """A node's sample lines read: the samples, the end line if written, and what failed."""

    samples: tuple[Sample, ...] = ()
    end: str | None = None
    end_t: float | None = None
    errors: tuple[str, ...] = field(default_factory=tuple)
    unreadable: int = 0
    devices: tuple[DeviceSample, ...] = ()
    """The device lines' records (from t=0, the baseline), one per device per line."""
    switch_errors: tuple[SwitchError, ...] = ()
    """The NVSwitch SXids the device lines carry, in time order."""
    kernel_log_unread: float | None = None
    """The first time the kernel log could not be read (no Xid or SXid read then)."""


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _int(value: object) -> int | None:
    found = _num(value)
    return int(found) if found is not None and found == int(found) else None


def _events(value: object) -> int | None:
    if isinstance(value, str) and re.fullmatch(r"0x[0-9A-Fa-f]{1,16}", value.strip()):
        return int(value.strip(), 16)
    return None


def _windows(value: object) -> tuple[Window, ...]:
    """`[[window, tflops, checksum, copy_gbps], ...]` (or an older program's three
    elements); an entry that is not one is left out."""
    found = []
    for entry in value if isinstance(value, list) else []:
        if not isinstance(entry, list) or len(entry) not in (3, 4) or _int(entry[0]) is None:
            continue
        checksum = entry[2] if isinstance(entry[2], str) and entry[2] else None
        copy = _num(entry[3]) if len(entry) == 4 else None
        found.append(Window(_int(entry[0]) or 0, _num(entry[1]), checksum, copy))
    return tuple(found)


def _device_samples(t: float, value: object) -> list[DeviceSample] | None:
    """A device line's `dev` object as one DeviceSample per device (None: not one)."""
    if not isinstance(value, dict):
        return None
    found = []
    for name, groups in value.items():
        if not isinstance(groups, dict):
            continue
        counters: dict[str, int | None] = {}
        for group, keys in DEVICE_VALUES.items():
            values = groups.get(group)
            if isinstance(values, list) and len(values) == len(keys):
                counters.update(zip(keys, (_count(v) for v in values), strict=True))
        if counters:
            found.append(DeviceSample(t, str(name)[:64], counters))
    return found


def _switch_errors(t: float, value: object) -> list[SwitchError]:
    """A device line's `sxid` list (`[switch, SXid, severity]` each); others left out."""
    found = []
    for entry in value if isinstance(value, list) else []:
        if not isinstance(entry, list) or len(entry) != 3 or _int(entry[1]) is None:
            continue
        switch, severity = str(entry[0])[:64], str(entry[2])[:16]
        found.append(SwitchError(t, switch, _int(entry[1]) or 0, severity))
    return found


def _count(value: object) -> int | None:
    found = _int(value)
    return found if found is not None and found >= 0 else None


def parse_lines(lines: str | list[str] | tuple[str, ...]) -> NodeLines:
    """The samples of a node's `samples.jsonl` (its text or its lines), in order."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    samples: list[Sample] = []
    devices: list[DeviceSample] = []
    switch_errors: list[SwitchError] = []
    klog_unread: float | None = None
    errors: list[str] = []
    end, end_t, bad = None, None, 0
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if not isinstance(record, dict) or _num(record.get("t")) is None:
            bad += 1
            continue
        t = float(record["t"])
        if "end" in record:
            end, end_t = str(record["end"]), t
            continue
        if "error" in record:
            errors.append(str(record["error"])[:200])
            continue
        if "dev" in record:
            found = _device_samples(t, record["dev"])
            if found is None:
                bad += 1
            else:
                devices += found
            switch_errors += _switch_errors(t, record.get("sxid"))
            if record.get("klog") is not None and klog_unread is None:
                klog_unread = t
            continue
        gpu = _int(record.get("gpu"))
        if gpu is None:
            bad += 1
            continue
        xid = record.get("xid") or []
        samples.append(
            Sample(
                t=t,
                gpu=gpu,
                temp=_num(record.get("temp")),
                power=_num(record.get("power")),
                sm=_num(record.get("sm")),
                events=_events(record.get("events")),
                **{k: _int(record.get(k)) for k in ("ecc_cv", "ecc_uv", "ecc_ca", "ecc_ua")},
                **{k: _int(record.get(k)) for k in ("rp_sbe", "rp_dbe", "rr_c", "rr_u")},
                xid=tuple(x for x in (_int(v) for v in xid if isinstance(xid, list)) if x),
                windows=_windows(record.get("win")),
                pcie_gen=_int(record.get("pg")),
                pcie_width=_int(record.get("pw")),
                pcie_gen_max=_int(record.get("pgm")),
                pcie_width_max=_int(record.get("pwm")),
                mem=_num(record.get("mem")),
            )
        )
    return NodeLines(
        tuple(samples),
        end,
        end_t,
        tuple(errors),
        bad,
        devices=tuple(devices),
        switch_errors=tuple(switch_errors),
        kernel_log_unread=klog_unread,
    )
