"""hpcnet burn-in program: started detached on a node, it loads every GPU for the whole
duration and writes one JSON line per GPU per interval to the node's disk.

Not imported by the plugin: `probes/burnin.py` sends this file's text with the GPU load
program (`gpu_load_program.py`, saved beside it as `gpu_load.py`), whose GEMM timing and
seeded checksum it reuses. Standard library plus `torch` only.

- One child per GPU (`--gpu I`) runs windows back to back: bf16 GEMMs for most of an
  interval (median steady TFLOPS), a device-to-device copy (GB/s, bytes read plus written),
  then the checksum of the fixed-seed product; it appends each window to `gpuI.windows`
  (`[window, tflops, checksum, copy_gbps]`).
- The parent samples every `--interval` seconds: `nvidia-smi --query-gpu` (temperature,
  power, SM and memory clocks, clock-event reasons, ECC volatile and aggregate counts,
  retired pages, remapped rows, PCIe link generation and width, current and max), the
  `NVRM: Xid` lines of the kernel log not seen at start, and the windows each GPU finished
  since the last sample
  (none lost, however short a window); it appends one line per GPU to `samples.jsonl`:
  `{"t": 30.0, "gpu": 0, "temp": 61, ..., "win": [[1, 781.2, "<16 hex>", 3650.2]]}`.
- At the start (t=0, before the load: the baseline) and every interval it appends one
  device line: each GPU's and ERI's AER totals (sysfs `aer_dev_*`), each ERI's error, drop
  and connect-failure counters (sysfs `hw_counters`, else `rdma -j statistic show`), each
  ERI netdev's error and drop counters (sysfs `statistics/`), and each GPU's NVLink replay,
  recovery and CRC totals (`nvidia-smi nvlink -e`, at the start, in the last interval and
  every `NVLINK_EVERY_S`: a second nvidia-smi call each interval would double the
  sampler's cost), values in the fixed orders below, null where not read, and the NVSwitch
  `SXid` lines the kernel logged since the last sample (`sxid`: `[switch, SXid, severity]`):
  `{"t": 30.0, "dev": {"GPU 0": {"aer": [0, 0, 0], "nvl": [0, 0, 0]},
  "erdma_0": {"aer": [0, 0, 0], "rdma": [0, 0, 0, 0, 0, 0, 0]}, "eth0": {"nic": [0, 0, 0, 0]}},
  "sxid": [["nvidia-nvswitch0", 20009, "Non-fatal"]]}`; `"klog": "unreadable"` where
  `dmesg` failed (not root, `kernel.dmesg_restrict=1`): the Xids were not read.
- It stops by itself after `--seconds`, or when the controller's heartbeat file (`heartbeat`,
  touched at each collection) is older than `--heartbeat` seconds, and writes a last line
  `{"t": ..., "end": "done", "cpu_s": 1.2}` (or `"heartbeat"`, `"stopped: SIGTERM"`), with
  the sampler's own CPU seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time

FORMAT = "hpcnet-burnin 1"
FIELDS = (
    "index",
    "pci.bus_id",
    "temperature.gpu",
    "power.draw",
    "clocks.sm",
    "clocks.mem",
    "clocks_event_reasons.active",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.aggregate.total",
    "ecc.errors.uncorrected.aggregate.total",
    "retired_pages.single_bit_ecc.count",
    "retired_pages.double_bit.count",
    "remapped_rows.correctable",
    "remapped_rows.uncorrectable",
    "pcie.link.gen.current",
    "pcie.link.width.current",
    "pcie.link.gen.max",
    "pcie.link.width.max",
)
KEYS = (
    "gpu",
    "bus",
    "temp",
    "power",
    "sm",
    "mem",
    "events",
    "ecc_cv",
    "ecc_uv",
    "ecc_ca",
    "ecc_ua",
    "rp_sbe",
    "rp_dbe",
    "rr_c",
    "rr_u",
    "pg",
    "pw",
    "pgm",
    "pwm",
)
"""The sample's key for each of FIELDS (short: a line per GPU per interval for days)."""
OLD_NAMES = {"clocks_event_reasons.active": "clocks_throttle_reasons.active"}
PCIE_FIELDS = 4
"""The last FIELDS (PCIe link): a driver that refuses them is queried without them."""
AER = ("correctable", "nonfatal", "fatal")
"""`aer` in a device line: the totals of `aer_dev_<severity>` in this order."""
NVLINK = ("replay", "recovery", "crc")
"""`nvl`: a GPU's NVLink error totals over its links (CRC: plain, or flit plus data)."""
RDMA = (
    "hw_bps_limit_drop_cnt",
    "hw_pps_limit_drop_cnt",
    "hw_rx_bps_limit_drop_cnt",
    "hw_rx_pps_limit_drop_cnt",
    "connect_failed_cnt",
    "connect_timeout_cnt",
    "verbs_create_qp_failed_cnt",
)
"""`rdma`: an ERI's counters (probes/counters.py's BAD_COUNTERS of the device), in order."""
NIC = ("rx_errors", "tx_errors", "rx_dropped", "tx_dropped")
"""`nic`: an ERI netdev's error and drop counters, in order."""
NVLINK_EVERY_S = 300.0
"""NVLink counters at the start, then at most this often (one more nvidia-smi call)."""
COPY_MIB = 1024
ERI_ID = ("0x1ded", "0x107f")
"""Alibaba's ERI (vendor, device), as probes/erdma.py's ERDMA_PCI_ID."""
XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?:[0-9A-Fa-f]{4,8}:)?([0-9A-Fa-f]{2}):[0-9A-Fa-f]{2}[^)]*\): (\d+)"
)
SXID = re.compile(
    r"(nvidia-nvswitch\d+): SXid \(PCI:[0-9A-Fa-f:.]+\): (\d+), (Fatal|Non-fatal|Correctable)"
)
"""An NVSwitch error line (`nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 20009, Non-fatal, Link
28 ...`: the driver's `NVSWITCH_PRINT_SXID`, open-gpu-kernel-modules error_nvswitch.h)."""
KERNEL_MARKS = ("NVRM: Xid", ": SXid (")


