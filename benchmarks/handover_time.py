"""How long a handover takes, phase by phase: the main job on the lab at several sizes.

    sudo nice -n 10 .venv/bin/python benchmarks/handover_time.py --sizes 1 2 4 --keep runs/
    .venv/bin/python benchmarks/handover_time.py --from runs/       # the table again, no lab
    .venv/bin/python benchmarks/handover_time.py --real ebmgn8v --nodes 16  # a real cluster's

For each size it brings up a lab of that many nodes (holding /run/hpcnet-lab.lock while it is
up) and runs the main job as `scripts/demo.sh` does: `pytest --hpcnet-inventory <lab>`, the
whole acceptance suite, default verbosity. No timer is added: the phases' own progress lines
(`hpcnet: <phase>: <outcome> (<s> s)`, `campaigns/progress.py`) give each phase's seconds;
the time each line of pytest's output arrived gives the rest (start-up and collection up to
`collected N items`, the session's end between the last test and the `hpcnet` summary, the
certificate rendered and signed after pytest's last line, at unconfigure). `--keep DIR` saves
each run's timed output (`<nodes>.log`: seconds, a tab, the line) so `--from DIR` prints the
table again. Prints a Markdown table: seconds per phase and size, and the fitted `a + b * n`
per phase (least squares over the sizes above one node: one node has no pairs and no
multi-node NCCL). `--real PROFILE` prints instead what the tools run on a real cluster per
phase, from the default `benchmarks:` settings and the profile's figures (`real_seconds`).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASE_END = re.compile(r"^hpcnet: (?P<what>.+): .*\((?P<s>\d+(?:\.\d+)?) s\)$")
PHASES: tuple[tuple[str, str], ...] = (
    ("facts", r"^facts from "),
    ("pair probes (reachability, ports, ping)", r"^pair probes "),
    ("per-ERI path MTU", r"^per-ERI path MTU"),
    ("perftest (ib_write_bw, ib_write_lat)", r"^ib_write_(bw|lat) "),
    ("GPU load", r"^GPU load "),
    ("DCGM diagnostics", r"^dcgmi diag "),
    ("single-node NCCL", r"^single-node all_reduce_perf"),
    ("GPU pairs (nvbandwidth)", r"^nvbandwidth "),
    ("NCCL all-reduce", r"^NCCL (all_reduce_perf|bisection)"),
    ("NCCL collectives", r"^(NCCL collectives|\w+_perf bisection)"),
    ("CPFS (fio)", r"^fio "),
)
"""Each table row and the progress lines (their phase names) it sums."""
OTHER = "other phases"
STARTUP = "start-up and collection"
TESTS = "tests outside the phases"
SESSION_END = "evidence, summary, trends"
CERTIFICATE = "certificate (rendered, signed)"
TOTAL = "total wall"


def run_main_job(inventory: Path, reports: Path) -> list[tuple[float, str]]:
    """The main job's output, each line with the seconds since its start, and its end."""
    command = [sys.executable, "-m", "pytest", "--hpcnet-inventory", str(inventory)]
    command += ["--hpcnet-reports-dir", str(reports), "-p", "no:cacheprovider"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    start = time.monotonic()
    lines: list[tuple[float, str]] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.monotonic() - start, line.rstrip("\n")))
    lines.append((time.monotonic() - start, f"(exit {proc.returncode})"))
    return lines


def phase_seconds(lines: list[tuple[float, str]]) -> dict[str, float]:
    """Seconds per table row of one run's timed output."""
    out = dict.fromkeys([name for name, _ in PHASES] + [OTHER], 0.0)
    for _, line in lines:
        m = PHASE_END.match(line)
        if m is None or m["what"].endswith(" ..."):
            continue
        row = next((name for name, rx in PHASES if re.search(rx, m["what"])), OTHER)
        out[row] += float(m["s"])
    collected = next((t for t, ln in lines if re.match(r"^collected \d+ items", ln)), 0.0)
    last_test = max((t for t, ln in lines if re.search(r"\[\s*\d+%\]$", ln)), default=collected)
    summary = next((t for t, ln in lines if t >= last_test and " hpcnet " in ln), last_test)
    last_line, end = lines[-2][0], lines[-1][0]
    in_phases = sum(out.values())
    out[STARTUP] = collected
    out[TESTS] = max(last_test - collected - in_phases, 0.0)
    out[SESSION_END] = summary - last_test
    out[CERTIFICATE] = end - last_line
    out[TOTAL] = end
    return out


