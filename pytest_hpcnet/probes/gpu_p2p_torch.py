"""The GPU-to-GPU fallback engine: the plugin's own copy program (`gpu_p2p_program.py`,
PyTorch), its command and the pure parser of its lines, read into the same result as
nvbandwidth's (`probes/gpu_p2p.NvbandwidthRun`, one matrix of test `TORCH_COPY`). A cut run
(no `end` line), a figure or a line it cannot read is a `problems` entry; a pair without
peer access is the matrix's `no_peer` list, a pair whose copy failed its `failed` list.
Never raises."""

from __future__ import annotations

import math
import re
from pathlib import Path

from pytest_hpcnet.probes.gpu_p2p import BandwidthMatrix, NvbandwidthRun

PROGRAM = Path(__file__).parent / "remote" / "gpu_p2p_program.py"
TORCH_COPY = "torch_copy_peer"
TIMEOUT_S = 600
_HEAD = re.compile(r"^hpcnet-gpu-p2p 1 (.*)$")
_PAIR = re.compile(r"^pair (\d+) (\d+) (?:gbs=(\S+)|(no-peer-access)|error=(\S*))\s*$")
_END = re.compile(r"^end pairs=(\d+) ok=(\d+)\s*$")


def p2p_command(mib: int = 256, iters: int = 10) -> str:
    """The copy program over every GPU pair of the node; its file removed afterwards."""
    return "\n".join(
        [
            "d=$(mktemp -d /tmp/hpcnet-gpu-p2p.XXXXXX) || exit 1",
            "trap 'rm -rf \"$d\"' EXIT",
            "cat >\"$d/p2p.py\" <<'HPCNET_GPU_P2P_EOF'",
            PROGRAM.read_text().rstrip("\n"),
            "HPCNET_GPU_P2P_EOF",
            f'timeout -k 10 {TIMEOUT_S - 30} python3 "$d/p2p.py" --mib {int(mib)} '
            f"--iters {int(iters)} 2>&1",
        ]
    )


def parse_torch_p2p(text: str) -> NvbandwidthRun:
    """Read the copy program's lines."""
    head: dict[str, str] | None = None
    cells: dict[tuple[int, int], float] = {}
    no_peer: list[tuple[int, int]] = []
    failed: list[tuple[int, int, str]] = []
    problems: list[str] = []
    ended = False
    for line in text.splitlines():
        line = line.strip()
        if m := _HEAD.match(line):
            head = dict(w.split("=", 1) for w in m.group(1).split() if "=" in w)
        elif m := _PAIR.match(line):
            a, b = int(m.group(1)), int(m.group(2))
            value = _figure(m.group(3)) if m.group(3) is not None else None
            if m.group(4):
                no_peer.append((a, b))
            elif m.group(5) is not None:
                failed.append((a, b, m.group(5)[:200] or "?"))
            elif value is None:
                problems.append(f"GPU {a} -> GPU {b}: unreadable figure {m.group(3)[:40]}")
            else:
                cells[(a, b)] = value
        elif _END.match(line):
            ended = True
        elif line and head is not None and len(problems) < 8:
            problems.append(f"unreadable: {line[:120]}")
    if head is None:
        tail = next((x.strip() for x in reversed(text.splitlines()) if x.strip()), "no output")
        return NvbandwidthRun(error=f"no output of the copy program ({tail[:160]})")
    if "error" in head:
        return NvbandwidthRun(error=f"the copy program could not start torch: {head['error']}")
    gpus = int(head["gpus"]) if head.get("gpus", "").isdigit() else 0
    if not ended:
        problems.append("no end line (cut short?)")
    full = tuple(
        (a, b, cells.get((a, b)) if a != b else None) for a in range(gpus) for b in range(gpus)
    )
    matrix = BandwidthMatrix(
        TORCH_COPY, "GPU", "->", "", full, gpus, gpus, tuple(no_peer), tuple(failed)
    )
    version = f"torch {head['version']}" if head.get("version") else None
    return NvbandwidthRun(version=version, matrices=(matrix,), problems=tuple(problems))


def _figure(word: str) -> float | None:
    try:
        value = float(word)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None
