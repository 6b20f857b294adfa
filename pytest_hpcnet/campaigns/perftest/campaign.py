"""perftest campaigns between scheduled pairs: plan the rounds, measure, judge, localize.

Every ERI is measured: within a round, device i of the client against device
i of the server, one device index after the other, each with its own IPv4 GID index from
`ibv_devinfo -v` and the client connecting to the server's address on device i's own
netdev (an ERI is an ENI: erdma_1's is eth1's). A node lacking device i fails that
device's run. For ib_write_bw on nodes with several ERIs, one more round runs every
device of each first-round pair at once (`run_slots`), judged against the per-instance
figure. The commands and the round
runner are `campaigns.perftest_rounds`; the per-device pieces `campaigns.perftest_devices`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_hpcnet.campaigns.counters import CounterWatch
from pytest_hpcnet.campaigns.facts import FactsCampaign
from pytest_hpcnet.campaigns.gpudirect import gpu_pairs, gpudirect_runs
from pytest_hpcnet.campaigns.localization import Localization, confirm_pairs, localize
from pytest_hpcnet.campaigns.perftest.devices import (
    device_label,
    instance_rounds,
    left_out,
    localize_devices,
    missing_device,
    worst,
)
from pytest_hpcnet.campaigns.perftest.rounds import PairRun, options_for, run_round, run_slots
from pytest_hpcnet.campaigns.progress import phase
from pytest_hpcnet.campaigns.schedule import Pair, pick_schedule_for_budget, schedule_rounds
from pytest_hpcnet.inventory.bench_settings import PerftestSettings
from pytest_hpcnet.probes.gpu_topo import parse_topo
from pytest_hpcnet.probes.perftest import PerftestOptions
from pytest_hpcnet.requirements.judges import judge_perftest


@dataclass
class PerftestCampaign:
    """All runs of one tool, the localization that follows and the confirmation runs."""

    tool: str
    runs: dict[Pair, PairRun] = field(default_factory=dict)
    confirm_runs: dict[Pair, PairRun] = field(default_factory=dict)
    localization: Localization | None = None
    schedule: str = ""
    passed: dict[Pair, bool] = field(default_factory=dict)
    """Each measured pair as the requirement's judge saw it (what localization is fed)."""
    device_runs: dict[Pair, dict[str, PairRun]] = field(default_factory=dict)
    """Every device's run of each pair (first-device name of the client, `erdma_1`)."""
    instance_runs: dict[Pair, dict[str, PairRun]] = field(default_factory=dict)
    """ib_write_bw with every device of the pair at once (nodes with several ERIs)."""
    confirm_device_runs: dict[Pair, dict[str, PairRun]] = field(default_factory=dict)
    devices: dict[str, list[str]] = field(default_factory=dict)
    """Each measured node's ERIs in index order."""
    suspect_devices: list[str] = field(default_factory=list)
    """`node07 erdma_1`: a node's device that fails with every partner on that index."""
    gdr_runs: dict[Pair, dict[str, PairRun]] = field(default_factory=dict)
    """ib_write_bw with `--use_cuda=<nearest GPU>` per device (`benchmarks.perftest.gdr`)."""
    gdr_gpus: dict[str, dict[str, int | None]] = field(default_factory=dict)
    """Each node's ERIs and the GPU nearest each (`nvidia-smi topo -m`), when GDR ran."""
    left_out: dict[str, str] = field(default_factory=dict)
    """Why a node is in no all-at-once (and GPUDirect) pair that ran: `its partner node05
    stopped answering: <reason>` (`perftest_devices.left_out`)."""

    def not_in_round(self, node: str, round_name: str = "all-ERIs-at-once") -> str:
        """The not-measured line of a node in no `round_name` pair, naming the partner
        that stopped answering where one did."""
        why = self.left_out.get(node, "no partner reached")
        return f"{node}: not in the {round_name} round ({why})"


def judged(runs: dict[Pair, PairRun], passes: Callable[[PairRun], bool]) -> dict[Pair, bool]:
    """Each pair's run through the requirement's judge: what `localization.localize` is fed.
    A run that is not measured (`PairRun.not_measured`) is no evidence either way: left out,
    so no node is blamed for an output that could not be read."""
    return {pair: passes(run) for pair, run in runs.items() if not run.not_measured}


def planned_rounds(nodes: list[str], settings: PerftestSettings) -> tuple[list[list[Pair]], str]:
    """The schedule of pair rounds for these settings, and a line saying which was chosen."""
    if settings.time_budget_s is not None:
        per_round = (settings.duration_s or 5) * 2 + 5  # bandwidth and latency, plus set-up
        choice = pick_schedule_for_budget(nodes, per_round, settings.time_budget_s)
        return choice.rounds, f"{choice.kind}: {choice.reason}"
    kind, rounds = settings.schedule, settings.rounds
    if kind.startswith("random:"):
        kind, rounds = "random", int(kind[7:])
    chosen = schedule_rounds(nodes, kind if kind != "random" else f"random:{rounds}", rounds)
    return chosen, f"{settings.schedule}: {len(chosen)} rounds"


