"""The pair probes' building blocks: the listener and source commands, the plan of which
source tries which ports and flows, and assembling each pair's facts from the outputs (the
campaign that runs them is `pairs.PairCampaign`, with `pair_pipeline` beside it)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from pytest_hpcnet.inventory.expectations import Expectations, Flow
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.ping import (
    DEFAULT_PAYLOAD,
    IPV4_ICMP_OVERHEAD,
    PATH_MTU_COUNT,
    PingResult,
    latency_ping_command,
    parse_ping,
    path_mtu_ping_command,
)
from pytest_hpcnet.probes.ports import (
    ConnectResults,
    ListenerStatus,
    connect_command,
    flows_for,
    listener_command,
    parse_connect,
    parse_listener,
)
from pytest_hpcnet.probes.ports import Flow as PortFlow
from pytest_hpcnet.probes.sections import sections_script, split_sections
from pytest_hpcnet.transport.fanout import CommandResult, Transport

LISTENER_LIFETIME_S = 60
LISTENER_ROUND_S = 10
"""A listener lives `LISTENER_LIFETIME_S` plus this for every round of the transport's pool
queued before its last source probes it (`listener_lifetime_s`)."""
LISTENER_READY_TENTHS = 80
CONNECT_TIMEOUT_S = 2.0
LATENCY_COUNT = 5
PIPELINE_GRACE_S = 60.0


@dataclass(frozen=True)
class PairFacts:
    """What the source saw of the target: path MTU ping, latency ping, required ports."""

    source: str
    target: str
    target_address: str
    path_mtu: PingResult
    latency: PingResult
    ports: ConnectResults
    listener: ListenerStatus
    commands: tuple[CommandResult, ...] = ()


@dataclass(frozen=True)
class FlowFacts:
    """The outcome of one inventory ACL flow (`allow` or `deny`)."""

    flow: Flow
    expectation: str
    result: ConnectResults
    listener: ListenerStatus
    commands: tuple[CommandResult, ...] = ()


@dataclass
class PairPlan:
    """Who listens on which ports, and what each source tries."""

    listen: dict[str, tuple[set[int], set[int]]] = field(default_factory=dict)
    partner: dict[str, str] = field(default_factory=dict)
    flows_from: dict[str, list[tuple[str, Flow]]] = field(default_factory=dict)
    mtu: int | None = None  # the path-MTU ping's packet size (`expect.mtu`)


def required_flows(expect: Expectations) -> tuple[PortFlow, ...]:
    """The ports that must be open between every pair (from `expect.ports`)."""
    return flows_for(expect.ports.tcp, expect.ports.udp)


def plan_pairs(pairs: list[tuple[str, str]], expect: Expectations) -> PairPlan:
    """Listeners per target and connections per source for the ring pairs and ACL flows."""
    plan = PairPlan(mtu=expect.mtu)
    required = required_flows(expect)
    for source, target in pairs:
        plan.partner[source] = target
        tcp, udp = plan.listen.setdefault(target, (set(), set()))
        tcp.update(f.port for f in required if f.proto == "tcp")
        udp.update(f.port for f in required if f.proto == "udp")
    for kind, flows in (("allow", expect.flows.allow), ("deny", expect.flows.deny)):
        for flow in flows:
            tcp, udp = plan.listen.setdefault(flow.target, (set(), set()))
            (tcp if flow.protocol == "tcp" else udp).add(flow.port)
            plan.flows_from.setdefault(flow.source, []).append((kind, flow))
    return plan


def listener_lifetime_s(listeners: int, sources: int, concurrency: int) -> float:
    """How long each listener lives: every listener start and every source's probes queue on
    a pool of `concurrency` connections, so the first listener up may wait for all of those
    rounds before its last source comes (a fixed minute ran out at 1,024 nodes under `-n 2`).
    A listener stopped by the run exits at once; the lifetime bounds one the run left."""
    per_round = max(1, concurrency)
    rounds = -(-listeners // per_round) + -(-sources // per_round)
    return LISTENER_LIFETIME_S + rounds * LISTENER_ROUND_S


def start_listener_command(
    address: str, tcp: set[int], udp: set[int], lifetime_s: float = LISTENER_LIFETIME_S
) -> str:
    """Start the listener in the background, wait (bounded) for READY, print its status."""
    listener = listener_command(address, sorted(tcp), sorted(udp), lifetime_s, 0)
    return (
        "f=$(mktemp /tmp/hpcnet-listener.XXXXXX) || exit 1; "
        f'( {listener} ) >"$f" 2>&1 </dev/null & '
        'echo "PID $!"; echo "FILE $f"; i=0; '
        f"while [ $i -lt {LISTENER_READY_TENTHS} ] && "
        "! grep -qE '^(READY|FAILED|hpcnet:)' \"$f\"; do sleep 0.1; i=$((i+1)); done; "
        'cat "$f"'
    )


def stop_listener_command(pid: int, path: str) -> str:
    """Stop one listener started by `start_listener_command` and print what it logged."""
    quoted = shlex.quote(path)
    return f"kill {int(pid)} 2>/dev/null; sleep 0.1; cat {quoted}; rm -f {quoted}"


def _listener_handle(text: str) -> tuple[int, str] | None:
    pid = re.search(r"^PID (\d+)$", text, re.M)
    path = re.search(r"^FILE (/tmp/hpcnet-listener\.\w+)$", text, re.M)
    return (int(pid.group(1)), path.group(1)) if pid and path else None


def _status_text(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not re.match(r"^(PID|FILE) ", ln))


def source_command(
    node: Node,
    target_address: str | None,
    expect: Expectations,
    flows: list[tuple[int, str, Flow]],
) -> str:
    """Everything one source tries, concurrently: pings and ports to its partner, ACL flows."""
    commands: dict[str, str] = {}
    if target_address:
        commands["path_mtu"] = path_mtu_ping_command(target_address, expect.mtu)
        commands["latency"] = latency_ping_command(target_address, count=LATENCY_COUNT)
        commands["ports"] = connect_command(
            target_address, required_flows(expect), CONNECT_TIMEOUT_S
        )
    for index, address, flow in flows:
        commands[f"flow{index}"] = connect_command(
            address, [PortFlow(flow.protocol, flow.port)], CONNECT_TIMEOUT_S
        )
    return sections_script(commands, parallel=True)


def listener_status(started: CommandResult | None, stopped: CommandResult | None) -> ListenerStatus:
    """The listener's status from its start output and the log printed when stopped."""
    text = _status_text(started.stdout) if started else ""
    if stopped is not None and stopped.ok:
        text = stopped.stdout or text
    return parse_listener(text)


