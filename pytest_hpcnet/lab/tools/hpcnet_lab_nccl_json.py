"""nccl-tests' `-J FILE.json` result file as the lab's emulated `all_reduce_perf` writes it
(rank 0 only; version 3, the keys of nccl-tests 2.19.6's file). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import hpcnet_lab_rdma as lab


class JsonReport:
    """nccl-tests' `-J` file, written by rank 0 only (the shape of nccl-tests 2.19.6's file)."""

    def __init__(self, path: str | None, rank: int, argv: list[str], nccl_headers: int) -> None:
        self.path: Path | None = None
        self.data: dict = {}
        if not path or rank != 0:
            return
        if not path.lower().endswith(".json"):
            return  # nccl-tests infers the type from the suffix; others are not written
        tried, n = Path(path), 0
        while tried.exists() and n < 100:
            tried, n = Path(f"{path}.{n}"), n + 1
        try:
            tried.touch(exist_ok=False)
        except OSError:
            sys.stdout.write(f"# skipping json output; {tried} not accessible\n")
            return
        sys.stdout.write(f"# Writing JSON output to {tried}\n")
        self.path = tried
        env = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(("NCCL_", "CUDA")))
        self.data = {
            "version": 3,
            "start_time": time.strftime("%Y-%m-%d %H:%M:%S"),
            "args": ["all_reduce_perf", *argv],
            "env": env,
            "nccl_version": nccl_headers,
        }

    def config(self, args: argparse.Namespace, ring) -> None:
        if self.path is None:
            return
        peers = ring.peers or [["", "", str(os.getpid()), lab.node_name()]]
        step = {"step_factor": args.stepfactor} if args.stepfactor > 1 else {}
        self.data["config"] = {
            "nthreads": args.nthreads,
            "ngpus": args.ngpus,
            "minimum_bytes": args.minbytes,
            "maximum_bytes": args.maxbytes,
            **(step or {"step_bytes": args.stepbytes}),
            "warmup_iters": args.warmup_iters,
            "iterations": args.iters,
            "aggregated_iterations": 1,
            "validation": args.check,
            "graph": 0,
            "blocking_collectives": "false",
            "per_iter_timing": "false",
            "per_iter_skip": 0,
            "parallel_init": "false",
            "devices": [
                {
                    "rank": r,
                    "group": 0,
                    "pid": int(pid),
                    "hostname": host,
                    "device": 0,
                    "device_hex": "0000:00:00",
                    "device_info": "lab-emulated",
                }
                for r, (_, _, pid, host) in enumerate(peers)
            ],
        }
        self.data["results"] = []

    def row(self, size: int, op: str, check: int, measured: list[tuple[float, ...]]) -> None:
        if self.path is None:
            return
        halves = [
            {"time": t, "alg_bw": a, "bus_bw": b, "nwrong": float(w) if check else None}
            for t, a, b, w in measured
        ]
        self.data["results"].append(
            {
                "size": size,
                "count": size // 4,
                "type": "float",
                "redop": op,
                "root": "    -1",
                "out_of_place": halves[0],
                "in_place": halves[1],
                "actual_iterations": 0,
                "experiment_name": "",
            }
        )

    def close(self, wrong: int, avg: float | None, error: str | None = None) -> None:
        if self.path is None:
            return
        if avg is not None:
            self.data["out_of_bounds"] = {"count": wrong, "okay": str(not wrong).lower()}
            self.data["average_bus_bandwidth"] = {"bandwidth": avg, "okay": "unchecked"}
        self.data["errors"] = [error or ""]
        self.data["end_time"] = time.strftime("%Y-%m-%d %H:%M:%S")
        self.path.write_text(json.dumps(self.data))
