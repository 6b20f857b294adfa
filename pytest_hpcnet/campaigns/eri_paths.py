"""Path MTU between the same ERI index of each ring pair, over that ERI's own interface.

An ERI is an ENI: on a two-ERI instance erdma_1 sends from eth1 to the partner's eth1
address, a path the data-plane ping (eth0 to eth0) never crosses. For every ERI whose own
netdev is not the node's data-plane interface, the source pings the partner's address on
the same ERI index at the full MTU with DF set, bound to its own netdev (`ping -I eth1`).
One fan-out for the cluster, and none at all where every ERI sits on the data-plane
interface (one ERI, or the lab's default).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from pytest_hpcnet.campaigns.facts import FactsCampaign
from pytest_hpcnet.campaigns.progress import phase
from pytest_hpcnet.probes.ping import PATH_MTU_COUNT, PingResult, parse_ping, path_mtu_ping_command
from pytest_hpcnet.probes.sections import sections_script, split_sections
from pytest_hpcnet.transport.fanout import CommandResult


@dataclass(frozen=True)
class EriPath:
    """One ERI index of a pair: source device and netdev, the partner's address on it."""

    device: str
    """The source's device (`erdma_1`)."""
    netdev: str
    target_address: str


@dataclass(frozen=True)
class EriPathMtu:
    """What the source's ping over `path.netdev` to the partner's same-index ERI saw."""

    path: EriPath
    result: PingResult
    command: CommandResult | None = None


def eri_paths(facts: FactsCampaign, source: str, target: str) -> list[EriPath]:
    """The ERI indexes of a pair whose source netdev is not the data-plane interface (both
    sides' devices and addresses known; an index one side lacks is the device checks')."""
    mine, theirs = facts.listed_eris(source), facts.listed_eris(target)
    data = facts.inventory.node(source).interface
    out = []
    for i, device in enumerate(mine[: len(theirs)]):
        own = facts.eri_address(source, device)
        partner = facts.eri_address(target, theirs[i])
        if own.fallback or own.netdev == data or not partner.address:
            continue
        out.append(EriPath(device, own.netdev or "", partner.address))
    return out


class EriPathCampaign:
    """Every ring pair's per-ERI path MTU probes, run once (one fan-out)."""

    def __init__(self, facts: FactsCampaign, ring: Callable[[], list[tuple[str, str]]]):
        self.facts = facts
        self.ring = ring  # the pair campaign's ring, read when the probes run
        self._found: dict[int | None, dict[tuple[str, str], list[EriPathMtu]]] = {}
        self._lock = threading.Lock()

    def pair(self, source: str, target: str) -> list[EriPathMtu]:
        """The per-ERI probes of one pair (empty where every ERI is on the data interface);
        under an xdist partition, the pairs of the source's range only (once each)."""
        partition = self.facts.partition
        owner = partition.pair_owner(source) if partition is not None else None
        with self._lock:
            if owner not in self._found:
                ring = self.ring()
                if partition is not None:
                    ring = [(a, b) for a, b in ring if partition.pair_owner(a) == owner]
                self._found[owner] = self._gather(ring)
            return self._found[owner].get((source, target), [])

    def _gather(self, ring: list[tuple[str, str]]) -> dict[tuple[str, str], list[EriPathMtu]]:
        facts = self.facts.gather()
        reachable = {n for pair in ring for n in pair if not facts[n].result.unreachable}
        plans = {
            (a, b): paths
            for a, b in ring
            if a in reachable and b in reachable and (paths := eri_paths(self.facts, a, b))
        }
        if not plans:
            return {}
        mtu = self.facts.inventory.expect.mtu
        by_source: dict[str, dict[str, str]] = {}
        for (a, b), paths in plans.items():
            for p in paths:
                command = path_mtu_ping_command(p.target_address, mtu, interface=p.netdev)
                by_source.setdefault(a, {})[f"{b}/{p.device}"] = command
        with phase(self.facts.progress, f"per-ERI path MTU on {len(plans)} pairs"):
            ran = self.facts.transport.run_on_all(
                lambda node: sections_script(by_source[node.name], parallel=True),
                nodes=sorted(by_source),
            )
        out: dict[tuple[str, str], list[EriPathMtu]] = {}
        for (a, b), paths in plans.items():
            result = ran.get(a)
            sections = split_sections(result.stdout) if result is not None else {}
            out[(a, b)] = [
                EriPathMtu(
                    p,
                    parse_ping(
                        _text(sections, f"{b}/{p.device}"), PATH_MTU_COUNT, expected_packet=mtu
                    ),
                    result,
                )
                for p in paths
            ]
        return out


def _text(sections: dict, name: str) -> str:
    found = sections.get(name)
    return found.text if found is not None and found.complete else ""
