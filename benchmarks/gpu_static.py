"""What the GPU checks add to a static run on the lab.

    sudo .venv/bin/python benchmarks/gpu_static.py --nodes 16 --repeat 2

Brings up one lab of `--nodes` nodes (holding /run/hpcnet-lab.lock while it is up) and runs
`pytest -m static --inventory <lab>` as a user would, interleaved `--repeat` times, in three
variants: `all` (every static check); `no GPU tests` (`-k "not test_gpu_"`: the GPU tests
deselected, the GPU sections still gathered in the facts round trip); `CPU-only profile`
(the lab inventory with `expect.gpu.count: null`: no GPU command runs on the nodes, the GPU
tests are skipped as not applicable). Prints a Markdown table of wall seconds (each run, and
the median) and pytest's summary line.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import yaml
from lab_runs import lab_lock, timed_pytest

from pytest_hpcnet.lab import cluster as lab


def cpu_only(inventory: Path, target: Path) -> Path:
    """A copy of the lab inventory whose profile sets no GPUs."""
    data = yaml.safe_load(inventory.read_text())
    data.setdefault("expect", {})["gpu"] = {"count": None}
    target.write_text(yaml.safe_dump(data, sort_keys=False))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hpcnet-gpu-bench-") as tmp, lab_lock():
        root = Path(tmp)
        lab.up(args.nodes, 8500, root / "state", root / "lab.yaml")
        try:
            inventory = root / "lab.yaml"
            variants = {
                "all": (inventory, ()),
                "no GPU tests (-k 'not test_gpu_')": (inventory, ("-k", "not test_gpu_")),
                "CPU-only profile (gpu.count: null)": (cpu_only(inventory, root / "cpu.yaml"), ()),
            }
            walls: dict[str, list[float]] = {name: [] for name in variants}
            summary: dict[str, str] = {}
            for i in range(args.repeat):
                for n, (name, (inv, extra)) in enumerate(variants.items()):
                    wall, line = timed_pytest("static", inv, root / f"reports-{i}-{n}", *extra)
                    walls[name].append(wall)
                    summary[name] = line
        finally:
            lab.down(root / "state")
    print(f"| {args.nodes} nodes | runs (s) | median s | pytest |")
    print("|---|---|---:|---|")
    for name, values in walls.items():
        runs = ", ".join(f"{v:.2f}" for v in values)
        print(f"| {name} | {runs} | {statistics.median(values):.2f} | {summary[name]} |")


if __name__ == "__main__":
    main()