@dataclass
class EriRounds:
    """How a round of pairs is measured on every ERI index, one index after the other: each
    node's ERIs, data-plane addresses, the options of each side and the address a client
    connects to (the benchmark campaign's and the burn-in's network rounds')."""

    facts: FactsCampaign
    tool: str
    settings: PerftestSettings
    addresses: dict[str, str]
    devices: dict[str, list[str]]
    width: int

    @classmethod
    def of(
        cls, facts: FactsCampaign, tool: str, settings: PerftestSettings, names: list[str]
    ) -> EriRounds:
        """The ERIs and addresses of `names` (those with a data-plane address)."""
        addresses = {n: a for n in names if (a := facts.data_address(n))}
        devices = {n: facts.listed_eris(n) for n in addresses}
        wanted = facts.inventory.expect.erdma.eris or 1
        width = max([len(d) for d in devices.values()] + [wanted])
        return cls(facts, tool, settings, addresses, devices, width)

    def side(self, name: str, port: int, i: int) -> PerftestOptions:
        """The perftest options of `name` on its device index `i`."""
        found = self.devices.get(name, [])
        device = found[i] if i < len(found) else None
        gid = self.facts.gid_index(name, device) if device else None
        return options_for(self.settings, self.tool, port, device, gid)

    def target(self, name: str, i: int) -> str:
        """The server's address for device index i: that device's own netdev's (an ERI is
        an ENI: erdma_1 listens on eth1), else the data-plane address."""
        found = self.devices.get(name, [])
        own = self.facts.eri_address(name, found[i]).address if i < len(found) else None
        return own or self.addresses[name]

    def targets(self, i: int) -> dict[str, str]:
        return {n: self.target(n, i) for n in self.addresses}

    def measure(
        self,
        pairs: list[Pair],
        index: int,
        label: str,
        passes: Callable[[PairRun], bool],
        progress: Callable[[str], None],
    ) -> dict[Pair, dict[str, PairRun]]:
        """Every pair of a round on each device index in turn (a pair lacking index i fails
        that index's run), each run with its client's device."""
        tool, settings, devices = self.tool, self.settings, self.devices
        runnable = [p for p in pairs if p.a in self.addresses and p.b in self.addresses]
        out: dict[Pair, dict[str, PairRun]] = {p: {} for p in runnable}
        for i in range(self.width):
            have = [p for p in runnable if all(i < len(devices[n]) for n in (p.a, p.b))]
            for p in runnable:
                if p not in have:
                    out[p][device_label(devices, p, i)] = missing_device(p, index, i, devices)
            suffix = f" ERI {i}" if self.width > 1 else ""
            with phase(progress, f"{tool} {label}{suffix}: {len(have)} pairs") as outcome:
                shifted = settings.model_copy(
                    update={"port_base": settings.port_base + i * len(runnable)}
                )
                runs = run_round(
                    self.facts.transport,
                    have,
                    index,
                    tool,
                    shifted,
                    self.targets(i),
                    lambda name, port, i=i: self.side(name, port, i),
                )
                good = sum(1 for run in runs.values() if passes(run))
                outcome.text = f"{good}/{len(runs)} pairs within bounds"
            for p, run in runs.items():
                out[p][device_label(devices, p, i)] = dataclasses.replace(
                    run, device=devices[p.a][i]
                )
        return out


