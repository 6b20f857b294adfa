"""hpcnet burn-in program: started detached on a node, it loads every GPU for the whole
duration and writes one JSON line per GPU per interval to the node's disk.

Not imported by the plugin: `probes/burnin.py` sends this file's text with the GPU load
program (`gpu_load_program.py`, saved beside it as `gpu_load.py`), whose GEMM timing and
seeded checksum it reuses. Standard library plus `torch` only.

- One child per GPU (`--gpu I`) runs windows back to back: bf16 GEMMs for most of an
  interval (median steady TFLOPS), then the checksum of the fixed-seed product; it appends
  each window to `gpuI.windows` (`[window, tflops, checksum]`).
- The parent samples every `--interval` seconds: `nvidia-smi --query-gpu` (temperature,
  power, SM clock, clock-event reasons, ECC volatile and aggregate counts, retired pages,
  remapped rows), the `NVRM: Xid` lines of the kernel log not seen at start, and the windows
  each GPU finished since the last sample (none lost, however short a window); it appends one
  line per GPU to `samples.jsonl`:
  `{"t": 30.0, "gpu": 0, "temp": 61, ..., "win": [[1, 781.2, "<16 hex>"]]}`.
- It stops by itself after `--seconds`, or when the controller's heartbeat file (`heartbeat`,
  touched at each collection) is older than `--heartbeat` seconds, and writes a last line
  `{"t": ..., "end": "done", "cpu_s": 1.2}` (or `"heartbeat"`, `"stopped: SIGTERM"`), with
  the sampler's own CPU seconds.
"""

from __future__ import annotations

import argparse
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
    "clocks_event_reasons.active",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.aggregate.total",
    "ecc.errors.uncorrected.aggregate.total",
    "retired_pages.single_bit_ecc.count",
    "retired_pages.double_bit.count",
    "remapped_rows.correctable",
    "remapped_rows.uncorrectable",
)
KEYS = (
    "gpu",
    "bus",
    "temp",
    "power",
    "sm",
    "events",
    "ecc_cv",
    "ecc_uv",
    "ecc_ca",
    "ecc_ua",
    "rp_sbe",
    "rp_dbe",
    "rr_c",
    "rr_u",
)
"""The sample's key for each of FIELDS (short: a line per GPU per interval for days)."""
OLD_NAMES = {"clocks_event_reasons.active": "clocks_throttle_reasons.active"}
XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?:[0-9A-Fa-f]{4,8}:)?([0-9A-Fa-f]{2}):[0-9A-Fa-f]{2}[^)]*\): (\d+)"
)


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
    """One dict per GPU (KEYS), or [] where nvidia-smi fails (old names retried)."""
    for names in (fields, tuple(OLD_NAMES.get(f, f) for f in fields)):
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
                if len(cells) == len(KEYS):
                    rows.append(dict(zip(KEYS, (_value(c) for c in cells), strict=True)))
            return rows
    return []


def xid_lines() -> list[str]:
    """The kernel log's `NVRM: Xid` lines (dmesg; empty where it cannot be read)."""
    try:
        out = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line for line in out.splitlines() if "NVRM: Xid" in line]


def new_xids(lines: list[str], seen: set[str]) -> dict[str, list[int]]:
    """{bus (2 hex, upper case): Xid numbers} of the lines not in `seen` (added to it)."""
    found: dict[str, list[int]] = {}
    for line in lines:
        if line in seen:
            continue
        seen.add(line)
        if m := XID.search(line):
            found.setdefault(m.group(1).upper(), []).append(int(m.group(2)))
    return found


def one_gpu(index: int, folder: str, seconds: float, interval: float, size: int) -> int:
    """Windows of GEMMs and a checksum on GPU `index` until `seconds` or a `stop` file."""
    sys.path.insert(0, folder)
    import torch
    from gpu_load import _checksum, _gemm_tflops

    dev = torch.device(f"cuda:{index}")
    torch.cuda.set_device(dev)
    end = time.monotonic() + seconds
    window = 0
    path = os.path.join(folder, f"gpu{index}.windows")
    while time.monotonic() < end and not os.path.exists(os.path.join(folder, "stop")):
        window += 1
        tflops, _ = _gemm_tflops(torch, dev, torch.bfloat16, size, max(0.5, interval * 0.7))
        record = [window, round(tflops, 1), _checksum(torch, dev)]
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


def heartbeat_age(folder: str) -> float:
    try:
        return time.time() - os.stat(os.path.join(folder, "heartbeat")).st_mtime
    except OSError:
        return 0.0  # no heartbeat file yet: the controller's first collection makes it


def sample(folder: str, t0: float, seen: set[str], offsets: dict[int, int], out) -> int:
    """One line per GPU into `out` (with the load windows it finished since the last);
    the number of GPUs nvidia-smi listed."""
    rows = query()
    xids = new_xids(xid_lines(), seen)
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
    seen = set(xid_lines())
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
    with open(os.path.join(folder, "samples.jsonl"), "a") as out:
        next_at = t0 + args.interval
        while True:
            time.sleep(max(0.0, next_at - time.time()))
            next_at += args.interval
            try:
                sample(folder, t0, seen, offsets, out)
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
        for child in children:
            try:
                child.wait(timeout=max(5.0, args.interval * 2))
            except subprocess.TimeoutExpired:
                child.kill()
        own = os.times()  # the sampler's own CPU, the load children not counted
        done = {"t": round(time.time() - t0, 1), "end": end, "cpu_s": round(own[0] + own[1], 2)}
        out.write(json.dumps(done) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
