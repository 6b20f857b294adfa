"""perftest between scheduled pairs: rounds of disjoint pairs, every pair of a round at once.

Per round, three fan-outs: start each pair's server in the background on its own port
and wait until it listens; run every client; stop every server (also on timeout or
interrupt) and collect its output. No perftest is left running on any node.

Every ERI is measured (issue 16): within a round, device i of the client against device
i of the server, one device index after the other, each with its own IPv4 GID index from
`ibv_devinfo -v`. A node lacking device i fails that device's run. For ib_write_bw on
nodes with several ERIs, one more round runs every device of each first-round pair at
once (`run_slots`), judged against the per-instance figure.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_hpcnet.campaigns.counters import CounterWatch
from pytest_hpcnet.campaigns.facts import (
    FactsCampaign,
    SectionOutput,
    sections_script,
    split_sections,
)
from pytest_hpcnet.campaigns.gpudirect import gpu_pairs, gpudirect_runs
from pytest_hpcnet.campaigns.localization import Localization, confirm_pairs, localize
from pytest_hpcnet.campaigns.progress import phase
from pytest_hpcnet.campaigns.schedule import Pair, pick_schedule_for_budget, schedule_rounds
from pytest_hpcnet.inventory.bench_settings import PerftestSettings
from pytest_hpcnet.probes.gpu_topo import parse_topo
from pytest_hpcnet.probes.perftest import (
    BandwidthResult,
    LatencyResult,
    PerftestOptions,
    client_command,
    largest_size,
    parse_bandwidth,
    parse_latency,
    server_command,
)
from pytest_hpcnet.requirements.judges import judge_perftest
from pytest_hpcnet.transport.fanout import CommandResult, Transport

LISTEN_WAIT_TENTHS = 100


@dataclass(frozen=True)
class PairRun:
    """One perftest run: client on `pair.a`, server on `pair.b`."""

    pair: Pair
    round: int
    bandwidth: BandwidthResult | None = None
    latency: LatencyResult | None = None
    server_output: str = ""
    error: str | None = None
    commands: tuple[CommandResult, ...] = ()
    device: str | None = None
    """The client's RDMA device (`erdma_1`); None when the run used the default one."""

    @property
    def value(self) -> float | None:
        """Bandwidth in Gbit/s or latency t_avg in usec; None when nothing was measured."""
        if self.error:
            return None
        if self.bandwidth is not None:
            return self.bandwidth.avg_gbps if self.bandwidth.ok else None
        if self.latency is not None:
            return self.latency.t_avg_us if self.latency.ok else None
        return None


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


def options_for(
    settings: PerftestSettings, tool: str, port: int, device: str | None, gid: int | None
) -> PerftestOptions:
    """The perftest options of one side of one pair."""
    latency = tool.endswith("_lat")
    return PerftestOptions(
        binary=tool,
        device=device,
        gid_index=gid,
        port=port,
        size=None if settings.all_sizes else (2 if latency else settings.size),
        all_sizes=settings.all_sizes,
        qps=None if latency else settings.qps,
        duration_s=None if latency or settings.all_sizes else settings.duration_s,
        iterations=settings.latency_iterations if latency and not settings.all_sizes else None,
        rdma_cm=settings.rdma_cm,
        extra_args=tuple(settings.extra_args),
        server_timeout_s=settings.timeout_s,
    )


def _paths(port: int) -> tuple[str, str]:
    """Where the server on `port` keeps its output and PID (known without asking the node)."""
    return f"/tmp/hpcnet-perftest-{int(port)}.out", f"/tmp/hpcnet-perftest-{int(port)}.pid"


def start_server_command(server: str, port: int, wait_for_listen: bool) -> str:
    """Start the server in the background; wait (bounded) until its TCP port listens."""
    out, pid = _paths(port)
    wait = (
        f"i=0; while [ $i -lt {LISTEN_WAIT_TENTHS} ] && "
        f"! ss -Hltn 'sport = :{int(port)}' 2>/dev/null | grep -q .; "
        "do sleep 0.1; i=$((i+1)); done"
        if wait_for_listen
        else "sleep 1"
    )
    return f"( exec {server} ) >{out} 2>&1 </dev/null & echo $! >{pid}; {wait}"


