"""Progress lines for the long phases of a run: facts, pair probes, benchmark rounds, NCCL, fio.

A phase reports when it starts and, with its duration and outcome, when it ends, so a long
run never sits silent behind the first test that needs the cluster's data:

    hpcnet: facts from 128 nodes ...
    hpcnet: facts from 128 nodes: 127 answered, 1 unreachable (4.2 s)

The plugin's reporter (`plugin.terminal_reporter`) writes the lines to the terminal while
pytest captures the test's output (shown unless `-qq`; an xdist worker's terminal is not the
user's, so workers stay silent) and to the `pytest_hpcnet` logger at INFO.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

Reporter = Callable[[str], None]
PREFIX = "hpcnet: "
LOG = logging.getLogger("pytest_hpcnet")


def silent(line: str) -> None:
    """A reporter that only logs (library use, tests, xdist workers)."""
    LOG.info(line)


@dataclass
class Outcome:
    """What a phase says at its end (`outcome.text = "4 answered"`)."""

    text: str = ""


@contextmanager
def phase(report: Reporter, what: str) -> Iterator[Outcome]:
    """Report `what` now, and `what: <outcome> (<seconds>)` when the block ends."""
    report(f"{what} ...")
    outcome = Outcome()
    t0 = time.monotonic()
    try:
        yield outcome
    finally:
        took = f"{time.monotonic() - t0:.1f} s"
        report(f"{what}: {outcome.text} ({took})" if outcome.text else f"{what}: done ({took})")
