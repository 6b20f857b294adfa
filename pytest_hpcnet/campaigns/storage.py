"""CPFS throughput: fio on every node at once against its own directory, files always removed."""

from __future__ import annotations

import shlex
import threading
from dataclasses import dataclass

from pytest_hpcnet.campaigns.facts import FactsCampaign
from pytest_hpcnet.campaigns.progress import phase
from pytest_hpcnet.inventory.bench_settings import FioSettings
from pytest_hpcnet.probes.fio import (
    FioJobSpec,
    FioResult,
    fio_cleanup_command,
    fio_command,
    parse_fio_json,
)
from pytest_hpcnet.transport.fanout import CommandResult, Transport


@dataclass(frozen=True)
class FioRun:
    """One node's sequential write and read results."""

    node: str
    write: FioResult | None
    read: FioResult | None
    error: str | None
    commands: tuple[CommandResult, ...]


def job(directory: str, rw: str, settings: FioSettings) -> FioJobSpec:
    return FioJobSpec(
        directory=directory,
        rw=rw,
        bs=settings.bs,
        numjobs=settings.numjobs,
        size=settings.size,
        runtime_s=settings.runtime_s,
        iodepth=settings.iodepth,
        ioengine=settings.ioengine,
        direct=settings.direct,
    )


def node_directory(mount: str, node: str) -> str:
    return f"{mount.rstrip('/')}/hpcnet-fio-{node}"


def run_fio(
    transport: Transport, nodes: list[str], mount: str, settings: FioSettings
) -> dict[str, FioRun]:
    """Write then read on every node at once; the job files are removed even on failure."""
    dirs = {n: node_directory(mount, n) for n in nodes}

    def phase(rw: str):
        return transport.run_on_all(
            lambda node: (
                f"mkdir -p {shlex.quote(dirs[node.name])} && "
                + fio_command(job(dirs[node.name], rw, settings))
            ),
            nodes=nodes,
            timeout_s=settings.timeout_s,
            together=True,  # the aggregate is only true when every node writes at once
        )

    try:
        written = phase("write")
        read = phase("read")
    finally:
        cleaned = transport.run_on_all(
            lambda node: (
                fio_cleanup_command(job(dirs[node.name], "write", settings))
                + f"; rmdir {shlex.quote(dirs[node.name])} 2>/dev/null; true"
            ),
            nodes=nodes,
        )
    runs = {}
    asked = settings.runtime_s  # --time_based: a shorter run was cut short
    for n in nodes:
        w, r = written.get(n), read.get(n)
        parsed = [
            parse_fio_json(x.stdout, asked) if x is not None and not x.unreachable else None
            for x in (w, r)
        ]
        # an exit status beside an output that is not one whole run says nothing more:
        # that phase is not measured (its `not_measured`), never failed for it
        failures = [
            x.failure
            for x, result in zip((w, r), parsed, strict=True)
            if x is not None and x.failure and not (result is not None and result.not_measured)
        ]
        runs[n] = FioRun(
            node=n,
            write=parsed[0],
            read=parsed[1],
            error=failures[0] if failures else None,
            commands=tuple(x for x in (w, r, cleaned.get(n)) if x is not None),
        )
    return runs


class FioCampaign:
    """fio write+read on every reachable node at once under the CPFS mount (once)."""

    def __init__(self, facts: FactsCampaign):
        self.facts = facts
        self.inventory = facts.inventory
        self._runs: dict[str, FioRun] | None = None
        self._lock = threading.Lock()

    def runs(self, only: set[str] | None = None) -> dict[str, FioRun]:
        """Each reachable node's fio run (measured on first use, on the reachable nodes in
        `only` when given: those where the mount check passed)."""
        with self._lock:
            if self._runs is None:
                names = [n.name for n in self.facts.reachable_nodes()]
                if only is not None:
                    names = [n for n in names if n in only]
                settings = self.inventory.benchmarks.fio
                mount = self.inventory.expect.cpfs.mount
                what = f"fio write and read on {len(names)} nodes under {mount}"
                with phase(self.facts.progress, what):
                    self._runs = run_fio(self.facts.transport, names, mount, settings)
            return self._runs
