"""hpcnet GPU load program: sent to a node and run there with `python3` and PyTorch.

Not imported by the plugin: `probes/gpu_load.py` sends this file's text. Standard library
plus `torch` only. Without `--gpu` it starts one child per GPU (`--gpus N`), all at once,
and prints their lines between a header and an `end` line; with `--gpu I` it loads one GPU:

- a dense bf16 GEMM, then a tf32 GEMM (fp32 inputs, tensor cores), each for its share of
  `--seconds`, timed with CUDA events; TFLOPS is the median of the steady part (the first
  fifth of the timed batches dropped as warm-up);
- a device-to-device copy (HBM: bytes read plus written), and pinned host-to-device and
  device-to-host copies, the child running on the GPU's nearest CPUs (`--affinity`, from
  `nvidia-smi topo -m`) so its pinned memory is on the GPU's NUMA node;
- a checksum of a fixed-seed bf16 product (sums of its bit patterns, hashed), computed
  before and after the soak: the same on every healthy GPU of one SKU and software stack.

Output (one `key=value` line per GPU, values without spaces):
`gpu=3 engine=torch version=2.5.1 cuda=12.4 bf16_tflops=781.2 ... checksum=<16 hex>`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import time

FORMAT = "hpcnet-gpu-load 1"
SEED = 20261201
CHECK_N = 2048
STEADY_DROP = 0.2
MAX_BATCHES = 100_000


def _median_steady(rates: list[float]) -> float:
    steady = rates[int(len(rates) * STEADY_DROP) :] or rates
    return statistics.median(steady)


def _gemm_tflops(torch, dev, dtype, n: int, seconds: float) -> tuple[float, int]:
    """Median steady TFLOPS of n x n x n GEMMs for about `seconds`, and the batches timed."""
    a = torch.randn((n, n), device=dev, dtype=dtype)
    b = torch.randn((n, n), device=dev, dtype=dtype)
    c = torch.empty((n, n), device=dev, dtype=dtype)
    for _ in range(3):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize(dev)
    rates: list[float] = []
    reps = 10
    end = time.monotonic() + seconds
    while (time.monotonic() < end or len(rates) < 5) and len(rates) < MAX_BATCHES:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            torch.matmul(a, b, out=c)
        stop.record()
        stop.synchronize()
        ms = start.elapsed_time(stop)
        if ms > 0:
            rates.append(2.0 * n**3 * reps / (ms / 1e3) / 1e12)
    return _median_steady(rates), len(rates)


def _copy_gbs(torch, dst, src, nbytes: int, factor: int, seconds: float) -> float:
    """Median GB/s of `dst.copy_(src)` for about `seconds` (`factor` 2: read plus write)."""
    dst.copy_(src)
    torch.cuda.synchronize()
    rates: list[float] = []
    end = time.monotonic() + seconds
    while (time.monotonic() < end or len(rates) < 5) and len(rates) < MAX_BATCHES:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            dst.copy_(src, non_blocking=True)
        stop.record()
        stop.synchronize()
        ms = start.elapsed_time(stop)
        if ms > 0:
            rates.append(factor * nbytes * 5 / (ms / 1e3) / 1e9)
    return _median_steady(rates)


def _checksum(torch, dev) -> str:
    """16 hex of a digest of a fixed-seed bf16 product computed on this GPU: two sums over
    its fp32 bit patterns (plain, and weighted by position), on the GPU, in int64 without
    overflow, so any reduction order gives the same sums. No numpy needed."""
    g = torch.Generator(device="cpu").manual_seed(SEED)
    a = torch.randn((CHECK_N, CHECK_N), generator=g).to(dev, torch.bfloat16)
    b = torch.randn((CHECK_N, CHECK_N), generator=g).to(dev, torch.bfloat16)
    c = torch.matmul(a, b).float().contiguous()
    bits = c.view(torch.int32).to(torch.int64).flatten() & 0xFFFFFFFF
    low, high = bits & 0xFFFF, bits >> 16
    weights = torch.arange(bits.numel(), device=dev, dtype=torch.int64) % 65521 + 1
    sums = [int(x.sum().item()) for x in (low, high, low * weights, high * weights)]
    return hashlib.sha256(":".join(map(str, sums)).encode()).hexdigest()[:16]


def cpu_list(text: str) -> set[int]:
    """`0-47,96-143` -> the CPU numbers."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        if low.strip().isdigit():
            cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def pin(cpus: str) -> str:
    """Run on the GPU's nearest CPUs (`nvidia-smi topo -m`), so pinned host memory is
    allocated on its NUMA node; what was applied, for the output line."""
    if not cpus:
        return "any"
    try:
        os.sched_setaffinity(0, cpu_list(cpus))
    except (OSError, ValueError, AttributeError):
        return "not-applied"
    return cpus


