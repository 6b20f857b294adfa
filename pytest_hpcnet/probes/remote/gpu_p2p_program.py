"""hpcnet's GPU-to-GPU copy program (PyTorch): the fallback where nvbandwidth is missing.

Sent with its command (`probes/gpu_p2p_torch.p2p_command`) and run with the node's python3.
For every ordered pair of the node's GPUs (CUDA index = nvidia-smi index, PCI bus order) it
copies a buffer from the first GPU to the second `--iters` times after one warm-up copy,
timed with CUDA events on the source GPU's current stream (PyTorch issues a copy between
devices on the source device's stream), and prints one line per pair:

    hpcnet-gpu-p2p 1 engine=torch version=2.5.1 gpus=8 mib=256 iters=10
    pair 0 1 gbs=395.12
    pair 0 2 no-peer-access
    pair 3 4 error=RuntimeError:_CUDA_error:_...
    end pairs=56 ok=55

GB/s is bytes copied / elapsed time, 1e9 bytes a GB. Standard library and torch only.
"""

from __future__ import annotations

import argparse
import os
import sys

FORMAT = "hpcnet-gpu-p2p 1"


def _word(text: str) -> str:
    return "_".join(text.split())[:300] or "?"


def one_pair(torch, a: int, b: int, nbytes: int, iters: int) -> str:
    if not torch.cuda.can_device_access_peer(a, b):
        return f"pair {a} {b} no-peer-access"
    src = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{a}")
    dst = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{b}")
    dst.copy_(src)
    torch.cuda.synchronize(f"cuda:{a}")
    torch.cuda.synchronize(f"cuda:{b}")
    torch.cuda.set_device(torch.device(f"cuda:{a}"))
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        dst.copy_(src, non_blocking=True)
    stop.record()
    stop.synchronize()
    torch.cuda.synchronize(f"cuda:{b}")
    ms = start.elapsed_time(stop)
    return f"pair {a} {b} gbs={nbytes * iters / (ms / 1000.0) / 1e9:.2f}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args(argv)
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    try:
        import torch

        gpus = torch.cuda.device_count()
    except Exception as exc:
        print(f"{FORMAT} error={_word(f'{type(exc).__name__}: {exc}')}", flush=True)
        return 1
    head = f"{FORMAT} engine=torch version={torch.__version__} gpus={gpus}"
    print(f"{head} mib={args.mib} iters={args.iters}", flush=True)
    ok = pairs = 0
    for a in range(gpus):
        for b in range(gpus):
            if a == b:
                continue
            pairs += 1
            try:
                line = one_pair(torch, a, b, args.mib << 20, args.iters)
            except Exception as exc:
                line = f"pair {a} {b} error={_word(f'{type(exc).__name__}: {exc}')}"
            ok += "gbs=" in line
            print(line, flush=True)
    print(f"end pairs={pairs} ok={ok}", flush=True)
    return 0 if ok == pairs else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
