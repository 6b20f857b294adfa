"""The `hpcnet` command: `hpcnet lab up|status|down|fault|heal`, `hpcnet verify|keygen|merge`,
`hpcnet gate apply|run`, `hpcnet trends`, `hpcnet expectations`, `hpcnet ticket`. The lab is
imported by its own verb only."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_hpcnet import __version__
from pytest_hpcnet.gate import apply as gate_cli
from pytest_hpcnet.gate import history as trends_cli
from pytest_hpcnet.gate import run as gate_run
from pytest_hpcnet.report import commands as bundle_cli
from pytest_hpcnet.report import expectations_command, ticket

LAB_HELP = "the embedded lab cluster (network namespaces, needs root)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hpcnet", description="pytest_hpcnet tools")
    parser.add_argument("--version", action="version", version=f"hpcnet {__version__}")
    sub = parser.add_subparsers(dest="area", required=True)
    lab = sub.add_parser("lab", help=LAB_HELP, add_help=False)
    lab.add_argument("lab_args", nargs=argparse.REMAINDER, help="see `hpcnet lab --help`")
    bundle_cli.add_commands(sub)
    gate_run.add_command(gate_cli.add_commands(sub))
    trends_cli.add_command(sub)
    expectations_command.add_command(sub)
    ticket.add_command(sub)
    return parser


def _lab_parser(kinds: str, default_state_dir: Path) -> argparse.ArgumentParser:
    lab = argparse.ArgumentParser(prog="hpcnet lab", description=LAB_HELP)
    lab_sub = lab.add_subparsers(dest="action", required=True)
    state = argparse.ArgumentParser(add_help=False)
    state.add_argument("--state-dir", type=Path, default=default_state_dir, help="lab state folder")
    up = lab_sub.add_parser("up", parents=[state], help="create the lab (cleans a stale one first)")
    up.add_argument("--nodes", type=int, default=4, help="number of nodes (default 4)")
    up.add_argument("--mtu", type=int, default=8500, help="node MTU (default 8500)")
    up.add_argument("--eris", type=int, default=1, help="eRDMA devices per node, 1 or 2")
    up.add_argument(
        "--inventory", type=Path, default=Path("inventories/lab.yaml"), help="inventory to write"
    )
    up.add_argument("--slurm", action="store_true", help="also run a real Slurm (docs/gate.md)")
    lab_sub.add_parser("status", parents=[state], help="show the lab's nodes")
    lab_sub.add_parser("down", parents=[state], help="remove the lab (idempotent)")
    fault = lab_sub.add_parser(
        "fault",
        parents=[state],
        help="inject a fault into one node, for real",
        description=f"kinds:\n{kinds}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fault.add_argument("kind", help="fault kind (see the kinds above)")
    fault.add_argument("node", help="node name, e.g. node01")
    fault.add_argument("arg", nargs="*", help="kind argument (MTU, PROTO/PORT, ID, KEY=VALUE)")
    heal = lab_sub.add_parser("heal", parents=[state], help="undo the faults of a node or all")
    heal.add_argument("node", help="node name or `all`")
    return lab


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["lab"]:  # its own parser: every option of a lab verb goes to it
        return lab_verb(argv[1:])
    args = _parser().parse_args(argv)
    if args.area in bundle_cli.COMMANDS:
        return bundle_cli.run(args)
    if args.area == "trends":
        return trends_cli.run(args)
    if args.area == expectations_command.COMMAND:
        return expectations_command.run(args)
    if args.area == ticket.COMMAND:
        return ticket.run(args)
    if args.area == "gate":
        return gate_run.run(args) if args.action == "run" else gate_cli.run(args)
    return lab_verb(args.lab_args)


def lab_verb(argv: list[str]) -> int:
    """`hpcnet lab ...`: the one place the lab is imported, so no other verb loads it."""
    from pytest_hpcnet.lab import cluster, faults
    from pytest_hpcnet.lab import slurm as lab_slurm
    from pytest_hpcnet.lab.state import DEFAULT_STATE_DIR
    from pytest_hpcnet.lab.system import LabError

    kinds = "\n".join(f"  {k.usage:<26} {k.summary}" for k in faults.KINDS.values())
    args = _lab_parser(kinds, DEFAULT_STATE_DIR).parse_args(argv)
    try:
        if args.action == "up":
            state = cluster.up(args.nodes, args.mtu, args.state_dir, args.inventory, args.eris)
            print(f"lab up: {len(state.nodes)} nodes, inventory {state.inventory}")
            if args.slurm:
                print(f"lab Slurm up: export SLURM_CONF={lab_slurm.start(state)}")
        elif args.action == "status":
            print("\n".join(cluster.status(args.state_dir)))
        elif args.action == "down":
            removed = cluster.down(args.state_dir)
            print(f"lab down: removed {len(removed)} node namespaces")
        elif args.action == "fault":
            arg = " ".join(args.arg) or None
            print(f"lab fault: {faults.inject(args.kind, args.node, arg, args.state_dir)}")
        elif args.action == "heal":
            healed = faults.heal(args.node, args.state_dir)
            print(f"lab heal: {', '.join(healed) if healed else 'nothing to heal'}")
    except LabError as exc:
        print(f"hpcnet: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hpcnet: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
