"""`hpcnet verify`, `hpcnet keygen` and `hpcnet merge`: evidence bundles from the shell.

Exit status: 0 when the bundle verifies (merge: the merged verdict is ACCEPTED, or PASSED
for partial runs, which it prints as not a handover); 1 when it does not (merge: merged,
but REJECTED or INCOMPLETE, e.g. pairs across partitions that no input measured); 2 when
nothing could be done (not a run folder, a key that exists or a missing key folder, a
merge refused, e.g. an unsigned input without --allow-unsigned: nothing was written).
A bundle that does not verify prints no verdict of its own: only what its summary claims.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_hpcnet.report.evidence import read_summary
from pytest_hpcnet.report.merge import MergeRefused, merge, unsigned_line
from pytest_hpcnet.report.records import GOOD_VERDICTS
from pytest_hpcnet.report.signing import generate_keypair
from pytest_hpcnet.report.verify import verdict_lines, verify

COMMANDS = ("verify", "keygen", "merge")


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register `verify`, `keygen` and `merge` on the `hpcnet` parser."""
    check = sub.add_parser("verify", help="recompute a run's digest and check its signature")
    check.add_argument("run_dir", type=Path, help="reports/<run-id>/")
    check.add_argument("--public-key", type=Path, help="Ed25519 public key (PEM or OpenSSH)")
    keys = sub.add_parser("keygen", help="write an Ed25519 key pair for --hpcnet-sign-key")
    keys.add_argument("private_key", type=Path)
    keys.add_argument("public_key", type=Path)
    join = sub.add_parser(
        "merge", help="merge the verified bundles of partition runs into one certificate"
    )
    join.add_argument("out_dir", type=Path, help="new run folder for the merged bundle")
    join.add_argument("run_dirs", type=Path, nargs="+", metavar="run_dir", help="partition runs")
    join.add_argument("--sign-key", type=Path, help="Ed25519 private key: sign the merged bundle")
    join.add_argument(
        "--public-key",
        type=Path,
        action="append",
        default=[],
        help="every input must be signed by this key (or another --public-key)",
    )
    join.add_argument(
        "--allow-unsigned",
        action="store_true",
        help="merge unsigned inputs too (the merged summary says which were unsigned)",
    )


def run(args: argparse.Namespace) -> int:
    """Carry out `verify`, `keygen` or `merge`; returns the exit status."""
    if args.area == "merge":
        return _merge(args)
    if args.area == "keygen":
        for path in (args.private_key, args.public_key):
            if path.exists():
                print(f"hpcnet: {path} exists; not overwriting a key")
                return 2
            if not path.parent.is_dir():
                print(f"hpcnet: {path.parent}: no such folder (create it first)")
                return 2
        try:
            fingerprint = generate_keypair(args.private_key, args.public_key)
        except OSError as exc:
            print(f"hpcnet: {exc.filename or args.private_key}: {exc.strerror or exc}")
            return 2
        print(f"wrote {args.private_key} (keep it private) and {args.public_key}: {fingerprint}")
        return 0
    if not args.run_dir.is_dir():
        print(f"hpcnet: {args.run_dir} is not a run folder (reports/<run-id>/)")
        return 2
    result = verify(args.run_dir, args.public_key)
    print(
        f"{'OK' if result.ok else 'FAILED'}: {args.run_dir} ({result.state}), "
        f"digest {result.digest}"
    )
    for line in result.problems:
        print(f"  problem: {line}")
    for line in result.notes:
        print(f"  note: {line}")
    if not result.ok:
        print(f"verdict: none: the bundle does not verify{_claimed(args.run_dir)}")
    elif result.summary is not None:
        print("\n".join(verdict_lines(result.summary)))
    return 0 if result.ok else 1


def _claimed(run_dir: Path) -> str:
    """What a bundle that failed verification says of itself, marked as a claim."""
    try:
        summary = read_summary(run_dir)
    except (OSError, ValueError):
        return ""
    return f" (summary.json claims {summary.verdict})" if summary is not None else ""


def _merge(args: argparse.Namespace) -> int:
    try:
        result = merge(
            args.out_dir, args.run_dirs, args.sign_key, args.public_key, args.allow_unsigned
        )
    except MergeRefused as exc:
        for line in exc.problems:
            print(f"hpcnet merge: {line}")
        return 2
    signed = ", signed" if result.signed else ""
    print(
        f"merged {result.bundles} bundles ({result.checks} checks) into {result.out_dir}"
        f"{signed}: {result.verdict}"
    )
    for line in result.not_measured:
        print(f"  not measured: {line}")
    if result.unsigned_inputs:
        print(f"  {unsigned_line(result.unsigned_inputs)}")
    return 0 if result.verdict in GOOD_VERDICTS else 1