def _value(text: str) -> object:
    """An int or float of a cell, the text itself (`0x...`), or None (`[N/A]`, blank)."""
    text = text.strip()
    if not text or text.startswith("["):
        return None
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d+", text):
        return float(text)
    return text


def query(fields: tuple[str, ...] = FIELDS) -> list[dict]:
    """One dict per GPU (KEYS), or [] where nvidia-smi fails (old names retried, then
    without the PCIe link fields)."""
    old = tuple(OLD_NAMES.get(f, f) for f in fields)
    for names in (fields, old, fields[:-PCIE_FIELDS], old[:-PCIE_FIELDS]):
        try:
            out = subprocess.run(
                ["nvidia-smi", f"--query-gpu={','.join(names)}", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired):
            return []
        if out.returncode == 0:
            rows = []
            for line in out.stdout.splitlines():
                cells = [c.strip() for c in line.split(",")]
                if len(cells) == len(names):
                    keys = KEYS[: len(names)]
                    rows.append(dict(zip(keys, (_value(c) for c in cells), strict=True)))
            return rows
    return []


KLOG_UNREADABLE = "unreadable"


def xid_lines() -> list[str] | None:
    """The kernel log's `NVRM: Xid` and NVSwitch `SXid` lines (dmesg), or None where it
    cannot be read (`dmesg` needs root or `kernel.dmesg_restrict=0`): none read is not none."""
    try:
        out = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return [line for line in out.stdout.splitlines() if any(m in line for m in KERNEL_MARKS)]


def new_xids(lines: list[str], seen: set[str], sxids: list | None = None) -> dict[str, list[int]]:
    """{bus (2 hex, upper case): Xid numbers} of the lines not in `seen` (added to it); the
    new SXid lines go to `sxids` as `[switch, SXid, severity]`."""
    found: dict[str, list[int]] = {}
    for line in lines:
        if line in seen:
            continue
        seen.add(line)
        if m := XID.search(line):
            found.setdefault(m.group(1).upper(), []).append(int(m.group(2)))
        elif (m := SXID.search(line)) and sxids is not None:
            sxids.append([m.group(1), int(m.group(2)), m.group(3)])
    return found


def one_gpu(index: int, folder: str, seconds: float, interval: float, size: int) -> int:
    """Windows of GEMMs and a checksum on GPU `index` until `seconds` or a `stop` file."""
    sys.path.insert(0, folder)
    import torch
    from gpu_load import _checksum, _copy_gbs, _gemm_tflops

    dev = torch.device(f"cuda:{index}")
    torch.cuda.set_device(dev)
    nbytes = COPY_MIB << 20
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    end = time.monotonic() + seconds
    window = 0
    path = os.path.join(folder, f"gpu{index}.windows")
    while time.monotonic() < end and not os.path.exists(os.path.join(folder, "stop")):
        window += 1
        tflops, _ = _gemm_tflops(torch, dev, torch.bfloat16, size, max(0.5, interval * 0.7))
        copy = _copy_gbs(torch, dst, src, nbytes, 2, max(0.1, interval * 0.05))
        record = [window, round(tflops, 1), _checksum(torch, dev), round(copy, 1)]
        with open(path, "a") as out:
            out.write(json.dumps(record) + "\n")
    return 0


def new_windows(folder: str, index: int, offsets: dict[int, int]) -> list:
    """The windows GPU `index` finished since the last sample ([w, tflops, checksum])."""
    try:
        with open(os.path.join(folder, f"gpu{index}.windows")) as f:
            f.seek(offsets.get(index, 0))
            text = f.read()
    except OSError:
        return []
    whole, _, _ = text.rpartition("\n")
    if not whole:
        return []
    offsets[index] = offsets.get(index, 0) + len(whole) + 1
    found = []
    for line in whole.split("\n"):
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _count(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if text.isdigit() else None


def aer_totals(text: str | None) -> int | None:
    """An `aer_dev_*` file's total: its `TOTAL_ERR_*` line, else the sum of its bits."""
    if text is None:
        return None
    counts = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[1].isdigit():
            counts[words[0]] = int(words[1])
    total = next((v for k, v in counts.items() if k.startswith("TOTAL_ERR_")), None)
    return total if total is not None else (sum(counts.values()) if counts else None)


def rdma_json(*args: str) -> list:
    """`rdma -j ARGS`' entries (empty where the tool fails or prints no JSON list)."""
    try:
        out = subprocess.run(["rdma", "-j", *args], capture_output=True, text=True, timeout=30)
        found = json.loads(out.stdout or "[]")
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return []
    return found if isinstance(found, list) else []


def rdma_netdevs() -> list[str]:
    """The netdevs `rdma -j link show` names for the RDMA ports (empty where it fails)."""
    found = [p.get("netdev") for p in rdma_json("link", "show") if isinstance(p, dict)]
    return sorted({str(n) for n in found if n})


class Devices:
    """What the device line reads, found once at the start: the GPUs' and ERIs' PCI
    functions (sysfs under `$HPCNET_SYSFS`, else /sys), the RDMA devices and their netdevs
    (sysfs `device/net`, else `rdma link`)."""

    def __init__(self, sysfs: str):
        self.sysfs = sysfs
        self.pci: dict[str, str] = {}  # BDF -> "gpu" or the ERI's name
        root = os.path.join(sysfs, "bus/pci/devices")
        try:
            bdfs = sorted(os.listdir(root))
        except OSError:
            bdfs = []
        for bdf in bdfs:
            ids = [
                (_read(os.path.join(root, bdf, k)) or "").strip()
                for k in ("vendor", "device", "class")
            ]
            if ids[0] == "0x10de" and ids[2].startswith("0x03"):
                self.pci[bdf] = "gpu"
            elif tuple(ids[:2]) == ERI_ID:
                try:
                    names = sorted(os.listdir(os.path.join(root, bdf, "infiniband")))
                except OSError:
                    names = []
                self.pci[bdf] = names[0] if names else f"ERI {bdf}"
        ib = os.path.join(sysfs, "class/infiniband")
        try:
            self.rdma = sorted(os.listdir(ib))
        except OSError:
            self.rdma = []
        self.netdevs: list[str] = []
        self.hw_counters = False
        for name in self.rdma:
            with contextlib.suppress(OSError):
                self.netdevs += sorted(os.listdir(os.path.join(ib, name, "device/net")))
            self.hw_counters = self.hw_counters or any(
                os.path.isdir(os.path.join(ib, name, "ports", p, "hw_counters"))
                for p in self._ports(name)
            )
        if self.rdma and not self.netdevs:  # erdma's netdev is another PCI function
            self.netdevs = rdma_netdevs()
        self.nvlink_at = float("-inf")
        self.index: dict[str, object] = {}  # bus id (sysfs form) -> GPU index

    def _ports(self, name: str) -> list[str]:
        try:
            return sorted(os.listdir(os.path.join(self.sysfs, "class/infiniband", name, "ports")))
        except OSError:
            return []

    def aer(self, bdf: str) -> list:
        base = os.path.join(self.sysfs, "bus/pci/devices", bdf)
        return [aer_totals(_read(os.path.join(base, f"aer_dev_{s}"))) for s in AER]

    def rdma_counters(self) -> dict[str, list]:
        """ERI -> RDMA values (summed over its ports), from sysfs or `rdma statistic`."""
        found: dict[str, list] = {}
        if self.hw_counters:
            ib = os.path.join(self.sysfs, "class/infiniband")
            for name in self.rdma:
                values: list = [None] * len(RDMA)
                for port in self._ports(name):
                    for i, counter in enumerate(RDMA):
                        n = _count(
                            _read(os.path.join(ib, name, "ports", port, "hw_counters", counter))
                        )
                        if n is not None:
                            values[i] = (values[i] or 0) + n
                found[name] = values
            return found
        for entry in rdma_json("statistic", "show"):
            if not isinstance(entry, dict) or "ifname" not in entry:
                continue
            values = found.setdefault(str(entry["ifname"]), [None] * len(RDMA))
            for i, counter in enumerate(RDMA):
                n = entry.get(counter)
                if isinstance(n, int) and not isinstance(n, bool):
                    values[i] = (values[i] or 0) + n
        return found

    def nic(self, netdev: str) -> list:
        for root in (self.sysfs, "/sys"):
            base = os.path.join(root, "class/net", netdev, "statistics")
            if os.path.isdir(base):
                return [_count(_read(os.path.join(base, c))) for c in NIC]
        return [None] * len(NIC)


_NVL = re.compile(r"^\s*Link \d+: (Replay|Recovery|CRC|CRC Flit|CRC Data) Errors: (\d+)\s*$", re.I)
_NVL_GPU = re.compile(r"^GPU (\d+): ")


def nvlink_errors() -> dict[int, list[int]]:
    """GPU -> [replay, recovery, crc] totals over its links (`nvidia-smi nvlink -e`); a GPU
    without a counter line (no NVLink, all links inactive) is left out."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "nvlink", "-e"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found: dict[int, list[int]] = {}
    gpu = None
    for line in out.splitlines():
        if m := _NVL_GPU.match(line):
            gpu = int(m.group(1))
        elif gpu is not None and (m := _NVL.match(line)):
            kind = m.group(1).lower()
            at = NVLINK.index("crc" if kind.startswith("crc") else kind)
            found.setdefault(gpu, [0, 0, 0])[at] += int(m.group(2))
    return found


def device_line(
    devices: Devices, rows: list[dict], t: float, interval: float, last: bool = False
) -> dict:
    """The device record at `t`: AER of every GPU and ERI, NVLink (when due, and in the
    `last` sample), the ERIs' RDMA counters and their netdevs' NIC counters."""
    if rows:  # a failed query keeps the last bus -> index map
        devices.index = {str(r.get("bus") or "").lower()[-12:]: r.get("gpu") for r in rows}
    index = devices.index
    dev: dict[str, dict] = {}
    for bdf, kind in devices.pci.items():
        name = kind if kind != "gpu" else f"GPU {index[bdf]}" if bdf in index else f"GPU {bdf}"
        dev[name] = {"aer": devices.aer(bdf)}
    now = time.monotonic()
    if last or now - devices.nvlink_at >= NVLINK_EVERY_S - 0.5 * interval:
        devices.nvlink_at = now
        for gpu, counts in nvlink_errors().items():
            dev.setdefault(f"GPU {gpu}", {})["nvl"] = counts
    for name, values in devices.rdma_counters().items():
        dev.setdefault(name, {})["rdma"] = values
    for netdev in devices.netdevs:
        dev.setdefault(netdev, {})["nic"] = devices.nic(netdev)
    return {"t": round(t, 1), "dev": dev}


def write_devices(
    out,
    devices: Devices,
    rows: list[dict],
    t: float,
    interval: float,
    last: bool,
    klog_unreadable: bool = False,
    sxids: list | None = None,
):
    """The device line at `t` (`last`: NVLink read too) with the NVSwitch SXids logged since
    the last sample and whether the kernel log was unreadable, or an error line saying why
    not."""
    try:
        line = device_line(devices, rows, t, interval, last)
        if sxids:
            line["sxid"] = sxids[:64]
        if klog_unreadable:
            line["klog"] = KLOG_UNREADABLE
        out.write(json.dumps(line, separators=(",", ":")) + "\n")
    except Exception as exc:  # the line says why; the load goes on
        out.write(json.dumps({"t": round(t, 1), "error": str(exc)}) + "\n")
    out.flush()


def heartbeat_age(folder: str) -> float:
    try:
        return time.time() - os.stat(os.path.join(folder, "heartbeat")).st_mtime
    except OSError:
        return 0.0  # no heartbeat file yet: the controller's first collection makes it


def sample(
    folder: str,
    t0: float,
    seen: set[str],
    offsets: dict[int, int],
    out,
    devices: Devices | None = None,
    interval: float = 30.0,
    last: bool = False,
) -> int:
    """One line per GPU into `out` (with the load windows it finished since the last), then
    the device line; the number of GPUs nvidia-smi listed."""
    rows = query()
    sxids: list = []
    kernel = xid_lines()
    xids = new_xids(kernel or [], seen, sxids)
    now = time.time()
    for row in rows:
        bus = str(row.get("bus") or "")
        slot = bus.split(":")[1].upper() if bus.count(":") >= 2 else ""
        record = {"t": round(now - t0, 1), **row}
        record["events"] = str(row.get("events") or "")
        if windows := new_windows(folder, int(row["gpu"] or 0), offsets):
            record["win"] = windows
        if xids.get(slot):
            record["xid"] = xids[slot]
        record.pop("bus", None)
        out.write(json.dumps(record, separators=(",", ":")) + "\n")
    if devices is not None:
        write_devices(out, devices, rows, now - t0, interval, last, kernel is None, sxids)
    out.flush()
    return len(rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--interval", type=float, default=30.0)
    parser.add_argument("--heartbeat", type=float, default=600.0)
    parser.add_argument("--gpus", type=int, default=0)
    parser.add_argument("--gpu", type=int)
    parser.add_argument("--size", type=int, default=8192)
    args = parser.parse_args(argv)
    if args.gpu is not None:
        return one_gpu(args.gpu, args.dir, args.seconds, args.interval, args.size)
    folder, t0 = args.dir, time.time()
    with open(os.path.join(folder, "started"), "w") as f:
        f.write(f"{FORMAT} t0={t0:.3f} seconds={args.seconds:g} interval={args.interval:g}\n")
    kernel = xid_lines()
    seen = set(kernel or ())
    devices = Devices(os.environ.get("HPCNET_SYSFS") or "/sys")
    samples = os.path.join(folder, "samples.jsonl")
    with open(samples, "a") as out:  # the baseline, before the load, that rises are judged from
        write_devices(out, devices, query(), time.time() - t0, args.interval, True, kernel is None)
    base = [sys.executable, os.path.abspath(__file__), "--dir", folder]
    base += ["--seconds", str(args.seconds), "--interval", str(args.interval)]
    children = [
        subprocess.Popen(
            [*base, "--size", str(args.size), "--gpu", str(i)],
            env=dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID"),
            stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(folder, f"gpu{i}.err"), "w"),  # noqa: SIM115
        )
        for i in range(args.gpus)
    ]
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append("stopped: SIGTERM"))
    end = "done"
    offsets: dict[int, int] = {}
    with open(samples, "a") as out:
        next_at = t0 + args.interval
        while True:
            time.sleep(max(0.0, next_at - time.time()))
            next_at += args.interval
            try:  # the samples of the last interval read NVLink too
                last = time.time() - t0 >= args.seconds - args.interval - 0.01
                sample(folder, t0, seen, offsets, out, devices, args.interval, last)
            except Exception as exc:  # the line says why; the load goes on
                out.write(json.dumps({"t": round(time.time() - t0, 1), "error": str(exc)}) + "\n")
            if time.time() - t0 >= args.seconds - 0.01:
                break
            if heartbeat_age(folder) > args.heartbeat:
                end = "heartbeat"
                break
            if stopping:
                end = stopping[0]
                break
        open(os.path.join(folder, "stop"), "w").close()
        # the end line as soon as sampling ends (the controller's last collection waits one
        # interval, not a window more): the sampler's own CPU and the tools it ran
        # (nvidia-smi, dmesg, rdma), the load children not counted
        own = os.times()
        done = {"t": round(time.time() - t0, 1), "end": end, "cpu_s": round(own[0] + own[1], 2)}
        done["tools_s"] = round(own[2] + own[3], 2)
        out.write(json.dumps(done) + "\n")
    for child in children:  # each ends its window and sees `stop`
        try:
            child.wait(timeout=max(5.0, args.interval * 2))
        except subprocess.TimeoutExpired:
            child.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