class PerftestCampaigns:
    """One campaign per perftest tool: every scheduled pair measured, judged by the tool's
    requirement judge, localized, suspects confirmed (each tool once)."""

    def __init__(self, facts: FactsCampaign):
        self.facts = facts
        self.inventory = facts.inventory
        self._campaigns: dict[str, PerftestCampaign] = {}
        self._lock = threading.Lock()
        self.counters = CounterWatch(facts, "perftest")
        """Device and NIC counters before the first and after the last perftest run."""

    def passes(self, tool: str) -> Callable[[PairRun], bool]:
        """The pass criterion of one tool: its requirement's judge."""
        expect = self.inventory.expect
        return lambda run: judge_perftest(tool, run, expect).passed

    def campaign(self, tool: str) -> PerftestCampaign:
        """Every scheduled pair measured with `tool` and localized (once per tool)."""
        with self._lock:
            if tool not in self._campaigns:
                self.counters.before()
                try:
                    self._campaigns[tool] = self._run(tool)
                finally:
                    self.counters.after()
            return self._campaigns[tool]

    def _run(self, tool: str) -> PerftestCampaign:
        settings = self.inventory.benchmarks.perftest
        transport, progress = self.facts.transport, self.facts.progress
        names = [n.name for n in self.inventory.nodes]
        reachable = [n for n in names if n not in transport.unreachable()]
        eris = EriRounds.of(self.facts, tool, settings, reachable)
        addresses, devices, side, target = eris.addresses, eris.devices, eris.side, eris.target
        targets = eris.targets
        passes = self.passes(tool)

        def measure(pairs: list[Pair], index: int, label: str) -> dict[Pair, dict[str, PairRun]]:
            return eris.measure(pairs, index, label, passes, progress)

        campaign = PerftestCampaign(tool, devices=devices)
        rounds, campaign.schedule = planned_rounds(names, settings)
        for index, pairs in enumerate(rounds, 1):
            campaign.device_runs.update(measure(pairs, index, f"round {index}/{len(rounds)}"))
        self._settle(campaign, names, passes)
        doubtful = [*campaign.localization.suspects, *campaign.localization.unknown]
        if settings.confirm_suspects and doubtful:
            good = [n for n in campaign.localization.good if n in addresses]
            checks = confirm_pairs(doubtful, good)
            for index, pairs in enumerate(checks, len(rounds) + 1):
                label = f"confirmation {index - len(rounds)}/{len(checks)}"
                campaign.confirm_device_runs.update(measure(pairs, index, label))
            self._settle(campaign, names, passes)
        if campaign.localization.suspects:
            progress(f"{tool}: suspect nodes {', '.join(campaign.localization.suspects)}")
        if campaign.suspect_devices:
            progress(f"{tool}: suspect devices {', '.join(campaign.suspect_devices)}")
        campaign.left_out = left_out(instance_rounds(rounds), addresses, transport.unreachable())
        if tool.endswith("_bw") and eris.width > 1 and rounds:
            campaign.instance_runs = self._all_at_once(
                rounds, len(rounds) + 1, tool, settings, addresses, devices, side, target
            )
        if tool == "ib_write_bw" and settings.gdr and self.inventory.expect.erdma.gdr and rounds:
            self._gpudirect(campaign, rounds, settings, targets, side)
        return campaign

    def _gpudirect(
        self,
        campaign: PerftestCampaign,
        rounds: list[list[Pair]],
        settings: PerftestSettings,
        targets: Callable[[int], dict[str, str]],
        side: Callable[[str, int, int], PerftestOptions],
    ) -> None:
        """ib_write_bw from GPU memory on the all-at-once rounds' pairs (every node once)."""
        facts = self.facts.gather()
        topologies = {
            n: parse_topo(section)
            for n in campaign.devices
            if (section := facts[n].whole("gpu_topo")) is not None
        }
        campaign.gdr_gpus = gpu_pairs(topologies, campaign.devices)
        index = len(rounds) + len(instance_rounds(rounds)) + 1
        for offset, pairs in enumerate(instance_rounds(rounds)):
            campaign.gdr_runs.update(
                gpudirect_runs(
                    self.facts.transport,
                    self.facts.progress,
                    pairs,
                    index + offset,
                    settings,
                    targets,
                    campaign.devices,
                    campaign.gdr_gpus,
                    side,
                )
            )

    @staticmethod
    def _settle(
        campaign: PerftestCampaign, names: list[str], passes: Callable[[PairRun], bool]
    ) -> None:
        """Pair verdicts (every device must pass), node and device localization."""
        campaign.runs = {p: worst(r, passes) for p, r in campaign.device_runs.items()}
        extra = campaign.confirm_device_runs
        campaign.confirm_runs = {p: worst(r, passes) for p, r in extra.items()}
        campaign.passed = judged({**campaign.runs, **campaign.confirm_runs}, passes)
        campaign.localization = localize(campaign.passed, nodes=names)
        every = [*campaign.device_runs.items(), *extra.items()]
        campaign.suspect_devices = localize_devices(every, names, campaign.devices, passes)

    def _all_at_once(
        self,
        rounds: list[list[Pair]],
        index: int,
        tool: str,
        settings: PerftestSettings,
        addresses: dict[str, str],
        devices: dict[str, list[str]],
        side: Callable[[str, int, int], PerftestOptions],
        target: Callable[[str, int], str],
    ) -> dict[Pair, dict[str, PairRun]]:
        """Every device of each pair at once (one server and client per device), on the
        pairs `instance_rounds` picks so that every node is in one; a device index only one
        side has is a failed run of its own."""
        out: dict[Pair, dict[str, PairRun]] = {}
        for offset, pairs in enumerate(instance_rounds(rounds)):
            runnable = [p for p in pairs if p.a in addresses and p.b in addresses]
            both = {p: min(len(devices[p.a]), len(devices[p.b])) for p in runnable}
            slots = [(p, i) for p in runnable for i in range(both[p])]
            label = f"{tool} all ERIs at once: {len(runnable)} pairs"
            with phase(self.facts.progress, label):
                runs = run_slots(
                    self.facts.transport, slots, index + offset, tool, settings, target, side
                )
            for p in runnable:
                out[p] = {}
                for i in range(max(len(devices[p.a]), len(devices[p.b]))):
                    name = device_label(devices, p, i)
                    run = runs.get((p, i))
                    out[p][name] = run or missing_device(p, index + offset, i, devices)
        return out
