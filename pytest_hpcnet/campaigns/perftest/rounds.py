"""perftest commands and one round's execution: every pair of a round at once.

Per round, three fan-outs: start each pair's server in the background on its own port
and wait until it listens; run every client; stop every server (also on timeout or
interrupt) and collect its output. No perftest is left running on any node. `run_round`
runs one device per pair; `run_slots` runs several per node at once (every device of a
pair). Each run's output is parsed into a `PairRun`; output its parser cannot read (even
one that makes it raise) is that pair's failed run, never the round's.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

from pytest_hpcnet.campaigns.schedule import Pair
from pytest_hpcnet.inventory.bench_settings import PerftestSettings
from pytest_hpcnet.probes.perftest import (
    ExpectedRun,
    PerftestOptions,
    client_command,
    expected_run,
    server_command,
)
from pytest_hpcnet.probes.perftest_parsers import (
    BandwidthResult,
    LatencyResult,
    parse_bandwidth,
    parse_latency,
)
from pytest_hpcnet.probes.sections import MARK, SectionOutput, sections_script, split_sections
from pytest_hpcnet.probes.text import ends_mid_line
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
    not_measured: str | None = None
    """Why the output is not the run asked (its parser's `not_measured`): `error` is then
    None and `value` None, so the judge says not measured, never failed."""

    @property
    def value(self) -> float | None:
        """Bandwidth in Gbit/s or latency t_avg in usec; None when nothing was measured."""
        if self.error or self.not_measured:
            return None
        if self.bandwidth is not None:
            return self.bandwidth.avg_gbps if self.bandwidth.ok else None
        if self.latency is not None:
            return self.latency.t_avg_us if self.latency.ok else None
        return None


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
        asked = expected_run(side_options(pair.a, port[pair]))
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
    text = _raw_section(result.stdout, key) if out.status is not None else None
    stdout = text if text is not None and text.rstrip("\n") == out.text else out.text
    return dataclasses.replace(result, stdout=stdout, stderr="", exit_status=status)


def _raw_section(stdout: str, key: str) -> str | None:
    """A section's output as its command printed it, its last line terminator included
    (`split_sections` drops it; a run cut mid-row prints none, so the parser must see)."""
    begin = re.search(rf"^{re.escape(MARK)} begin {re.escape(key)}\n", stdout, re.M)
    if begin is None:
        return None
    end = re.compile(rf"^{re.escape(MARK)} end {re.escape(key)} \d+$", re.M)
    found = end.search(stdout, begin.end())
    if found is None:
        return None
    body = stdout[begin.end() : found.start()]  # the output, then the `echo` line end
    return body[:-1] if body.endswith("\n") else body


def run_slots(
    transport: Transport,
    slots: list[Slot],
    index: int,
    tool: str,
    settings: PerftestSettings,
    target: Callable[[str, int], str],
    side_options: Callable[[str, int, int], PerftestOptions],
) -> dict[Slot, PairRun]:
    """Several perftest runs per node at once (every device of a pair): each slot's server
    on its own port, all clients of a node started together, every server stopped.
    `target(server, i)` is the address the client of device index i connects to."""
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
                        side_options(node.name, port[s], s[1]), target(s[0].b, s[1])
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
        run = _pair_run(pair, index, tool, *parts, stop, commands, expected_run(options))
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
    asked: ExpectedRun | int | None = None,
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
    if client.truncated:  # the transport kept only part of it: not the whole run
        return PairRun(
            pair,
            index,
            not_measured=f"not measured: the client output on {pair.a} was truncated",
            server_output=server_output,
            commands=commands,
        )
    text = client.stdout + ("\n" + client.stderr if client.stderr else "")
    if client.stderr and (cut := ends_mid_line(client.stdout)) and any(c.isdigit() for c in cut):
        text = client.stdout  # the cut would read as a whole line before stderr's
    try:
        return _parsed_run(pair, index, tool, text, asked, server_output, commands)
    except Exception as exc:  # a parser must not raise; if one does, only this pair fails
        return PairRun(
            pair,
            index,
            error=f"unparseable output: the {tool} parser raised {exc!r}",
            server_output=server_output,
            commands=commands,
        )


def _parsed_run(
    pair: Pair,
    index: int,
    tool: str,
    text: str,
    asked: ExpectedRun | int | None,
    server_output: str,
    commands: tuple[CommandResult, ...],
) -> PairRun:
    """The run of a client that answered: its output parsed, judged usable or not (an
    output of another run than `asked` is not measured, never a failure)."""
    expected = asked if isinstance(asked, ExpectedRun) else None
    size = asked.largest if isinstance(asked, ExpectedRun) else asked
    found: dict = {}
    if tool.endswith("_lat"):
        lat = parse_latency(text, expected_size=size, expected=expected)
        found, result = {"latency": lat}, lat
    else:
        bw = parse_bandwidth(text, expected_size=size, expected=expected)
        found, result = {"bandwidth": bw}, bw
    if result.not_measured:
        why = f"not measured: {result.not_measured}"
        return PairRun(
            pair, index, not_measured=why, server_output=server_output, commands=commands, **found
        )
    error = result.error or (
        None if result.ok else f"unparseable output: {'; '.join(result.problems)}"
    )
    return PairRun(
        pair, index, error=error, server_output=server_output, commands=commands, **found
    )
