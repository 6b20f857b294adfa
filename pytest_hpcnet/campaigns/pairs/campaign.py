"""Pair facts: path MTU, ICMP latency, port reachability and ACL flows for every pair at once.

Three fan-outs for the whole cluster, whatever its size: (1) start a bounded listener on
every target, (2) on every source, concurrently, ping its ring partner at the full MTU,
ping it for latency and try every required port, plus the ACL flows it is the source of,
(3) stop the listeners and collect what they saw. The commands and the assembly are in
`pair_probes`; the probes that overlap the facts round trip in `pair_pipeline`.
"""

from __future__ import annotations

import threading

from pytest_hpcnet.campaigns.facts import (
    FactsCampaign,
    MissingMeasurement,
)
from pytest_hpcnet.campaigns.pairs.pipeline import PairPipeline
from pytest_hpcnet.campaigns.pairs.probes import (  # noqa: F401 - flow_id, required_flows re-exported
    PIPELINE_GRACE_S,
    FlowFacts,
    PairFacts,
    flow_id,
    gather_pair_facts,
    required_flows,
)
from pytest_hpcnet.campaigns.progress import LOG, phase
from pytest_hpcnet.campaigns.schedule import ring_pairs
from pytest_hpcnet.inventory.expectations import Flow


class PairCampaign:
    """Every ring pair and inventory ACL flow probed at once (once), from the nodes' facts."""

    def __init__(self, facts: FactsCampaign):
        self.facts = facts
        self.inventory = facts.inventory
        self._pairs: dict[tuple[str, str], PairFacts] | None = None
        self._flows: dict[str, FlowFacts] = {}
        self._lock = threading.Lock()
        self._pipeline = None
        self._ranges: dict[int, tuple[dict, dict]] = {}  # under an xdist partition

    def ring(self) -> list[tuple[str, str]]:
        """The pairs every pair check covers: each node to the next around the ring."""
        return [(p.a, p.b) for p in ring_pairs([n.name for n in self.inventory.nodes])]

    def prefetch(self) -> None:
        """Probe the pairs alongside the facts (`pair_pipeline`): call it before the facts
        are gathered, when the run has pair checks; `gather` then waits for that work."""
        with self._lock:
            if self._pipeline is not None or self._pairs is not None:
                return
            nodes = {n.name: n for n in self.inventory.nodes}
            pipeline = PairPipeline(self.facts.transport, nodes, self.ring(), self.inventory.expect)
            self._pipeline = pipeline
        self.facts.on_arrival(lambda f: pipeline.arrived(f.node, self.facts.address_in(f)))

    def _wait_s(self) -> float:
        """How long `gather` waits for the overlapped probes after the facts: three stages,
        each bounded by the command timeout, plus the queue."""
        return 3 * self.inventory.ssh.command_timeout_s + PIPELINE_GRACE_S

    def gather(self) -> None:
        """Probe every pair and flow (once)."""
        with self._lock:
            if self._pairs is not None:
                return
            nodes = self.inventory.nodes
            self.facts.gather()
            addresses = {n.name: a for n in nodes if (a := self.facts.data_address(n.name))}
            ring = self.ring()
            with phase(self.facts.progress, f"pair probes on {len(ring)} pairs") as outcome:
                found = self._pipeline.result(self._wait_s()) if self._pipeline else None
                if found is not None and found[2] is None:
                    pairs, flows = found[0], found[1]
                else:  # not overlapped, or the overlap failed: the three fan-outs, afresh
                    if found is not None:
                        LOG.warning("overlapped pair probes incomplete (%s): again", found[2])
                    pairs, flows = gather_pair_facts(
                        self.facts.transport,
                        {n.name: n for n in nodes},
                        addresses,
                        ring,
                        self.inventory.expect,
                    )
                outcome.text = f"{len(pairs)} pairs and {len(flows)} ACL flows probed"
            self._pairs, self._flows = pairs, flows

    def _flows_by_id(self) -> dict[str, tuple[str, Flow]]:
        expect = self.inventory.expect
        kinds = (("allow", expect.flows.allow), ("deny", expect.flows.deny))
        return {flow_id(kind, f): (kind, f) for kind, flows in kinds for f in flows}

    def gather_range(self, index: int) -> tuple[dict, dict]:
        """Under an xdist partition: the ring pairs whose source is in range `index` and the
        ACL flows that range listens for (`Partition.flow_owner`), probed once here; the
        other ranges' pairs are another worker's. Only the nodes these probes touch have
        their facts read (a neighbouring range's from the worker that gathered them)."""
        partition = self.facts.partition
        assert partition is not None
        with self._lock:
            if index in self._ranges:
                return self._ranges[index]
            ring = [(a, b) for a, b in self.ring() if partition.pair_owner(a) == index]
            mine = [
                (kind, flow)
                for kind, flow in self._flows_by_id().values()
                if partition.flow_owner(flow.target) == index
            ]
            expect = self.inventory.expect
            flows = expect.flows.model_copy(
                update={
                    "allow": [f for k, f in mine if k == "allow"],
                    "deny": [f for k, f in mine if k == "deny"],
                }
            )
            expect = expect.model_copy(update={"flows": flows})
            touched = {n for pair in ring for n in pair}
            touched |= {n for _, f in mine for n in (f.source, f.target)}
            names = [n.name for n in self.inventory.nodes if n.name in touched]
            addresses = {n: a for n in names if (a := self.facts.data_address(n))}
            found = gather_pair_facts(
                self.facts.transport,
                {n.name: n for n in self.inventory.nodes},
                addresses,
                ring,
                expect,
            )
            self._ranges[index] = found
            return found

    def pair(self, source: str, target: str) -> PairFacts:
        """What `source` saw of `target`; `MissingMeasurement` when the pair was not probed."""
        partition = self.facts.partition
        owner = partition.pair_owner(source) if partition is not None else None
        if owner is not None:
            found = self.gather_range(owner)[0].get((source, target))
        else:
            self.gather()
            found = self._pairs.get((source, target)) if self._pairs else None
        if found is None:
            addressed = self.facts.data_address(target)
            reason = "not probed" if addressed else "no data-plane address"
            raise MissingMeasurement(f"{source}->{target}: pair not measured ({reason})")
        return found

    def flow(self, key: str) -> FlowFacts | None:
        """The outcome of one inventory ACL flow, or None when it could not be tried."""
        partition = self.facts.partition
        if partition is not None:
            known = self._flows_by_id().get(key)
            owner = partition.flow_owner(known[1].target) if known is not None else None
            return self.gather_range(owner)[1].get(key) if owner is not None else None
        self.gather()
        return self._flows.get(key)
