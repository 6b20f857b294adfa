"""The nightly gate at scale: `pytest -m static` beside the facts-via-OpenSSH floor.

    python benchmarks/gate_scale.py --sizes 64 128 256 [--repeat 1] [--fault mtu]

Per size, holding the host-wide lab lock only for that size (other lab users take turns):
- `lab up`: wall time, the memory of the lab's processes (sum of their PSS) and of its
  tmpfs state, and `lab down`'s wall time at the end;
- `floor`: issue 17's facts command on every node through OpenSSH under `xargs -P 64`
  (`FLOOR_COMMAND`, the ssh options of `ssh_argv`), output discarded; it is fixed and does
  not grow with the plugin's checks;
- `same-work floor`: the plugin's own whole facts script (`facts_command`, every section:
  GPU and eRDMA included, the one command it runs per node) through the same OpenSSH and
  `xargs -P 64`, output discarded;
- `static`: the whole `pytest --inventory lab.yaml -m static` run in a fresh process;
  its controller CPU is that process's own rusage (user + system, from `wait4`: the pytest
  process and any children it waited for; the lab's sshds and node commands are not its
  children and are not counted), and its peak RSS;
- floor and static alternate, `--repeat` times each, after one untimed floor (warm caches)
  and, at the first size, one untimed static run (writes the bytecode); medians;
- with `--fault KIND`: at the largest size, one more static run with that lab fault on one
  node (`--fault-workers K`: under `-n K`), and which subjects failed (a fault is localized
  when every failure names that node);
- with `--xdist-only`: no warm-up runs and no plain static run; the `--workers 0` run stands
  for it (a 1,024-node lab, where each run takes minutes);
- with `--profile FILE`: at the smallest size, one more static run under cProfile;
- with `--history N`: the static runs of each size find N earlier runs of the cluster in
  their reports folder, as a nightly gate does (its trends page reads up to 14): copies of one
  untimed run, a night apart;
- with `--workers 0 2`: the static run once per worker count (`-n K`, `0`: no xdist), each
  process's own CPU and peak RSS left by `benchmarks/xdist_rusage.py` (controller, workers);
- with `--controller-floor`: what the controller's CPU cannot go below at this granularity,
  per size: `pytest only` (a generated project with as many empty tests as the static run
  has items, with the same pytest-html and JUnit reports: pytest's own per-item protocol)
  and `one item per node` (the static run narrowed to `test_node_answers_over_ssh`: the
  plugin's start-up, one SSH session and the facts per node, the certificate).
Needs root (the lab). Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from pytest_hpcnet.campaigns.fact_sections import facts_command
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import cluster as lab
from pytest_hpcnet.lab import faults

ROOT = Path(__file__).resolve().parents[1]
LOCK = "/run/hpcnet-lab.lock"
PARALLEL = 64
FLOOR_COMMAND = (
    "ibv_devinfo; rdma link; ip -j -s link show; "
    'sysctl -a 2>/dev/null | grep -E "rmem|wmem|congestion"; cat /proc/mounts; '
    "curl -s http://100.100.100.200/latest/meta-data/vswitch-id"
)
"""Issue 17's floor: the facts a static gate needs, gathered by hand."""
STATIC_TIMEOUT_S = 900
DEV_ONLY = ("-p", "no:hypothesispytest")
"""The test extra's hypothesis plugin (not a dependency of the plugin): 1.2 s at session end."""


def installed_env() -> dict[str, str]:
    """The environment of a controller with the package installed: bytecode is cached.

    This sandbox sets PYTHONDONTWRITEBYTECODE, so every run would compile every module and
    pytest would re-run its assertion rewriting of the plugin package (about 2 s of CPU).
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def ssh_argv(key: str, known_hosts: str, host: str) -> list[str]:
    """Issue 17's ssh command for one node (without the remote command)."""
    return [
        "ssh",
        "-i",
        key,
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        f"root@{host}",
    ]


def floor_shell(key: str, known_hosts: str, hosts_file: str, parallel: int = PARALLEL) -> str:
    """The floor's exact shell command line: one ssh per node under `xargs -P`."""
    ssh = " ".join(shlex.quote(a) for a in ssh_argv(key, known_hosts, "{}"))
    return (
        f"xargs -P {parallel} -I{{}} {ssh} {shlex.quote(FLOOR_COMMAND)} >/dev/null "
        f"< {shlex.quote(hosts_file)}"
    )