def flow_id(kind: str, flow: Flow) -> str:
    """A test id for one inventory flow: `deny:udp/4791:node01->node02`."""
    return f"{kind}:{flow.protocol}/{flow.port}:{flow.source}->{flow.target}"


def flow_plan(
    plan: PairPlan, addresses: dict[str, str]
) -> tuple[dict[str, list[tuple[int, str, Flow]]], dict[int, tuple[str, Flow]]]:
    """Per source, its ACL flows to targets with an address (numbered); every flow by number."""
    flow_index: dict[str, list[tuple[int, str, Flow]]] = {}
    flows_meta: dict[int, tuple[str, Flow]] = {}
    for source, items in plan.flows_from.items():
        for kind, flow in items:
            index = len(flows_meta)
            flows_meta[index] = (kind, flow)
            address = addresses.get(flow.target)
            if address:
                flow_index.setdefault(source, []).append((index, address, flow))
    return flow_index, flows_meta


def gather_pair_facts(
    transport: Transport,
    nodes: dict[str, Node],
    addresses: dict[str, str],
    pairs: list[tuple[str, str]],
    expect: Expectations,
) -> tuple[dict[tuple[str, str], PairFacts], dict[str, FlowFacts]]:
    """Run the three fan-outs and return the facts of every pair and every ACL flow."""
    plan = plan_pairs(pairs, expect)
    flow_index, _ = flow_plan(plan, addresses)
    listening = [n for n in plan.listen if n in addresses]
    probing = [s for s in sorted(set(plan.partner) | set(flow_index)) if s in addresses]
    lifetime = listener_lifetime_s(len(listening), len(probing), transport.concurrency)
    started = transport.run_on_all(
        lambda node: start_listener_command(
            addresses[node.name], *plan.listen[node.name], lifetime_s=lifetime
        ),
        nodes=listening,
    )
    handles = {n: _listener_handle(r.stdout) for n, r in started.items() if r.ok}
    probed = transport.run_on_all(
        lambda node: source_command(
            node,
            addresses.get(plan.partner.get(node.name, "")),
            expect,
            flow_index.get(node.name, []),
        ),
        nodes=probing,
    )
    stopped = transport.run_on_all(
        lambda node: stop_listener_command(*handles[node.name]),
        nodes=[n for n, h in handles.items() if h],
    )
    return assemble(plan, addresses, started, probed, stopped)


def assemble(
    plan: PairPlan,
    addresses: dict[str, str],
    started: dict[str, CommandResult],
    probed: dict[str, CommandResult],
    stopped: dict[str, CommandResult],
) -> tuple[dict[tuple[str, str], PairFacts], dict[str, FlowFacts]]:
    """The facts of every pair and ACL flow from what the three stages returned."""
    flow_index, flows_meta = flow_plan(plan, addresses)
    listeners = {n: listener_status(started.get(n), stopped.get(n)) for n in plan.listen}
    pair_facts: dict[tuple[str, str], PairFacts] = {}
    flow_facts: dict[str, FlowFacts] = {}
    for source, result in probed.items():
        sections = split_sections(result.stdout)
        target = plan.partner.get(source)
        own = tuple(r for r in (result, started.get(target or ""), stopped.get(target or "")) if r)
        if target:
            pair_facts[(source, target)] = PairFacts(
                source=source,
                target=target,
                target_address=addresses.get(target, ""),
                path_mtu=parse_ping(
                    _section(sections, "path_mtu"),
                    PATH_MTU_COUNT,
                    expected_packet=plan.mtu,
                    expected_target=addresses.get(target),
                ),
                latency=parse_ping(
                    _section(sections, "latency"),
                    LATENCY_COUNT,
                    expected_packet=DEFAULT_PAYLOAD + IPV4_ICMP_OVERHEAD,
                    expected_target=addresses.get(target),
                ),
                ports=parse_connect(_section(sections, "ports")),
                listener=listeners.get(target, ListenerStatus()),
                commands=own,
            )
        for index, _address, flow in flow_index.get(source, []):
            kind = flows_meta[index][0]
            flow_facts[flow_id(kind, flow)] = FlowFacts(
                flow=flow,
                expectation=kind,
                result=parse_connect(_section(sections, f"flow{index}")),
                listener=listeners.get(flow.target, ListenerStatus()),
                commands=(result,),
            )
    return pair_facts, flow_facts


def _section(sections: dict, name: str) -> str:
    """A section's output; nothing when it is missing, cut short or timed out."""
    out = sections.get(name)
    return out.text if out is not None and out.complete else ""