def one_gpu(index: int, seconds: float, n: int, copy_mib: int, cpus: str = "") -> str:
    """Load GPU `index`; its output line."""
    pinned = pin(cpus)
    import torch

    dev = torch.device(f"cuda:{index}")
    torch.cuda.set_device(dev)
    torch.backends.cuda.matmul.allow_tf32 = True
    head = f"gpu={index} engine=torch version={torch.__version__} cuda={torch.version.cuda}"
    before = _checksum(torch, dev)
    bf16, batches = _gemm_tflops(torch, dev, torch.bfloat16, n, seconds * 0.6)
    tf32, more = _gemm_tflops(torch, dev, torch.float32, n, seconds * 0.25)
    nbytes = copy_mib << 20
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    hbm = _copy_gbs(torch, dst, src, nbytes, 2, seconds * 0.05)
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    h2d = _copy_gbs(torch, src, host, nbytes, 1, seconds * 0.05)
    d2h = _copy_gbs(torch, host, src, nbytes, 1, seconds * 0.05)
    after = _checksum(torch, dev)
    return (
        f"{head} bf16_tflops={bf16:.1f} tf32_tflops={tf32:.1f} hbm_gbs={hbm:.1f} "
        f"h2d_gbs={h2d:.2f} d2h_gbs={d2h:.2f} checksum={after} "
        f"checksum_stable={'yes' if after == before else 'no'} batches={batches + more} "
        f"cpus={pinned}"
    )


def _word(text: str) -> str:
    return "_".join(text.split())[:300] or "?"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=0)
    parser.add_argument("--gpu", type=int)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--copy-mib", type=int, default=1024)
    parser.add_argument("--affinity", default="", help="GPU=CPUS;... from nvidia-smi topo -m")
    parser.add_argument("--cpus", default="")
    args = parser.parse_args(argv)
    if args.gpu is not None:
        try:
            line = one_gpu(args.gpu, args.seconds, args.size, args.copy_mib, args.cpus)
            print(line, flush=True)
        except Exception as exc:  # the parent prints it as this GPU's error
            print(f"gpu={args.gpu} error={_word(f'{type(exc).__name__}: {exc}')}", flush=True)
            return 1
        return 0
    print(f"{FORMAT} gpus={args.gpus} seconds={args.seconds:g} size={args.size}", flush=True)
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")  # CUDA index = nvidia-smi index
    base = [sys.executable, os.path.abspath(__file__), "--seconds", str(args.seconds)]
    base += ["--size", str(args.size), "--copy-mib", str(args.copy_mib)]
    near = dict(x.split("=", 1) for x in args.affinity.split(";") if "=" in x)
    children = [
        subprocess.Popen(
            [*base, "--gpu", str(i), "--cpus", near.get(str(i), "")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(args.gpus)
    ]
    ok = 0
    limit = time.monotonic() + args.seconds * 2 + 120
    for i, child in enumerate(children):
        try:
            out, _ = child.communicate(timeout=max(1.0, limit - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            out, _ = child.communicate()
            out += f"\ngpu={i} error=timed_out_after_{args.seconds * 2 + 120:g}s"
        lines = [x for x in out.splitlines() if x.startswith(f"gpu={i} ")]
        if lines and "error=" not in lines[-1]:
            ok += 1
            print(lines[-1])
        elif lines:
            print(lines[-1])
        else:
            tail = out.strip().splitlines()[-1:] or [f"exit status {child.returncode}"]
            print(f"gpu={i} error={_word(tail[0])}")
    print(f"end gpus={args.gpus} ok={ok}", flush=True)
    return 0 if ok == args.gpus else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
