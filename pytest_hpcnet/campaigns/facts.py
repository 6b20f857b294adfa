"""Node facts: every node's sections (`campaigns.fact_sections`) in ONE round trip per node,
gathered once, cached and read back by section (`NodeFacts`); a section missing, cut short or
timed out is not measured (`MissingMeasurement`), never read as a whole one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_hpcnet.campaigns.fact_sections import facts_command
from pytest_hpcnet.campaigns.progress import LOG, Reporter, phase, silent
from pytest_hpcnet.inventory.models import Inventory, Node
from pytest_hpcnet.probes.erdma import (
    EriIdentities,
    GidTables,
    parse_erdma_identity,
    parse_gid_tables,
)
from pytest_hpcnet.probes.eri_address import (
    EriAddress,
    PlannedEri,
    eri_address,
    eri_netdevs,
    plan_eris,
)
from pytest_hpcnet.probes.links import parse_interfaces
from pytest_hpcnet.probes.metadata import MetadataFacts, parse_metadata
from pytest_hpcnet.probes.rdma import (
    match_devices,
)
from pytest_hpcnet.probes.rdma_parsers import parse_ibv_devinfo, parse_rdma_link
from pytest_hpcnet.probes.sections import Section, SectionOutput, split_sections
from pytest_hpcnet.requirements.erdma import expected_eris
from pytest_hpcnet.requirements.verdict import NotMeasured
from pytest_hpcnet.transport.results import CommandResult

if TYPE_CHECKING:
    from pytest_hpcnet.campaigns.partition import FactsSpool, Partition
    from pytest_hpcnet.transport.fanout import Transport

FACTS_POLL_S = 1.0
FACTS_GRACE_S = 30.0
"""Beyond the command timeout, per wave of nodes, before the facts stop being waited for."""


def _not_gathered(name: str, reason: str) -> CommandResult:
    return CommandResult(name, "facts", None, "", "", 0.0, time.time(), unreachable=reason)


class MissingMeasurement(NotMeasured):
    """A check's data is missing (a facts section, a pair not measured): the check is not
    measured, with this one line (never a failure a waiver could cover)."""


T = TypeVar("T")


@dataclass(frozen=True)
class NodeFacts:
    """The sections gathered from one node in its single facts round trip."""

    node: str
    result: CommandResult
    sections: dict[str, SectionOutput]
    _parsed: dict[Section, Any] = field(default_factory=dict, compare=False, repr=False)
    """Each section's result by its parser (two parsers may read one section)."""

    def get(self, section: Section[T]) -> T:
        """A section read by its probe's parser, parsed once per node; raises
        `MissingMeasurement` as `text` does."""
        if section not in self._parsed:
            self._parsed[section] = section.parse(self.text(section.name))
        return self._parsed[section]

    def text(self, section: str) -> str:
        """A section's whole output; raises `MissingMeasurement` when the node did not give it,
        or gave it cut short (no end line) or timed out: a partial section is not measured."""
        out = self.sections.get(section)
        if out is None:
            why = self.result.failure or "output cut short"
            raise MissingMeasurement(f"{self.node}: facts lack section {section!r} ({why})")
        if out.status is None:
            raise MissingMeasurement(
                f"{self.node}: facts section {section!r} cut short: {self._cut_reason()}"
            )
        if out.timed_out:
            raise MissingMeasurement(
                f"{self.node}: facts section {section!r} timed out (exit status {out.status}): "
                "its output is partial"
            )
        return out.text

    def whole(self, section: str) -> str | None:
        """A section's output when the node gave all of it; None when it is missing, cut
        short or timed out (the accessors below then know nothing, as for a missing one)."""
        out = self.sections.get(section)
        return out.text if out is not None and out.complete else None

    def _cut_reason(self) -> str:
        """Why a section's end line never came, from what the facts command did."""
        result = self.result
        if result.timed_out:
            return f"the facts command timed out after {result.duration_s:.1f}s and was killed"
        if result.truncated:
            return "the facts output passed its size limit and was cut"
        if result.failure:
            return f"no end line ({result.failure})"
        return "no end line (output cut short)"


