"""RDMA device and NIC counters read on every node right before and right after a
benchmark phase (perftest, NCCL): the checks judge the delta, never totals since boot.

One round trip per node per snapshot (`rdma_counters_command` and `ip -s -j link`, framed
as facts sections). A node that did not answer either time has no delta and says why.
"""

from __future__ import annotations

import threading

from pytest_hpcnet.campaigns.facts import FactsCampaign
from pytest_hpcnet.probes.counters import (
    CounterDelta,
    CounterSnapshot,
    counter_delta,
    nic_snapshot,
    parse_rdma_counters,
    rdma_counters_command,
)
from pytest_hpcnet.probes.links import ip_link_command, parse_interfaces
from pytest_hpcnet.probes.sections import sections_script, split_sections
from pytest_hpcnet.transport.fanout import CommandResult

Snapshot = tuple[CounterSnapshot, CounterSnapshot]
"""(RDMA device counters, NIC counters) of one node at one moment."""


def counters_command() -> str:
    """The snapshot script: RDMA counters (sysfs or `rdma statistic`) and `ip -s -j link`."""
    return sections_script({"rdma": rdma_counters_command(), "links": ip_link_command(stats=True)})


def parse_snapshot(result: CommandResult) -> Snapshot | None:
    """A node's snapshot from its output; None when the node did not answer or a section is
    missing, cut short or timed out (a partial snapshot would read as counters gone)."""
    if result.unreachable or result.timed_out:
        return None
    sections = split_sections(result.stdout)
    rdma, links = sections.get("rdma"), sections.get("links")
    if rdma is None or links is None or not (rdma.complete and links.complete):
        return None
    return parse_rdma_counters(rdma.text), nic_snapshot(parse_interfaces(links.text))


def merge_deltas(a: CounterDelta, b: CounterDelta) -> CounterDelta:
    """RDMA and NIC deltas of one node as one."""
    return CounterDelta(
        {**a.deltas, **b.deltas},
        a.resets + b.resets,
        a.missing + b.missing,
        a.problems + b.problems,
    )


class CounterWatch:
    """Counters before the first and after the last run of one benchmark phase."""

    def __init__(self, facts: FactsCampaign, phase: str):
        self.facts = facts
        self.phase = phase
        self.before_results: dict[str, CommandResult] = {}
        self.after_results: dict[str, CommandResult] = {}
        self._lock = threading.Lock()

    def _read(self) -> dict[str, CommandResult]:
        nodes = [n.name for n in self.facts.reachable_nodes()]
        return self.facts.transport.run_on_all(lambda node: counters_command(), nodes=nodes)

    def before(self) -> None:
        """Snapshot every reachable node, once (the phase's first run)."""
        with self._lock:
            if not self.before_results:
                self.before_results = self._read()

    def after(self) -> None:
        """Snapshot every reachable node again (each run of the phase moves it on)."""
        with self._lock:
            self.after_results = self._read()

    def deltas(self) -> dict[str, CounterDelta]:
        """Per node: after minus before (RDMA and NIC); problems say what was not read."""
        out = {}
        for node, first in self.before_results.items():
            last = self.after_results.get(node)
            a = parse_snapshot(first)
            b = parse_snapshot(last) if last is not None else None
            if a is None or b is None:
                why = (last or first).failure or (
                    "not read after the phase" if last is None else "a snapshot was cut short"
                )
                out[node] = CounterDelta(problems=(f"{self.phase} counters: {why}",))
                continue
            out[node] = merge_deltas(counter_delta(a[0], b[0]), counter_delta(a[1], b[1]))
        return out

    def commands(self, node: str) -> list[CommandResult]:
        """The node's two snapshot commands (for a check's evidence)."""
        return [r for r in (self.before_results.get(node), self.after_results.get(node)) if r]