def stop_server_command(port: int) -> str:
    """Stop the server on `port` (it normally ended with its client) and print its output."""
    out, pid = _paths(port)
    return (
        # an interrupted round may stop a server whose start is still under way: wait for it
        f"i=0; while [ ! -s {pid} ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; "
        f'p=$(cat {pid} 2>/dev/null); if [ -n "$p" ]; then i=0; '
        'while [ $i -lt 20 ] && kill -0 "$p" 2>/dev/null; do sleep 0.1; i=$((i+1)); done; '
        'kill "$p" 2>/dev/null; fi; '
        f"cat {out} 2>/dev/null; rm -f {out} {pid}"
    )


def run_round(
    transport: Transport,
    pairs: list[Pair],
    index: int,
    tool: str,
    settings: PerftestSettings,
    addresses: dict[str, str],
    side_options: Callable[[str, int], PerftestOptions],
) -> dict[Pair, PairRun]:
    """One round: every pair's server, then every client, then stop every server (always,
    also when a client times out or the run is interrupted)."""
    port = {p: settings.port_base + i for i, p in enumerate(pairs)}
    server_of = {p.b: p for p in pairs}
    client_of = {p.a: p for p in pairs}
    timeout = settings.timeout_s + 30
    try:
        started = transport.run_on_all(
            lambda node: start_server_command(
                server_command(side_options(node.name, port[server_of[node.name]])),
                port[server_of[node.name]],
                not settings.rdma_cm,
            ),
            nodes=list(server_of),
            together=True,
        )
        clients = {p.a for p in pairs if started[p.b].ok}
        ran = transport.run_on_all(
            lambda node: client_command(
                side_options(node.name, port[client_of[node.name]]),
                addresses[client_of[node.name].b],
            ),
            nodes=sorted(clients),
            timeout_s=timeout,
            together=True,  # a round's pairs share the fabric at the same time
        )
    finally:
        stopped = transport.run_on_all(
            lambda node: stop_server_command(port[server_of[node.name]]), nodes=list(server_of)
        )
    out: dict[Pair, PairRun] = {}
    for pair in pairs:
        commands = tuple(
            r for r in (started.get(pair.b), ran.get(pair.a), stopped.get(pair.b)) if r
        )
        asked = largest_size(side_options(pair.a, port[pair]))
        out[pair] = _pair_run(
            pair,
            index,
            tool,
            started.get(pair.b),
            ran.get(pair.a),
            stopped.get(pair.b),
            commands,
            asked,
        )
    return out


Slot = tuple[Pair, int]
"""A pair and a device index: the client's device i against the server's device i."""


def _section(result: CommandResult | None, key: str) -> CommandResult | None:
    """One section of a multi-slot node command as a CommandResult of its own."""
    if result is None or result.unreachable or result.timed_out:
        return result
    out = split_sections(result.stdout).get(key, SectionOutput("", None))
    status = out.status if out.status is not None else (result.exit_status or 1)
    return dataclasses.replace(result, stdout=out.text, stderr="", exit_status=status)


def run_slots(
    transport: Transport,
    slots: list[Slot],
    index: int,
    tool: str,
    settings: PerftestSettings,
    addresses: dict[str, str],
    side_options: Callable[[str, int, int], PerftestOptions],
) -> dict[Slot, PairRun]:
    """Several perftest runs per node at once (every device of a pair): each slot's server
    on its own port, all clients of a node started together, every server stopped."""
    port = {s: settings.port_base + k for k, s in enumerate(slots)}
    key = {s: f"p{port[s]}" for s in slots}
    servers: dict[str, list[Slot]] = {}
    clients: dict[str, list[Slot]] = {}
    for s in slots:
        servers.setdefault(s[0].b, []).append(s)
        clients.setdefault(s[0].a, []).append(s)
    timeout = settings.timeout_s + 30
    started: dict[str, CommandResult] = {}
    ran: dict[str, CommandResult] = {}
    try:
        started = transport.run_on_all(
            lambda node: sections_script(
                {
                    key[s]: start_server_command(
                        server_command(side_options(node.name, port[s], s[1])),
                        port[s],
                        not settings.rdma_cm,
                    )
                    for s in servers[node.name]
                }
            ),
            nodes=list(servers),
            together=True,
        )
        up = {s for s in slots if (r := _section(started.get(s[0].b), key[s])) and r.ok}
        ran = transport.run_on_all(
            lambda node: sections_script(
                {
                    key[s]: client_command(
                        side_options(node.name, port[s], s[1]), addresses[s[0].b]
                    )
                    for s in clients[node.name]
                    if s in up
                },
                parallel=True,
            ),
            nodes=sorted({s[0].a for s in up}),
            timeout_s=timeout,
            together=True,
        )
    finally:
        stopped = transport.run_on_all(
            lambda node: sections_script(
                {key[s]: stop_server_command(port[s]) for s in servers[node.name]}
            ),
            nodes=list(servers),
        )
    out: dict[Slot, PairRun] = {}
    for s in slots:
        pair, k = s[0], key[s]
        parts = (_section(started.get(pair.b), k), _section(ran.get(pair.a), k))
        stop = _section(stopped.get(pair.b), k)
        commands = tuple(
            r for r in (started.get(pair.b), ran.get(pair.a), stopped.get(pair.b)) if r
        )
        options = side_options(pair.a, port[s], s[1])
        run = _pair_run(pair, index, tool, *parts, stop, commands, largest_size(options))
        out[s] = dataclasses.replace(run, device=options.device)
    return out


