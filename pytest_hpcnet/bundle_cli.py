"""`hpcnet verify` and `hpcnet keygen`: checking and signing evidence bundles from the shell."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_hpcnet.signing import generate_keypair, verify


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register `verify` and `keygen` on the `hpcnet` parser."""
    check = sub.add_parser("verify", help="recompute a run's digest and check its signature")
    check.add_argument("run_dir", type=Path, help="reports/<run-id>/")
    check.add_argument("--public-key", type=Path, help="Ed25519 public key (PEM or OpenSSH)")
    keys = sub.add_parser("keygen", help="write an Ed25519 key pair for --hpcnet-sign-key")
    keys.add_argument("private_key", type=Path)
    keys.add_argument("public_key", type=Path)


def run(args: argparse.Namespace) -> int:
    """Carry out `verify` or `keygen`; returns the exit status."""
    if args.area == "keygen":
        for path in (args.private_key, args.public_key):
            if path.exists():
                print(f"hpcnet: {path} exists; not overwriting a key")
                return 2
        fingerprint = generate_keypair(args.private_key, args.public_key)
        print(f"wrote {args.private_key} (keep it private) and {args.public_key}: {fingerprint}")
        return 0
    if not args.run_dir.is_dir():
        print(f"hpcnet: {args.run_dir} is not a run folder (reports/<run-id>/)")
        return 2
    result = verify(args.run_dir, args.public_key)
    state = "signed" if result.signed else "unsigned"
    print(f"{'OK' if result.ok else 'FAILED'}: {args.run_dir} ({state}), digest {result.digest}")
    for line in result.problems:
        print(f"  problem: {line}")
    for line in result.notes:
        print(f"  note: {line}")
    return 0 if result.ok else 1
