"""Path MTU between the same ERI index of each ring pair, over that ERI's own interface.

An ERI is an ENI: on a two-ERI instance erdma_1 sends from eth1 to the partner's eth1
address, a path the data-plane ping (eth0 to eth0) never crosses. For every planned ERI
(`FactsCampaign.planned_eris`: the listing, and the count the expectations give) whose own
netdev, or its partner's, is not the node's data-plane interface, the source pings the
partner's address on the same ERI index at the full MTU with DF set, bound to its own
netdev (`ping -I eth1`). A planned ERI index that cannot be probed (either side's netdev
unknown, the partner lacking the ERI or its address) is named (`EriPath.unmeasured`), never
left out: the check is then not measured. One fan-out for the cluster, and none at all
where every ERI sits on the data-plane interface (one ERI, or the lab's default).
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
    unmeasured: str = ""
    """Why this ERI index of the pair cannot be probed (`n2 lacks erdma_1's partner ...`):
    the check names it not measured. Empty for a path that is probed."""


@dataclass(frozen=True)
class EriPathMtu:
    """What the source's ping over `path.netdev` to the partner's same-index ERI saw (an
    empty result where `path.unmeasured` says why nothing was sent)."""

    path: EriPath
    result: PingResult
    command: CommandResult | None = None


def eri_paths(facts: FactsCampaign, source: str, target: str) -> list[EriPath]:
    """Each planned ERI index of a pair whose path the data-plane ping does not cover
    (either side's netdev is not its node's data-plane interface), and each that cannot be
    probed, named in `unmeasured` (a netdev unknown, the partner lacking the ERI, the
    partner's address unknown)."""
    mine, theirs = facts.planned_eris(source), facts.planned_eris(target)
    data = facts.inventory.node(source).interface
    partner_data = facts.inventory.node(target).interface
    out = []
    for eri in mine:
        partner = theirs[eri.index] if eri.index < len(theirs) else None
        why = ""
        if eri.unknown:
            why = f"{source} {eri.device}: {eri.unknown}"
        elif partner is None:
            count = f"{len(theirs)} ERI{'' if len(theirs) == 1 else 's'}"
            why = f"{target} lacks {eri.device}'s partner (it has {count})"
        elif partner.unknown:
            why = f"{target} {partner.device}: {partner.unknown}"
        elif eri.netdev == data and partner.netdev == partner_data:
            continue  # the data-plane ping's own path
        if why:
            out.append(EriPath(eri.device, eri.netdev or "", "", why))
            continue
        assert partner is not None
        own = facts.eri_address(target, partner.device)
        if not own.address:
            out.append(EriPath(eri.device, eri.netdev or "", "", f"{target} {own.note}"))
            continue
        out.append(EriPath(eri.device, eri.netdev or "", own.address))
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
        mtu = self.facts.inventory.expect.mtu
        by_source: dict[str, dict[str, str]] = {}
        for (a, b), paths in plans.items():
            for p in paths:
                if p.unmeasured:
                    continue
                command = path_mtu_ping_command(p.target_address, mtu, interface=p.netdev)
                by_source.setdefault(a, {})[f"{b}/{p.device}"] = command
        ran: dict[str, CommandResult] = {}
        if by_source:
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
                EriPathMtu(p, PingResult())
                if p.unmeasured
                else EriPathMtu(p, _ping(sections, f"{b}/{p.device}", result, mtu), result)
                for p in paths
            ]
        return out


def _ping(
    sections: dict, name: str, result: CommandResult | None, mtu: int | None = None
) -> PingResult:
    """The ping's output in its section; a section missing, cut short or timed out is an
    `incomplete` result (not measured), never read as a ping that got no reply."""
    found = sections.get(name)
    if found is not None and found.complete:
        return parse_ping(found.text, PATH_MTU_COUNT, expected_packet=mtu)
    if found is None:
        why = (result.failure if result is not None else None) or "output cut short"
        return PingResult(incomplete=f"no output for this ping ({why})")
    if found.status is None:
        return PingResult(incomplete="the ping's output was cut short (no end line)")
    return PingResult(incomplete=f"the ping timed out (exit status {found.status})")