def _pair_run(
    pair: Pair,
    index: int,
    tool: str,
    started: CommandResult | None,
    client: CommandResult | None,
    stopped: CommandResult | None,
    commands: tuple[CommandResult, ...],
    asked: int | None = None,
) -> PairRun:
    server_output = stopped.stdout if stopped is not None else ""
    if started is None or not started.ok:
        why = started.failure if started is not None else "not started"
        return PairRun(
            pair,
            index,
            error=f"server on {pair.b} did not start: {why}",
            server_output=server_output,
            commands=commands,
        )
    if client is None:
        return PairRun(
            pair,
            index,
            error=f"client on {pair.a} did not run",
            server_output=server_output,
            commands=commands,
        )
    if client.unreachable or client.timed_out:
        return PairRun(
            pair, index, error=client.failure, server_output=server_output, commands=commands
        )
    text = client.stdout + ("\n" + client.stderr if client.stderr else "")
    if tool.endswith("_lat"):
        lat = parse_latency(text, expected_size=asked)
        error = lat.error or (None if lat.ok else f"unparseable output: {'; '.join(lat.problems)}")
        return PairRun(
            pair, index, latency=lat, error=error, server_output=server_output, commands=commands
        )
    bw = parse_bandwidth(text, expected_size=asked)
    error = bw.error or (None if bw.ok else f"unparseable output: {'; '.join(bw.problems)}")
    return PairRun(
        pair, index, bandwidth=bw, error=error, server_output=server_output, commands=commands
    )


def judged(runs: dict[Pair, PairRun], passes: Callable[[PairRun], bool]) -> dict[Pair, bool]:
    """Each pair's run through the requirement's judge: what `localization.localize` is fed."""
    return {pair: passes(run) for pair, run in runs.items()}


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
        addresses = {n: a for n in reachable if (a := self.facts.data_address(n))}
        devices = {n: self.facts.eri_devices(n) for n in addresses}
        width = max([len(d) for d in devices.values()] + [self.inventory.expect.erdma.eris or 1])

        def side(name: str, port: int, i: int) -> PerftestOptions:
            found = devices.get(name, [])
            device = found[i] if i < len(found) else None
            gid = self.facts.gid_index(name, device) if device else None
            return options_for(settings, tool, port, device, gid)

        passes = self.passes(tool)

        def measure(pairs: list[Pair], index: int, label: str) -> dict[Pair, dict[str, PairRun]]:
            runnable = [p for p in pairs if p.a in addresses and p.b in addresses]
            out: dict[Pair, dict[str, PairRun]] = {p: {} for p in runnable}
            for i in range(width):
                have = [p for p in runnable if all(i < len(devices[n]) for n in (p.a, p.b))]
                for p in runnable:
                    if p not in have:
                        out[p][device_label(devices, p, i)] = missing_device(p, index, i, devices)
                suffix = f" ERI {i}" if width > 1 else ""
                with phase(progress, f"{tool} {label}{suffix}: {len(have)} pairs") as outcome:
                    shifted = settings.model_copy(
                        update={"port_base": settings.port_base + i * len(runnable)}
                    )
                    runs = run_round(
                        transport,
                        have,
                        index,
                        tool,
                        shifted,
                        addresses,
                        lambda name, port, i=i: side(name, port, i),
                    )
                    good = sum(1 for run in runs.values() if passes(run))
                    outcome.text = f"{good}/{len(runs)} pairs within bounds"
                for p, run in runs.items():
                    out[p][device_label(devices, p, i)] = dataclasses.replace(
                        run, device=devices[p.a][i]
                    )
            return out

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
        if tool.endswith("_bw") and width > 1 and rounds:
            campaign.instance_runs = self._all_at_once(
                rounds, len(rounds) + 1, tool, settings, addresses, devices, side
            )
        if tool == "ib_write_bw" and settings.gdr and self.inventory.expect.erdma.gdr and rounds:
            self._gpudirect(campaign, rounds, settings, addresses, side)
        return campaign

    def _gpudirect(
        self,
        campaign: PerftestCampaign,
        rounds: list[list[Pair]],
        settings: PerftestSettings,
        addresses: dict[str, str],
        side: Callable[[str, int, int], PerftestOptions],
    ) -> None:
        """ib_write_bw from GPU memory on the all-at-once rounds' pairs (every node once)."""
        facts = self.facts.gather()
        topologies = {
            n: parse_topo(section.text)
            for n in campaign.devices
            if (section := facts[n].sections.get("gpu_topo")) is not None
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
                    addresses,
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
                    self.facts.transport, slots, index + offset, tool, settings, addresses, side
                )
            for p in runnable:
                out[p] = {}
                for i in range(max(len(devices[p.a]), len(devices[p.b]))):
                    name = device_label(devices, p, i)
                    run = runs.get((p, i))
                    out[p][name] = run or missing_device(p, index + offset, i, devices)
        return out