class FactsCampaign:
    """Every node's facts in one round trip per node, gathered once and cached."""

    def __init__(
        self,
        inventory: Inventory,
        transport: Transport,
        progress: Reporter = silent,
        partition: Partition | None = None,
        spool: FactsSpool | None = None,
    ):
        self.inventory = inventory
        self.transport = transport
        self.progress = progress
        self.partition = partition
        self.spool = spool
        self._facts: dict[str, NodeFacts] = {}
        self._lock = threading.RLock()
        self._arrivals: list[Callable[[NodeFacts], None]] = []
        self._ranges: set[int] = set()
        self.gathered_here: set[str] = set()  # nodes whose facts this process fetched

    def on_arrival(self, hook: Callable[[NodeFacts], None]) -> None:
        """Call `hook` with each node's facts as they arrive (at once for facts already in).

        It runs on a transport thread: it must not wait, nor call `gather`."""
        with self._lock:
            self._arrivals.append(hook)
            arrived = list(self._facts.values())
        for facts in arrived:
            hook(facts)

    def gather(self) -> Mapping[str, NodeFacts]:
        """Gather every node's facts in parallel (once). Split between xdist workers
        (`partition`), a mapping that fetches a node's range when the node is first read."""
        if self.partition is not None:
            return _PartitionedFacts(self)
        with self._lock:
            if not self._facts:
                nodes = self.inventory.nodes
                with phase(self.progress, _facts_from(nodes)) as outcome:
                    results = self._fan_out() if self._arrivals else self._fan_out_at_once()
                    down = sum(1 for f in results.values() if f.result.unreachable)
                    outcome.text = f"{len(results) - down} answered, {down} unreachable"
                self._facts = results
                self.gathered_here.update(results)
            return self._facts

    def gather_range(self, index: int) -> None:
        """Make the facts of one range of the partition known here (once): gathered by this
        process if it claims the range first, else read from the worker that did."""
        assert self.partition is not None
        with self._lock:
            if index in self._ranges:
                return
            names = self.partition.ranges[index]
            nodes = [self.inventory.node(n) for n in names]
            if self.spool is None:
                found, here = self._fan_out_nodes(nodes), True
            else:
                found, here = self.spool.claim_or_wait(
                    f"facts-{index}", lambda: self._fan_out_nodes(nodes), self._share_wait_s()
                )
            if not isinstance(found, dict):
                why = f"facts of nodes {names[0]}..{names[-1]} not shared by another worker"
                found = {n: NodeFacts(n, _not_gathered(n, why), {}) for n in names}
            for name, facts in found.items():
                self._facts[name] = facts
                if facts.result.unreachable and not here:
                    self.transport.note_unreachable(name, facts.result.unreachable)
            if here:
                self.gathered_here.update(found)
            self._ranges.add(index)

    def _fan_out_nodes(self, nodes: list[Node]) -> dict[str, NodeFacts]:
        expect = self.inventory.expect
        with phase(self.progress, _facts_from(nodes)) as outcome:
            results = self.transport.run_on_all(
                lambda node: facts_command(node, expect), nodes=[n.name for n in nodes]
            )
            down = sum(1 for r in results.values() if r.unreachable)
            outcome.text = f"{len(results) - down} answered, {down} unreachable"
        return {n: NodeFacts(n, r, split_sections(r.stdout)) for n, r in results.items()}

    def _share_wait_s(self) -> float:
        """How long a worker waits for another's range: that range's whole fan-out."""
        assert self.partition is not None
        size = max(len(r) for r in self.partition.ranges)
        waves = size // max(1, self.transport.concurrency) + 1
        return (self.inventory.ssh.command_timeout_s + FACTS_GRACE_S) * (waves + 1)

    def known(self, name: str) -> NodeFacts | None:
        """The node's facts if this process has them already (gathers nothing)."""
        return self._facts.get(name)

    def _fan_out_at_once(self) -> dict[str, NodeFacts]:
        expect = self.inventory.expect
        results = self.transport.run_on_all(lambda node: facts_command(node, expect))
        return {n: NodeFacts(n, r, split_sections(r.stdout)) for n, r in results.items()}

    def _fan_out(self) -> dict[str, NodeFacts]:
        """Every node's facts, handing each to the arrival hooks as it comes; the next node's
        command is queued only when one finishes, so work the hooks queue (pair probes)
        runs between the facts of later nodes, not after all of them."""
        expect = self.inventory.expect
        waiting = list(reversed(self.inventory.nodes))
        results: dict[str, NodeFacts] = {}
        finished = threading.Condition()

        def submit_next() -> None:
            with finished:
                node = waiting.pop() if waiting else None
            if node is not None:
                future = self.transport.submit(node.name, facts_command(node, expect))
                future.add_done_callback(lambda f, n=node.name: arrived(n, f))

        def arrived(name: str, future: Future) -> None:
            try:
                result = future.result()
            except BaseException as exc:  # cancelled when the session closed
                result = _not_gathered(name, f"facts not gathered: {exc!r}")
            facts = NodeFacts(name, result, split_sections(result.stdout))
            for hook in self._arrivals:
                try:
                    hook(facts)
                except Exception as exc:  # a hook's bug must not lose the node's facts
                    LOG.warning("facts arrival hook failed on %s: %r", name, exc)
            with finished:
                results[name] = facts
                finished.notify_all()
            submit_next()

        for _ in range(min(self.transport.concurrency, len(waiting))):
            submit_next()
        total = len(self.inventory.nodes)
        waves = total // max(1, self.transport.concurrency) + 1
        limit = (self.inventory.ssh.command_timeout_s + FACTS_GRACE_S) * waves
        deadline = time.monotonic() + limit  # each command is bounded by the transport too
        with finished:
            while len(results) < total and time.monotonic() < deadline:
                finished.wait(FACTS_POLL_S)
            why = f"no facts within {limit:.0f} s"
            return {
                n.name: results.get(n.name) or NodeFacts(n.name, _not_gathered(n.name, why), {})
                for n in self.inventory.nodes
            }

    def address_in(self, facts: NodeFacts) -> str | None:
        """The IPv4 address on the node's data-plane interface, from its facts."""
        out = facts.whole("addr")
        interface = self.inventory.node(facts.node).interface
        iface = parse_interfaces(out).get(interface) if out is not None else None
        addresses = iface.ipv4() if iface else ()
        return addresses[0] if addresses else None

    def data_address(self, name: str) -> str | None:
        """The node's IPv4 address on its data-plane interface."""
        return self.address_in(self.gather()[name])

    def rdma_device(self, name: str) -> str | None:
        """The node's first RDMA device matching its glob (perftest uses `eri_devices`)."""
        node = self.inventory.node(name)
        out = self.gather()[name].whole("ibv_devinfo_v")
        if out is None:
            return None
        glob = node.rdma.device_glob or self.inventory.expect.rdma.device_glob
        matching = match_devices(parse_ibv_devinfo(out), glob)
        return matching[0].name if matching else None

    # -- eRDMA in depth ----------------------------------------------------------------------

    def identities(self, name: str) -> EriIdentities | None:
        """The node's RDMA devices as sysfs describes them (None: section missing)."""
        out = self.gather()[name].whole("erdma_identity")
        return parse_erdma_identity(out) if out is not None else None

    def eri_devices(self, name: str) -> list[str]:
        """The node's ERIs in name order: bound to erdma or PCI 1ded:107f in sysfs (the
        node's glob narrows them when the inventory sets one); where sysfs shows none (no
        sysfs, or another vendor's RDMA devices), the devices `ibv_devinfo -v` shows
        matching the glob. `MissingMeasurement` when neither listing came back whole: a
        node whose ERIs are unknown is not a node without ERIs."""
        node = self.inventory.node(name)
        ids = self.identities(name)
        eris = ids.eris(node.rdma.device_glob) if ids is not None else ()
        if eris:
            return sorted(d.name for d in eris)
        out = self.gather()[name].whole("ibv_devinfo_v")
        if out is None:
            raise MissingMeasurement(
                f"{name}: neither sysfs nor `ibv_devinfo -v` listed its ERIs whole"
            )
        glob = node.rdma.device_glob or self.inventory.expect.rdma.device_glob
        return sorted(d.name for d in match_devices(parse_ibv_devinfo(out), glob))

    def listed_eris(self, name: str) -> list[str]:
        """`eri_devices` for the campaigns, which measure what is known: none where the
        listing is unknown (the node's own checks say it was not measured)."""
        try:
            return self.eri_devices(name)
        except MissingMeasurement:
            return []

    def planned_eris(self, name: str) -> tuple[PlannedEri, ...]:
        """The ERIs the node's MTU and path-MTU checks must cover: those `eri_devices`
        lists (where that listing is cut, those `rdma link` names), then up to the count the
        expectations give (`expect.erdma.eris`, else the RDMA minimum), each with its own
        netdev or why that is unknown: a check names those not measured, never drops them."""
        node = self.inventory.node(name)
        facts = self.gather()[name]
        try:
            listed, listing_unread = self.eri_devices(name), ""
        except MissingMeasurement as exc:
            listed, listing_unread = None, str(exc).removeprefix(f"{name}: ")
            listing_unread = listing_unread.replace("its ERIs", "the node's ERIs")
        wanted, source, _ = expected_eris(self.inventory.expect, node.rdma.min_devices)
        glob = node.rdma.device_glob or self.inventory.expect.rdma.device_glob
        sysfs, link = not_whole(facts, "erdma_identity"), not_whole(facts, "rdma_link")
        if sysfs and link:
            netdev_unread = f"{sysfs}; {link}"
        elif sysfs or link:
            netdev_unread = f"{sysfs or link}; {'rdma link' if sysfs else 'sysfs'} names none"
        else:
            netdev_unread = "neither sysfs nor rdma link names one"
        netdevs = self.eri_netdevs(name)
        return plan_eris(listed, listing_unread, wanted, source, netdevs, netdev_unread, glob)

    def gid_tables(self, name: str) -> GidTables | None:
        """Port 1 GID tables of the node's devices (`ibv_devinfo -v`), or None."""
        out = self.gather()[name].whole("ibv_devinfo_v")
        return parse_gid_tables(out) if out is not None else None

    def gid_index(self, name: str, device: str) -> int | None:
        """The GID index perftest and NCCL use on `device`: the inventory's
        `nodes[].rdma.gid_index` when set, else the device's IPv4 GID (None: none found)."""
        fixed = self.inventory.node(name).rdma.gid_index
        if fixed is not None:
            return fixed
        tables = self.gid_tables(name)
        return (
            tables.choose(device, self.eri_address(name, device).address).index if tables else None
        )

    def eri_netdevs(self, name: str) -> dict[str, tuple[str, str]]:
        """Each RDMA device's netdev and where it came from (sysfs, else `rdma link`)."""
        facts = self.gather()[name]
        ident, link = facts.whole("erdma_identity"), facts.whole("rdma_link")
        return eri_netdevs(
            parse_erdma_identity(ident) if ident is not None else None,
            parse_rdma_link(link) if link is not None else None,
        )

    def eri_address(self, name: str, device: str) -> EriAddress:
        """`device`'s own netdev and its IPv4 address (an ERI is an ENI: erdma_1 sits on
        eth1); the data-plane interface's only when the device's netdev is unknown. An
        `ip addr` section missing or cut leaves the address unknown, saying why (`unread`)."""
        facts = self.gather()[name]
        out = facts.whole("addr")
        interfaces = parse_interfaces(out) if out is not None else None
        interface = self.inventory.node(name).interface
        netdevs = self.eri_netdevs(name)
        return eri_address(device, netdevs, interfaces, interface, not_whole(facts, "addr"))

    def reachable_nodes(self) -> list[Node]:
        """Nodes whose facts came back."""
        facts = self.gather()
        return [n for n in self.inventory.nodes if not facts[n.name].result.unreachable]

    def placement(self) -> dict[str, MetadataFacts]:
        """Each reached node's instance metadata, if facts were gathered."""
        out = {}
        for name, facts in self._facts.items():
            section = facts.whole("metadata")
            if section is not None and not facts.result.unreachable:
                out[name] = parse_metadata(section)
        return out


def not_whole(facts: NodeFacts, section: str) -> str:
    """Why `section` of the node's facts is not there whole (missing, cut short, timed
    out), without the node's name; "" when it is."""
    try:
        facts.text(section)
    except MissingMeasurement as exc:
        return str(exc).removeprefix(f"{facts.node}: ")
    return ""


class _PartitionedFacts(Mapping[str, NodeFacts]):
    """Every node's facts under a partition: reading a node fetches its range (once)."""

    def __init__(self, campaign: FactsCampaign):
        self._campaign = campaign
        self._partition = campaign.partition
        assert self._partition is not None

    def __getitem__(self, name: str) -> NodeFacts:
        index = self._partition.range_of(name)
        if index is None:
            raise KeyError(name)
        self._campaign.gather_range(index)
        return self._campaign._facts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._partition.names)

    def __len__(self) -> int:
        return len(self._partition.names)


def _facts_from(nodes: list) -> str:
    """The facts phase's progress label: `facts from 1 node`, `facts from 64 nodes`."""
    return f"facts from {len(nodes)} node{'' if len(nodes) == 1 else 's'}"