def facts_floor_shell(key: str, known_hosts: str, hosts_file: str, parallel: int = PARALLEL) -> str:
    """The same-work floor: the plugin's facts script (in `$HPCNET_FACTS`) per node."""
    ssh = " ".join(shlex.quote(a) for a in ssh_argv(key, known_hosts, "{}"))
    return (
        f'xargs -P {parallel} -I{{}} {ssh} "$HPCNET_FACTS" >/dev/null < {shlex.quote(hosts_file)}'
    )


def facts_script(inventory: str) -> str:
    """The plugin's facts script for this inventory (the same on every lab node)."""
    inv = load_inventory(inventory)
    scripts = {facts_command(node, inv.expect) for node in inv.nodes}
    if len(scripts) != 1:
        raise SystemExit(f"the facts script differs between nodes ({len(scripts)} variants)")
    return scripts.pop()


def host_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the whole host, from /proc/stat."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def timed(argv: list[str] | str, **kwargs) -> dict:
    """Run one child to its end: wall s, its own CPU s (wait4), peak RSS MB, exit code, and
    how busy the host's CPUs were meanwhile (the lab's nodes share them)."""
    busy0, total0 = host_cpu()
    with tempfile.TemporaryFile() as out:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, **kwargs)
        deadline = t0 + STATIC_TIMEOUT_S
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        output = out.read().decode(errors="replace")
    busy1, total1 = host_cpu()
    return {
        "host_busy": (busy1 - busy0) / max(1, total1 - total0),
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "rc": proc.returncode,
        "output": output,
    }


def measure_floor(inventory: str, same_work: bool = False) -> dict:
    """One floor run: issue 17's fixed command, or (`same_work`) the plugin's facts script."""
    inv = load_inventory(inventory)
    with tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False) as fh:
        fh.write("\n".join(n.host for n in inv.nodes) + "\n")
    shell = facts_floor_shell if same_work else floor_shell
    env = {**os.environ, "HPCNET_FACTS": facts_script(inventory)} if same_work else None
    try:
        command = shell(inv.ssh.identity_file, inv.ssh.known_hosts, fh.name)
        run = timed(command, shell=True, env=env)
    finally:
        os.unlink(fh.name)
    if run["rc"] != 0:  # kept, and said: one node's ssh failing must not end a long lab run
        noise = ("pyenv", "rm: cannot remove")  # root's .bashrc rehashing pyenv's shims
        errors = [ln for ln in run["output"].splitlines() if ln and not ln.startswith(noise)]
        run["errors"] = errors[:20]
        print(f"  floor exit {run['rc']}: {errors[:5]}", file=sys.stderr, flush=True)
    print(f"  {'same-work ' if same_work else ''}floor: {run['wall_s']:.1f} s", file=sys.stderr)
    return run


def measure_static(
    inventory: str,
    reports: Path,
    profile: Path | None = None,
    extra: tuple[str, ...] = (),
    workers: int | None = None,
) -> dict:
    """`pytest --inventory ... -m static` as a user runs it, in a fresh process; with
    `workers`, under `-n workers`, each process's CPU and peak RSS in `processes`."""
    profiler = ["-m", "cProfile", "-o", str(profile)] if profile else []
    usage_dir = Path(tempfile.mkdtemp(prefix="hpcnet-rusage-"))
    if workers is not None:
        extra = (*extra, "-p", "benchmarks.xdist_rusage", "-n", str(workers))
    run = timed(
        [
            sys.executable,
            *profiler,
            "-m",
            "pytest",
            "-m",
            "static",
            "-q",
            "-p",
            "no:cacheprovider",
            *DEV_ONLY,
            "--inventory",
            inventory,
            "--reports-dir",
            str(reports),
            *extra,
        ],
        cwd=ROOT,
        env={**installed_env(), "HPCNET_RUSAGE_DIR": str(usage_dir)},
    )
    run["processes"] = {p.stem: json.loads(p.read_text()) for p in sorted(usage_dir.glob("*.json"))}
    shutil.rmtree(usage_dir, ignore_errors=True)
    lines = run["output"].splitlines()
    checks = [ln.removeprefix("checks: ") for ln in lines if ln.startswith("checks: ")]
    runs = sorted(p for p in reports.iterdir() if p.is_dir()) if reports.exists() else []
    if run["rc"] not in (0, 1) or not checks or not runs:
        raise SystemExit(f"static run did not complete (exit {run['rc']}): {lines[-5:]}")
    run["checks"] = checks[-1]
    run["run_dir"] = runs[-1]
    cpu = {name: round(p["cpu_s"], 2) for name, p in run["processes"].items()}
    print(
        f"  static{'' if workers is None else f' -n {workers}'} {' '.join(extra)}: "
        f"{run['wall_s']:.1f} s, CPU {cpu or round(run['cpu_s'], 2)}, {run['checks']}",
        file=sys.stderr,
        flush=True,
    )
    return run