def fit(sizes: list[int], seconds: list[float]) -> tuple[float, float]:
    """Least-squares `a + b * n` through (sizes, seconds)."""
    if len(sizes) < 2:
        return seconds[0], 0.0
    mean_n, mean_s = sum(sizes) / len(sizes), sum(seconds) / len(seconds)
    var = sum((n - mean_n) ** 2 for n in sizes)
    b = sum((n - mean_n) * (s - mean_s) for n, s in zip(sizes, seconds, strict=True)) / var
    return mean_s - b * mean_n, b


def table(runs: dict[int, dict[str, float]]) -> Iterable[str]:
    sizes = sorted(runs)
    fitted = [n for n in sizes if n > 1] if len([n for n in sizes if n > 1]) > 1 else sizes
    head = " | ".join(f"{n} node{'s' * (n > 1)} s" for n in sizes)
    yield f"| phase | {head} | fit over {', '.join(map(str, fitted))} nodes, s |"
    yield "|---|" + "---:|" * len(sizes) + "---|"
    rows = [name for name, _ in PHASES] + [OTHER, STARTUP, TESTS, SESSION_END, CERTIFICATE]
    for row in [*rows, TOTAL]:
        values = [runs[n][row] for n in sizes]
        if not any(values) and row != TOTAL:
            continue
        a, b = fit(fitted, [runs[n][row] for n in fitted])
        name = f"**{row}**" if row == TOTAL else row
        cells = " | ".join(f"{v:.1f}" for v in values)
        yield f"| {name} | {cells} | {a:.1f} {'+' if b >= 0 else '-'} {abs(b):.2f} n |"


def read_log(path: Path) -> list[tuple[float, str]]:
    out = []
    for line in path.read_text().splitlines():
        seconds, _, text = line.partition("\t")
        out.append((float(seconds), text))
    return out


def measure(sizes: list[int], keep: Path | None) -> dict[int, dict[str, float]]:
    from lab_runs import lab_lock

    from pytest_hpcnet.lab import cluster as lab

    runs: dict[int, dict[str, float]] = {}
    for nodes in sizes:
        with tempfile.TemporaryDirectory(prefix="hpcnet-handover-") as tmp, lab_lock():
            root = Path(tmp)
            state, inventory = root / "state", root / "lab.yaml"
            lab.up(nodes, 8500, state, inventory)
            try:
                lines = run_main_job(inventory, root / "reports")
            finally:
                lab.down(state)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            text = "".join(f"{t:.3f}\t{line}\n" for t, line in lines)
            (keep / f"{nodes}.log").write_text(text)
        runs[nodes] = phase_seconds(lines)
        print(f"{nodes} nodes: {runs[nodes][TOTAL]:.1f} s; {lines[-2][1]}", file=sys.stderr)
    return runs


DCGM_LEVEL_S = {1: 10.0, 2: 120.0, 3: 900.0}
DCGM_SOURCE = (
    "NVIDIA's dcgmi diag reference: level 1 seconds, 2 about two minutes, 3 about 15 "
    "minutes; level 4: its timeout"
)


def nccl_bytes(text: str) -> int:
    """nccl-tests' size argument (`8`, `128M`, `8G`: powers of 1024) in bytes."""
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(float(text.rstrip("KMGkmg")) * scale)


def sweep_bytes(b: str, e: str, f: int) -> int:
    """The bytes of one pass over nccl-tests' sizes b, b*f, ... e."""
    size, end, total = nccl_bytes(b), nccl_bytes(e), 0
    while size <= end:
        total += size
        size *= f
    return total


