"""The pair probes overlapped with the facts: each node's stages start as soon as the facts
they need are in, instead of three cluster-wide fan-outs after the last node's facts.

The stages and their commands are those of `pairs.gather_pair_facts`; only their order in
time differs. What each stage needs:
- a target's listener: the target's data-plane address (its facts), and the facts of every
  source that will probe it. The listener lives `LISTENER_LIFETIME_S`, so once it is up its
  sources must not wait on the rest of the cluster: a listener whose target or sources take
  part in an inventory ACL flow (a source probing far-away targets too) waits for every
  node's facts, as in the three fan-outs (a 256-node lab run showed the expiry otherwise);
- a source's probes: its own facts, and the listener of its ring partner and of each ACL
  flow target started (or known not to start: a target without an address);
- stopping a listener: every source that probes it done.
Everything runs on the transport's pool, within its concurrency bound. A stage that fails,
or work not done when `result` stops waiting, leaves its pairs unmeasured (never passed).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future

from pytest_hpcnet.campaigns.pairs.probes import (
    _listener_handle,
    assemble,
    flow_plan,
    listener_lifetime_s,
    plan_pairs,
    source_command,
    start_listener_command,
    stop_listener_command,
)
from pytest_hpcnet.inventory.expectations import Expectations, Flow
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.transport.fanout import CommandResult, Transport


class PairPipeline:
    """Feed it each node's data-plane address as its facts arrive (`arrived`); `result`
    waits (bounded) for the pairs and ACL flows, as `gather_pair_facts` returns them."""

    def __init__(
        self,
        transport: Transport,
        nodes: dict[str, Node],
        pairs: list[tuple[str, str]],
        expect: Expectations,
    ):
        self.transport = transport
        self.nodes = nodes
        self.expect = expect
        self.plan = plan_pairs(pairs, expect)
        self.addresses: dict[str, str] = {}
        self.arrived_nodes: set[str] = set()
        self.started: dict[str, CommandResult] = {}
        self.probed: dict[str, CommandResult] = {}
        self.stopped: dict[str, CommandResult] = {}
        self.listener_known: set[str] = set()  # started, failed, or never to start
        self.source_done: set[str] = set()
        self.sources_of: dict[str, set[str]] = {t: set() for t in self.plan.listen}
        self.targets_of: dict[str, set[str]] = {}
        for source, target in self.plan.partner.items():
            self._depends(source, target)
        for source, items in self.plan.flows_from.items():
            for _kind, flow in items:
                self._depends(source, flow.target)
        self.sources = set(self.targets_of)
        self.lifetime_s = listener_lifetime_s(
            len(self.plan.listen), len(self.sources), transport.concurrency
        )
        self.flow_nodes = {n for _, f in self._flows() for n in (f.source, f.target)}
        _, flows_meta = flow_plan(self.plan, {})
        self.flow_numbers: dict[str, list[tuple[int, Flow]]] = {}
        for index, (_kind, flow) in flows_meta.items():
            self.flow_numbers.setdefault(flow.source, []).append((index, flow))
        self._launched: set[tuple[str, str]] = set()
        self._stopped_or_skipped: set[str] = set()
        self._pending = 0
        self._lock = threading.RLock()  # a done future's callback runs at once, inline
        self._idle = threading.Event()
        self._failure: str | None = None
        self._waiting_all = {t for t in self.plan.listen if self._waits_for_all(t)}
        self._not_arrived = set(nodes) | set(self.plan.listen) | self.sources
        with self._lock:  # names the inventory lacks never arrive: nothing to wait for
            for name in set(self.plan.listen) | self.sources:
                if name not in nodes:
                    self.arrived_nodes.add(name)
                    self._not_arrived.discard(name)
            for name in sorted(
                self.arrived_nodes | (set() if self._not_arrived else self._waiting_all)
            ):
                self._check_listener(name)
            self._check_done()

    def _flows(self) -> list[tuple[str, Flow]]:
        return [item for items in self.plan.flows_from.values() for item in items]

    def _waits_for_all(self, target: str) -> bool:
        sources = self.sources_of.get(target, set())
        return target in self.flow_nodes or bool(sources & self.flow_nodes)

    def _depends(self, source: str, target: str) -> None:
        self.targets_of.setdefault(source, set()).add(target)
        self.sources_of.setdefault(target, set()).add(source)

    # -- events (each checks only the stages that depend on what changed) ----------------

    def arrived(self, name: str, address: str | None) -> None:
        """A node's facts are in (address None: it has none, or did not answer)."""
        with self._lock:
            if address:
                self.addresses[name] = address
            self.arrived_nodes.add(name)
            self._not_arrived.discard(name)
            last = self._waiting_all if not self._not_arrived else set()
            for target in {name} | self.targets_of.get(name, set()) | last:
                self._check_listener(target)
            self._check_source(name)
            self._check_done()

    def _check_listener(self, target: str) -> None:
        if target not in self.plan.listen or ("listen", target) in self._launched:
            return
        if target in self._waiting_all:
            if self._not_arrived:
                return
        elif not ({target} | self.sources_of.get(target, set())) <= self.arrived_nodes:
            return
        self._launched.add(("listen", target))
        if target in self.addresses and target in self.nodes:
            tcp, udp = self.plan.listen[target]
            command = start_listener_command(self.addresses[target], tcp, udp, self.lifetime_s)
            self._launch("listen", target, command)
        else:
            self._listener_known(target)

    def _listener_known(self, target: str) -> None:
        self.listener_known.add(target)
        for source in self.sources_of.get(target, set()):
            self._check_source(source)
        self._check_stop(target)

    def _check_source(self, source: str) -> None:
        if source not in self.sources or ("probe", source) in self._launched:
            return
        if source not in self.arrived_nodes or not self.targets_of[source] <= self.listener_known:
            return
        self._launched.add(("probe", source))
        own_flows = [
            (index, self.addresses[flow.target], flow)
            for index, flow in self.flow_numbers.get(source, [])
            if flow.target in self.addresses
        ]
        if source not in self.addresses or (source not in self.plan.partner and not own_flows):
            self._source_done(source)  # not probed, as in gather_pair_facts
            return
        partner = self.addresses.get(self.plan.partner.get(source, ""))
        command = source_command(self.nodes[source], partner, self.expect, own_flows)
        self._launch("probe", source, command)

    def _source_done(self, source: str) -> None:
        self.source_done.add(source)
        for target in self.targets_of.get(source, set()):
            self._check_stop(target)

    def _check_stop(self, target: str) -> None:
        if ("stop", target) in self._launched or target not in self.listener_known:
            return
        if not self.sources_of.get(target, set()) <= self.source_done:
            return
        self._launched.add(("stop", target))
        started = self.started.get(target)
        handle = _listener_handle(started.stdout) if started is not None and started.ok else None
        if handle:
            self._launch("stop", target, stop_listener_command(*handle))
        else:
            self._stopped_or_skipped.add(target)

    def _check_done(self) -> None:
        listeners = len(self._stopped_or_skipped) == len(self.plan.listen)
        if self._pending == 0 and listeners and self.sources <= self.source_done:
            self._idle.set()

    def _launch(self, stage: str, name: str, command: str) -> None:
        self._pending += 1
        future = self.transport.submit(name, command)
        future.add_done_callback(self._finisher(stage, name))

    def _finisher(self, stage: str, name: str) -> Callable[[Future], None]:
        def finish(future: Future) -> None:
            with self._lock:
                self._pending -= 1
                try:
                    result = future.result()
                except BaseException as exc:  # cancelled at close, or a bug: fail closed
                    self._failure = self._failure or f"{stage} on {name}: {exc!r}"
                    self._idle.set()
                    return
                if stage == "listen":
                    self.started[name] = result
                    self._listener_known(name)
                elif stage == "probe":
                    self.probed[name] = result
                    self._source_done(name)
                else:
                    self.stopped[name] = result
                    self._stopped_or_skipped.add(name)
                self._check_done()

        return finish

    def abandon(self, reason: str) -> None:
        """The facts ended without some nodes (a failure upstream): stop waiting for them."""
        with self._lock:
            self._failure = self._failure or reason
            self._idle.set()

    # -- outcome --------------------------------------------------------------------------

    def result(self, timeout_s: float) -> tuple[dict, dict, str | None]:
        """(pair facts, flow facts, why some are missing or None), waiting at most
        `timeout_s`; unfinished stages leave their pairs out (never a pass)."""
        finished = self._idle.wait(timeout_s)
        with self._lock:
            why = self._failure
            if not finished:
                why = why or f"pair probes not done within {timeout_s:.0f} s"
            probed = dict(self.probed)
            stopped = dict(self.stopped)
            started = dict(self.started)
            addresses = dict(self.addresses)
        pairs, flows = assemble(self.plan, addresses, started, probed, stopped)
        return pairs, flows, why