PYTEST_ONLY_CONFTEST = """
import pytest

NODES = {nodes}


def pytest_generate_tests(metafunc):
    if "node" in metafunc.fixturenames:
        metafunc.parametrize("node", [f"node{{i:03d}}" for i in range(NODES)])


@pytest.fixture
def check(request):
    return request.node.name
"""


def item_count(checks: str) -> int:
    """How many items a static run ran, from its `checks: ...` line."""
    return sum(int(word) for word in checks.replace(",", " ").split() if word.isdigit())


def measure_pytest_only(items: int, nodes: int) -> dict:
    """pytest alone: `items` empty tests (per node, with a function-scoped fixture like the
    plugin's `check`), pytest-html and JUnit on as in a run with an inventory."""
    per_node = max(1, round(items / nodes))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "conftest.py").write_text(PYTEST_ONLY_CONFTEST.format(nodes=nodes))
        tests = "".join(f"def test_{i}(node, check):\n    pass\n\n\n" for i in range(per_node))
        (folder / "test_items.py").write_text(tests)
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *DEV_ONLY]
        argv += ["--html", str(folder / "report.html"), "--self-contained-html"]
        argv += ["--junitxml", str(folder / "junit.xml"), "-p", "no:pytest_hpcnet"]
        run = timed(argv, cwd=folder, env=installed_env())
    if run["rc"] != 0:
        raise SystemExit(f"pytest-only run failed (exit {run['rc']}): {run['output'][-300:]}")
    run["items"] = per_node * nodes
    return run


def seed_history(reports: Path, nights: int) -> None:
    """Copy the latest run in `reports` as `nights` earlier nights of the same cluster."""
    latest = sorted(p for p in reports.iterdir() if p.is_dir())[-1]
    summary = json.loads((latest / "summary.json").read_text())
    for night in range(1, nights + 1):
        run_id = f"20000101-{night:06d}-hist"
        copy = reports / run_id
        shutil.copytree(latest, copy)
        started = datetime.fromisoformat(summary["started_at"]) - timedelta(days=night)
        ended = datetime.fromisoformat(summary["ended_at"]) - timedelta(days=night)
        data = {**summary, "run_id": run_id}
        data["started_at"], data["ended_at"] = started.isoformat(), ended.isoformat()
        (copy / "summary.json").write_text(json.dumps(data, indent=2))


