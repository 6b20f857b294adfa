"""`hpcnet expectations INVENTORY`: every effective `expect.*` key, its value and where it
came from (the inventory, its profile with the profile's source note, or the default).

Exit status: 0, or 4 with one line per problem when the inventory is not valid (as pytest
reports a bad inventory)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_hpcnet.inventory.loader import InventoryError
from pytest_hpcnet.inventory.provenance import effective_expectations, profile_notes

COMMAND = "expectations"
USAGE_ERROR = 4


def add_command(sub: argparse._SubParsersAction) -> None:
    """Register `expectations` on the `hpcnet` parser."""
    show = sub.add_parser(
        COMMAND, help="print every effective expectation, its value and where it came from"
    )
    show.add_argument("inventory", type=Path, help="the inventory file")


def lines(inventory: Path) -> list[str]:
    """The command's output: one line per key, then the profile's notes for its values."""
    found, profile = effective_expectations(inventory)
    width = max((len(e.key) for e in found), default=0)
    out = [f"{e.key:<{width}}  {json.dumps(e.value)}  [{e.origin}]" for e in found]
    if profile:
        notes = profile_notes(profile, found)
        if notes:
            out += ["", f"sources of the profile's values (profile {profile}):"]
            out += [f"  {key}: {note}" for key, note in notes.items()]
    return out


def run(args: argparse.Namespace) -> int:
    try:
        print("\n".join(lines(args.inventory)))
    except InventoryError as exc:
        for problem in exc.problems:
            print(f"hpcnet: {problem}")
        return USAGE_ERROR
    return 0