def instance_rounds(rounds: list[list[Pair]]) -> list[list[Pair]]:
    """The all-at-once rounds: the first schedule round, then (odd node counts) one more
    round of later pairs that cover the nodes the first round left out."""
    if not rounds:
        return []
    covered = {n for p in rounds[0] for n in (p.a, p.b)}
    extra: list[Pair] = []
    busy: set[str] = set()
    for pairs in rounds[1:]:
        for p in pairs:
            if (p.a not in covered or p.b not in covered) and not {p.a, p.b} & busy:
                extra.append(p)
                busy |= {p.a, p.b}
                covered |= {p.a, p.b}
    return [rounds[0], extra] if extra else [rounds[0]]


def device_label(devices: dict[str, list[str]], pair: Pair, i: int) -> str:
    """The name of device index `i` on the client side, or `ERI i` when it has none."""
    found = devices.get(pair.a, [])
    return found[i] if i < len(found) else f"ERI {i}"


def missing_device(pair: Pair, index: int, i: int, devices: dict[str, list[str]]) -> PairRun:
    """The failed run of a device index one side of the pair does not have."""
    lacking = [n for n in (pair.a, pair.b) if i >= len(devices.get(n, []))]
    why = "; ".join(
        f"{n} has no ERI {i} ({', '.join(devices.get(n, [])) or 'no eRDMA device'})"
        for n in lacking
    )
    return PairRun(pair, index, error=why, device=device_label(devices, pair, i))


def worst(runs: dict[str, PairRun], passes: Callable[[PairRun], bool]) -> PairRun:
    """The pair's run that speaks for it: its first failing device, else its first."""
    ordered = list(runs.values())
    return next((r for r in ordered if not passes(r)), ordered[0])


def localize_devices(
    device_runs: list[tuple[Pair, dict[str, PairRun]]],
    names: list[str],
    devices: dict[str, list[str]],
    passes: Callable[[PairRun], bool],
) -> list[str]:
    """`node07 erdma_1` for each node the schedule blames on one device index (a node
    failing on device i with every partner, while other nodes pass on it)."""
    width = max((len(r) for _, r in device_runs), default=0)
    out: list[str] = []
    for i in range(width):
        verdicts: dict[Pair, bool] = {}
        for pair, runs in device_runs:
            if len(runs) > i:
                ok = passes(list(runs.values())[i])
                verdicts[pair] = verdicts.get(pair, True) and ok if pair in verdicts else ok
        for node in localize(verdicts, nodes=names).suspects:
            found = devices.get(node, [])
            out.append(f"{node} {found[i] if i < len(found) else f'ERI {i}'}")
    return sorted(set(out))