def failed_subjects(run_dir: Path) -> dict[str, list[str]]:
    """check id -> subjects whose record is fail or error, from the run's evidence.jsonl."""
    failed: dict[str, list[str]] = {}
    for line in (run_dir / "evidence.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("verdict") in ("fail", "error"):
            subject = record["subject"]
            if record.get("kind") == "cluster":
                subject += f" (suspects: {', '.join(record.get('suspect_nodes') or ['none'])})"
            failed.setdefault(record["check_id"], []).append(subject)
    return failed


def mem_available_mb() -> float:
    """The host's MemAvailable (MB), from /proc/meminfo."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return 0.0


def lab_memory_mb(state_dir: Path) -> float:
    """Sum of the PSS of every process in the lab's namespaces, plus its tmpfs state (MB)."""
    pss_kb = 0
    for namespace in lab.lab_namespaces():
        for pid in lab._namespace_pids(namespace):
            try:
                text = Path(f"/proc/{pid}/smaps_rollup").read_text()
            except OSError:
                continue
            pss_kb += sum(int(ln.split()[1]) for ln in text.splitlines() if ln.startswith("Pss:"))
    du = ["du", "-sk", "--exclude=reports", str(state_dir)]  # the runs' folders are not the lab
    files = subprocess.run(du, capture_output=True, text=True)
    state_kb = int(files.stdout.split()[0]) if files.returncode == 0 else 0
    return (pss_kb + state_kb) / 1024


def one_size(size: int, args: argparse.Namespace) -> dict:
    """Everything for one size, under the lab lock."""
    state_dir = args.state_dir
    inventory = str(state_dir / "lab.yaml")
    reports = state_dir / "reports"
    row: dict = {"nodes": size, "floor": [], "same_work": [], "static": []}
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            available = mem_available_mb()
            t0 = time.monotonic()
            lab.up(size, 8500, state_dir, Path(inventory))
            row["up_s"] = time.monotonic() - t0
            row["lab_mb"] = lab_memory_mb(state_dir)
            row["host_mb_taken"] = available - mem_available_mb()
            print(
                f"{size} nodes up in {row['up_s']:.1f} s: lab {row['lab_mb']:.0f} MB "
                f"(host MemAvailable -{row['host_mb_taken']:.0f} MB)",
                file=sys.stderr,
                flush=True,
            )
            row["floor_command"] = floor_shell("KEY", "KH", "HOSTS")
            if not args.xdist_only:
                measure_floor(inventory)  # warm caches once, not counted
            if args.history:  # this size's runs only
                shutil.rmtree(reports, ignore_errors=True)
            if (size == args.sizes[0] and not args.xdist_only) or args.history:
                measure_static(inventory, reports)  # writes the bytecode; not counted
            if args.history:
                seed_history(reports, args.history)
            for _ in range(args.repeat if not args.no_floors else 0):
                row["floor"].append(measure_floor(inventory))
                row["same_work"].append(measure_floor(inventory, same_work=True))
                if not args.xdist_only:
                    row["static"].append(measure_static(inventory, reports))
            for _ in range(args.repeat):  # the worker counts interleaved
                for workers in args.workers:
                    run = measure_static(inventory, reports, workers=workers)
                    row.setdefault("xdist", {}).setdefault(workers, []).append(run)
            if args.xdist_only:  # the -n 0 runs stand for the plain static runs
                row["static"] = row["xdist"][0]
            row["failed"] = failed_subjects(row["static"][-1]["run_dir"])
            if args.controller_floor:
                items = item_count(row["static"][-1]["checks"])
                row["pytest_only"] = measure_pytest_only(items, size)
                narrow = ("-k", "test_node_answers_over_ssh")
                row["one_item"] = measure_static(inventory, reports, extra=narrow)
            if args.profile and size == min(args.sizes):
                measure_static(inventory, reports, args.profile)
            if args.fault and size == max(args.sizes):
                victim = lab.LabState.load(state_dir).nodes[size // 2].name
                faults.inject(args.fault, victim, None, state_dir)
                run = measure_static(inventory, reports, workers=args.fault_workers)
                row["fault"] = (victim, args.fault, run["checks"], failed_subjects(run["run_dir"]))
        finally:
            t0 = time.monotonic()
            lab.down(state_dir)
            row["down_s"] = time.monotonic() - t0
    return row


def wall_median(runs: list[dict]) -> float:
    """The median wall time of `runs` (nan without any: `--no-floors`)."""
    return statistics.median(r["wall_s"] for r in runs) if runs else float("nan")


def summarize(row: dict) -> str:
    """One Markdown table row of medians."""
    floor = wall_median(row["floor"])
    same = wall_median(row["same_work"])
    static = statistics.median(r["wall_s"] for r in row["static"])
    cpu = statistics.median(r["cpu_s"] for r in row["static"]) * 1000 / row["nodes"]
    rss = max(r["peak_rss_mb"] for r in row["static"])
    runs = row["static"] + row["floor"] + row["same_work"]
    busy = statistics.median(r["host_busy"] for r in runs)
    return (
        f"| {row['nodes']} | {row['up_s']:.1f} | {row['down_s']:.1f} | {row['lab_mb']:.0f} "
        f"| {floor:.2f} | {same:.2f} | {static:.2f} | {static / floor:.2f}x "
        f"| {static / same:.2f}x | {cpu:.1f} | {rss:.0f} | {busy:.0%} "
        f"| {row['static'][-1]['checks']} |"
    )


def xdist_rows(row: dict) -> str:
    """Markdown rows of one size's `--workers` runs (medians; worst peak RSS)."""
    nodes = row["nodes"]
    same = wall_median(row["same_work"])
    fixed = wall_median(row["floor"])

    def per_node(seconds: float) -> float:
        return seconds * 1000 / nodes

    def totals(run: dict) -> tuple[float, float, float]:
        procs = run["processes"]
        controller = procs.get("controller", {}).get("cpu_s", run["cpu_s"])
        workers = [p["cpu_s"] for name, p in procs.items() if name != "controller"]
        return controller + sum(workers), controller, max(workers, default=0.0)

    lines = []
    baseline = None
    for workers, runs in sorted(row["xdist"].items()):
        wall = statistics.median(r["wall_s"] for r in runs)
        measured = [totals(r) for r in runs]
        total, controller, largest = (statistics.median(m[i] for m in measured) for i in range(3))
        if workers == 0:
            baseline = total
        share = f"{largest / baseline:.0%}" if baseline and workers else "-"
        rss = {}
        for run in runs:
            for name, p in run["processes"].items():
                rss[name] = max(rss.get(name, 0.0), p["peak_rss_mb"])
        rss_text = ", ".join(f"{n} {v:.0f}" for n, v in sorted(rss.items()))
        lines.append(
            f"| {nodes} | {workers} | {wall:.2f} | {wall / same:.2f}x | {wall / fixed:.2f}x "
            f"| {per_node(total):.1f} "
            f"| {per_node(controller):.1f} | {per_node(largest):.1f} | {share} | {rss_text} "
            f"| {runs[-1]['checks']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--state-dir", type=Path, default=Path("/run/hpcnet-gate-scale"))
    parser.add_argument("--fault", help="a lab fault on one node for a last run (largest size)")
    parser.add_argument("--profile", type=Path, help="cProfile one more run (smallest size)")
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    parser.add_argument(
        "--history", type=int, default=0, help="earlier runs in the reports folder (nightly: 14)"
    )
    parser.add_argument(
        "--controller-floor",
        action="store_true",
        help="also measure pytest alone and one item per node (the controller's CPU floor)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        nargs="*",
        default=[],
        help="also run the static suite under -n K for each K (0: without xdist)",
    )
    parser.add_argument(
        "--xdist-only",
        action="store_true",
        help="no warm-up runs and no plain static runs: the --workers 0 runs stand for them "
        "(a 1,024-node lab: each static run takes minutes)",
    )
    parser.add_argument(
        "--no-floors", action="store_true", help="no floor runs (their tables are left out)"
    )
    parser.add_argument(
        "--fault-workers", type=int, help="the fault run under -n K (default: without -n)"
    )
    args = parser.parse_args()
    if args.xdist_only and 0 not in args.workers:
        parser.error("--xdist-only needs --workers 0 ...")
    if args.no_floors and not args.xdist_only:
        parser.error("--no-floors needs --xdist-only (the plain static runs go with the floors)")
    rows = []
    for size in args.sizes:
        rows.append(one_size(size, args))
        print(f"{size} nodes done", file=sys.stderr, flush=True)
    print(f"floor, per node under xargs -P {PARALLEL}: `{rows[0]['floor_command']}`\n")
    print(f"same-work floor: `{facts_floor_shell('KEY', 'KH', 'HOSTS')}`\n")
    print(
        "| nodes | lab up s | lab down s | lab memory MB | floor wall s | same-work floor s "
        "| static wall s | static / floor | static / same-work | controller CPU ms/node "
        "| peak RSS MB | host CPUs busy | checks |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for row in rows:
        print(summarize(row))
    if args.controller_floor:
        print(
            "\n| nodes | items | pytest only: CPU ms/node | one item per node: CPU ms/node "
            "| static: CPU ms/node |"
        )
        print("|---:|---:|---:|---:|---:|")
        for row in rows:
            static = statistics.median(r["cpu_s"] for r in row["static"])
            print(
                f"| {row['nodes']} | {row['pytest_only']['items']} "
                f"| {row['pytest_only']['cpu_s'] * 1000 / row['nodes']:.1f} "
                f"| {row['one_item']['cpu_s'] * 1000 / row['nodes']:.1f} "
                f"| {static * 1000 / row['nodes']:.1f} |"
            )
    if args.workers:
        print(
            "\n| nodes | -n | static wall s | static / same-work | static / fixed floor "
            "| CPU ms/node, all processes "
            "| controller CPU ms/node | largest worker CPU ms/node | largest worker / -n 0 total "
            "| peak RSS MB per process | checks |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
        for row in rows:
            print(xdist_rows(row))
    for row in rows:
        if row["failed"]:
            print(f"\n{row['nodes']} nodes, healthy run failures: {row['failed']}")
        if "fault" in row:
            victim, kind, checks, failed = row["fault"]
            print(f"\n{row['nodes']} nodes, fault `{kind}` on {victim}: {checks}; failed {failed}")
    if args.json:
        for row in rows:
            extras = [row[k] for k in ("pytest_only", "one_item") if k in row]
            extras += [r for runs in row.get("xdist", {}).values() for r in runs]
            for run in row["static"] + row["floor"] + row["same_work"] + extras:
                run.pop("output", None)
                run["run_dir"] = str(run.get("run_dir", ""))
        args.json.write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