def real_seconds(profile: str, nodes: int) -> list[tuple[str, float, str]]:
    """What the tools themselves run on a real cluster, per phase, from the default
    `benchmarks:` settings and the profile's figures (its floors: a cluster at its floor
    takes this long; a faster one less). Start-up, transfers and judging are not included."""
    from pytest_hpcnet.inventory.bench_settings import BenchmarkSettings
    from pytest_hpcnet.inventory.expectations import Expectations, load_profile
    from pytest_hpcnet.probes.gpu_dcgm import LEVEL_TIMEOUT_S

    bench, expect = BenchmarkSettings(), Expectations.model_validate(load_profile(profile))
    gpus, eris = expect.gpu.count or 0, expect.erdma.eris or 1
    pt, nccl, fio, load = bench.perftest, bench.nccl, bench.fio, bench.gpu_load
    rows: list[tuple[str, float, str]] = []
    rows.append(("GPU load", load.seconds, "benchmarks.gpu_load.seconds"))
    level = expect.gpu_load.dcgm_level
    if level is not None:
        seconds = DCGM_LEVEL_S.get(level, float(LEVEL_TIMEOUT_S[level]))
        rows.append(
            (
                "DCGM diagnostics",
                seconds,
                f"dcgmi diag -r {level}, all nodes at once ({DCGM_SOURCE})",
            )
        )
    node_bw = expect.gpu_load.min_node_busbw_gbs
    if node_bw and gpus > 1:
        n = load.nccl
        moved = sweep_bytes(n.b, n.e, n.f) * 2 * (gpus - 1) / gpus
        rows.append(
            (
                "single-node NCCL",
                (n.n + n.w) * moved / (node_bw * 1e9),
                f"(n+w) x {n.b}..{n.e} x 2(g-1)/g at min_node_busbw_gbs {node_bw:g}",
            )
        )
    lat_s = pt.rounds * eris * 2.0
    rows.append(
        (
            "perftest (ib_write_bw, ib_write_lat)",
            pt.rounds * eris * (pt.duration_s or 5) + (pt.duration_s or 5) + lat_s,
            f"{pt.rounds} rounds x {eris} ERIs x -D {pt.duration_s}, all ERIs at once, "
            "latency ~2 s a run",
        )
    )
    net_gbs = (expect.erdma.per_instance_gbps or 0) / 8
    ranks = nodes * max(gpus, 1)
    if net_gbs and nodes > 1:
        a = nccl.args
        moved = sweep_bytes(a.b, a.e, a.f or 2) * 2 * (ranks - 1) / ranks
        iters = (a.n or 20) + (a.w or 5)
        allreduce = iters * moved / (net_gbs * 1e9)
        rows.append(
            (
                "NCCL all-reduce",
                allreduce,
                f"(n+w) x {a.b}..{a.e} x 2(r-1)/r at the instance's {net_gbs:g} GB/s",
            )
        )
        share = len(nccl.collectives.run) / 2
        rows.append(
            (
                "NCCL collectives",
                allreduce * share,
                f"{len(nccl.collectives.run)} collectives, each half the all-reduce's bytes",
            )
        )
    rows.append(("CPFS (fio)", 2.0 * fio.runtime_s, "write then read, runtime_s each"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--keep", type=Path, help="save each run's timed output here")
    parser.add_argument("--from", dest="source", type=Path, help="read saved runs, no lab")
    parser.add_argument("--real", metavar="PROFILE", help="a real cluster's tool time instead")
    parser.add_argument("--nodes", type=int, default=16, help="with --real: the node count")
    args = parser.parse_args()
    if args.real:
        rows = real_seconds(args.real, args.nodes)
        print(f"| {args.real}, {args.nodes} nodes | tools run s | from |")
        print("|---|---:|---|")
        for name, seconds, how in rows:
            print(f"| {name} | {seconds:.0f} | {how} |")
        print(f"| **sum** | {sum(s for _, s, _ in rows):.0f} | |")
        return
    if args.source is not None:
        logs = sorted(args.source.glob("*.log"), key=lambda p: int(p.stem))
        runs = {int(p.stem): phase_seconds(read_log(p)) for p in logs}
    else:
        runs = measure(args.sizes, args.keep)
    print("\n".join(table(runs)))


if __name__ == "__main__":
    main()
