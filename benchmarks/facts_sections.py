"""What each section of the facts script costs on a node, and what the SSH session costs.

    sudo .venv/bin/python benchmarks/facts_sections.py --nodes 4 [--repeat 5]

Brings up a lab of `--nodes` (holding the host-wide lab lock), then on its first node, over
the issue-17 OpenSSH command line, runs every section of the plugin's facts script `--loops`
times under one `/usr/bin/time` (`--repeat` such timings, medians): per run, the section's
wall time and the CPU of its
processes on the node (user + system of everything the section waited for; a service it
called, such as the lab's metadata server, is not counted). Beside them: the fixed floor's
commands measured the same way, and one SSH session running `true` (controller's `ssh` CPU
from `wait4`, host CPU from /proc/stat). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
from pathlib import Path

from gate_scale import FLOOR_COMMAND, host_cpu, ssh_argv, timed
from lab_runs import lab_lock

from pytest_hpcnet.campaigns.fact_sections import SECTIONS
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import cluster as lab

TIME_FORMAT = "@@cost %e %U %S"


def timed_script(commands: dict[str, str], loops: int) -> str:
    """Each command `loops` times under /usr/bin/time (its 10 ms ticks divided by `loops`),
    its output discarded, one cost line per command."""
    return "\n".join(
        f"echo '@@section {name}'; /usr/bin/time -f {shlex.quote(TIME_FORMAT)} "
        f"sh -c {shlex.quote(f'for i in $(seq {loops}); do ( {cmd} ); done')} "
        "</dev/null >/dev/null 2>/tmp/hpcnet-cost; grep '^@@cost' /tmp/hpcnet-cost"
        for name, cmd in commands.items()
    )


def parse_costs(output: str, loops: int) -> dict[str, tuple[float, float]]:
    """{section: (wall s, CPU s) per run} from the script's output."""
    costs: dict[str, tuple[float, float]] = {}
    name = None
    for line in output.splitlines():
        if line.startswith("@@section "):
            name = line.split(None, 1)[1]
        elif line.startswith("@@cost ") and name:
            wall, user, system = (float(x) for x in line.split()[1:4])
            costs[name] = (wall / loops, (user + system) / loops)
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--loops", type=int, default=10, help="runs of each section per timing")
    parser.add_argument("--state-dir", type=Path, default=Path("/run/hpcnet-facts-sections"))
    args = parser.parse_args()
    inventory = args.state_dir / "lab.yaml"
    with lab_lock():
        lab.up(args.nodes, 8500, args.state_dir, inventory)
        try:
            inv = load_inventory(str(inventory))
            node = inv.nodes[0]
            ssh = ssh_argv(inv.ssh.identity_file, inv.ssh.known_hosts, node.host)
            sections = {s.name: s.build(node, inv.expect) for s in SECTIONS}
            floor = {f"floor: {c.strip()}": c.strip() for c in FLOOR_COMMAND.split("; ")}
            samples: dict[str, list[tuple[float, float]]] = {}
            session: list[tuple[float, float, float]] = []
            for _ in range(args.repeat):
                out = subprocess.run(
                    [*ssh, timed_script({**sections, **floor}, args.loops)],
                    capture_output=True,
                    text=True,
                    timeout=300,
                    check=True,
                ).stdout
                for name, cost in parse_costs(out, args.loops).items():
                    samples.setdefault(name, []).append(cost)
                busy0, _ = host_cpu()
                run = timed([*ssh, "true"])
                busy1, _ = host_cpu()
                ticks = 100  # USER_HZ
                session.append((run["wall_s"], run["cpu_s"], (busy1 - busy0) / ticks))
        finally:
            lab.down(args.state_dir)
    print(f"| section (lab node, medians of {args.repeat}) | wall ms | node CPU ms |")
    print("|---|---:|---:|")
    total = {"plugin": 0.0, "floor": 0.0}
    for name, costs in samples.items():
        wall = statistics.median(c[0] for c in costs) * 1000
        cpu = statistics.median(c[1] for c in costs) * 1000
        total["floor" if name.startswith("floor") else "plugin"] += cpu
        print(f"| {name} | {wall:.0f} | {cpu:.0f} |")
    print(f"| **plugin's facts script, all sections** | | **{total['plugin']:.0f}** |")
    print(f"| **fixed floor's commands** | | **{total['floor']:.0f}** |")
    wall, cpu, host = (statistics.median(s[i] for s in session) for i in range(3))
    print(
        f"\nOne OpenSSH session running `true`: {wall * 1000:.0f} ms wall, ssh client "
        f"{cpu * 1000:.0f} ms CPU, whole host {host * 1000:.0f} ms CPU (client, sshd, shell)."
    )


if __name__ == "__main__":
    main()
