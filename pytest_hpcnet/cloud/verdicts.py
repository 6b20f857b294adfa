"""Judging a `ControlPlane`: both layers' verdict on a flow, per interface, per port range.

A flow between two nodes is judged on every pair of their interfaces of one kind (primary
ENI to primary ENI, ERI to ERI, secondary to secondary), IPv4 and, when both have it,
IPv6: security groups (stateful; egress at the source interface, ingress at the target
interface, each interface's groups pooled) and network ACLs (stateless; the source
vSwitch's egress, the target vSwitch's ingress, and the reply back to the client's
ephemeral ports). A port range is cut where any rule, port list or ACL entry starts or
ends; each piece behaves as one port, so one evaluation judges it.

Unknown is never open: a verdict is `accepted` only when every piece on every interface
pair was judged and accepted; anything that could not be read leaves the verdict
undetermined with a one-line reason, and `not_accepted` reports it as a failure.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pytest_hpcnet.cloud import nacl, secgroup
from pytest_hpcnet.cloud.interfaces import NetworkInterface
from pytest_hpcnet.cloud.plane import ControlPlane
from pytest_hpcnet.cloud.rules import (
    MAX_PORT,
    MIN_PORT,
    CloudModelError,
    Direction,
    Flow,
    Protocol,
    parse_ip,
)
from pytest_hpcnet.inventory.cloud_flows import ExternalFlow, RequiredFlow

if TYPE_CHECKING:
    from pytest_hpcnet.probes.ports import Reachability

LINUX_EPHEMERAL_PORTS = (32768, 60999)
"""Client ports the stateless ACLs must let replies back to: Linux's default
`net.ipv4.ip_local_port_range` (kernel Documentation/networking/ip-sysctl.rst)."""
PortInterval = tuple[int, int]


@dataclass(frozen=True)
class Endpoint:
    """One end of a flow: a node's interface, or a host outside the cluster."""

    name: str
    address: str
    groups: frozenset[str] = frozenset()
    vswitch_id: str | None = None
    interface: NetworkInterface | None = None

    @property
    def where(self) -> str:
        """`node03 eni-x` for an interface, the name alone otherwise."""
        return f"{self.name} {self.interface.interface_id}" if self.interface else self.name


def _sg_side(decision: secgroup.Decision, endpoint: Endpoint) -> str:
    where = "egress at" if decision.direction is Direction.EGRESS else "ingress at"
    rule = f"rule {decision.rule}" if decision.by_rule else str(decision.rule)
    return f"{rule} ({where} {endpoint.where})"


def _acl_side(decision: nacl.AclDecision, endpoint: Endpoint) -> str:
    where = "egress from" if decision.direction is Direction.EGRESS else "ingress to"
    return f"{decision.reason} ({where} {endpoint.where}'s vSwitch)"


@dataclass(frozen=True)
class PortDecision:
    """Both layers' verdict on `proto` ports `ports` from `source` to `target`."""

    source: Endpoint
    target: Endpoint
    proto: str
    ports: PortInterval
    security_groups: secgroup.FlowDecision | None = None
    network_acls: nacl.AclFlowDecision | None = None
    reply: nacl.ReplyDecision | None = None
    unknown: str | None = None

    @property
    def accepted(self) -> bool:
        """Both layers let it through (and the ACLs let the reply back)."""
        parts = (self.security_groups, self.network_acls, self.reply)
        return self.unknown is None and all(p is not None and p.accepted for p in parts)

    @property
    def denied(self) -> bool:
        """Judged, and some layer drops it."""
        return self.unknown is None and not self.accepted

    def deciding(self) -> str:
        """The deciding rules/entries in one line: what denies it, or what accepts it."""
        if self.unknown is not None:
            return f"undetermined: {self.unknown}"
        sg, acl, reply = self.security_groups, self.network_acls, self.reply
        assert sg is not None and acl is not None
        sides = [
            (sg.egress, _sg_side(sg.egress, self.source)),
            (sg.ingress, _sg_side(sg.ingress, self.target)),
        ]
        acl_sides = [
            (acl.egress, _acl_side(acl.egress, self.source)),
            (acl.ingress, _acl_side(acl.ingress, self.target)),
        ]
        if self.accepted:
            same = acl.egress.reason == acl.ingress.reason
            acl_text = acl.egress.reason if same else f"{acl_sides[0][1]}, {acl_sides[1][1]}"
            by_rule_first = sorted(sides, key=lambda side: not side[0].by_rule)
            return (
                f"accepted by security group {by_rule_first[0][1]}, {by_rule_first[1][1]}; "
                f"network ACL: {acl_text}"
            )
        denials = [f"security group {text}" for d, text in sides if not d.accepted]
        denials += [f"network ACL {text}" for d, text in acl_sides if not d.accepted]
        if reply is not None and not reply.accepted:
            denials.append(f"network ACL {_reply_text(reply)}")
        return "denied by " + "; ".join(denials)


def _reply_text(reply: nacl.ReplyDecision) -> str:
    """The denied reply, without the server port (it holds for the whole piece)."""
    flow = reply.flow
    low, high = reply.ephemeral_ports or (0, 0)
    return (
        f"reply {flow.protocol.value} {flow.dst_ip} -> {flow.src_ip} to client ports "
        f"{low}-{high} denied (egress {list(reply.denied_egress)}, "
        f"ingress {list(reply.denied_ingress)})"
    )


def _ports_text(ports: PortInterval) -> str:
    return str(ports[0]) if ports[0] == ports[1] else f"{ports[0]}-{ports[1]}"


@dataclass(frozen=True)
class FlowDecisions:
    """The control plane's decisions on one flow over every interface pair and port piece it
    covers (evaluated here, judged in requirements/cloud.py)."""

    source: str
    target: str
    proto: str
    ports: PortInterval
    decisions: tuple[PortDecision, ...] = ()
    problem: str | None = None
    """Why nothing could be judged (unmatched node, unreadable group)."""

    @property
    def label(self) -> str:
        return f"{self.proto}/{_ports_text(self.ports)} {self.source}->{self.target}"

    @property
    def unknown(self) -> str | None:
        """Why (part of) the flow could not be judged; None when all of it was."""
        if self.problem is not None:
            return self.problem
        if not self.decisions:
            return "no pair of interfaces to judge"
        reasons = [d.unknown for d in self.decisions if d.unknown is not None]
        return "; ".join(dict.fromkeys(reasons)) if reasons else None

    @property
    def accepted(self) -> bool:
        """Judged everywhere, and accepted on every interface pair and port."""
        return self.unknown is None and all(d.accepted for d in self.decisions)

    @property
    def denied(self) -> bool:
        """Judged everywhere, and denied somewhere."""
        return self.unknown is None and not self.accepted

    @property
    def all_denied(self) -> bool:
        """Judged everywhere, and denied on every interface pair and port (a must-deny flow)."""
        return self.unknown is None and all(d.denied for d in self.decisions)

    def deciding(self) -> str:
        """One line: the first accepting decision, or every failing one."""
        if self.problem is not None:
            return f"undetermined: {self.problem}"
        if not self.decisions:
            return "undetermined: no pair of interfaces to judge"
        whole = self.ports[0] == self.ports[1]
        if self.accepted:
            first = self.decisions[0].deciding()
            more = len(self.decisions) - 1
            return first + (f" (and {more} more interface pairs or port ranges)" if more else "")
        lines = []
        for decision in self.decisions:
            if decision.accepted:
                continue
            prefix = "" if whole else f"ports {_ports_text(decision.ports)} "
            lines.append(prefix + decision.deciding())
        return "; ".join(dict.fromkeys(lines))

    def __str__(self) -> str:
        return f"{self.label}: {self.deciding()}"


def not_accepted(verdicts: Iterable[FlowDecisions]) -> list[str]:
    """One line per verdict that is not accepted, undetermined ones included."""
    return [str(verdict) for verdict in verdicts if not verdict.accepted]


# -- evaluation ----------------------------------------------------------------------------


def _cuts(
    plane: ControlPlane, source: Endpoint, target: Endpoint, low: int, high: int
) -> list[PortInterval]:
    """[low, high] cut where a range that can judge this pair starts or ends: the rules of
    both ends' groups, the port lists they name, the ACLs of both ends' vSwitches."""
    points = {low, high + 1}
    rules = [
        rule
        for group_id in sorted(source.groups | target.groups)
        if group_id in plane.groups
        for rule in plane.groups[group_id].rules
    ]
    ranges = [rule.port_range for rule in rules]
    ranges += [
        r
        for rule in rules
        if rule.port_range_list_id
        for r in plane.port_lists.get(rule.port_range_list_id, ())
    ]
    vswitches = {source.vswitch_id, target.vswitch_id}
    ranges += [
        entry.port_range
        for acl in plane.acls
        if vswitches & set(acl.vswitch_ids)
        for entry in (*acl.ingress_entries, *acl.egress_entries)
    ]
    for port_range in ranges:
        first, last = port_range.bounds()
        points.update(p for p in (first, last + 1) if low < p <= high)
    ordered = sorted(points)
    return [(start, end - 1) for start, end in itertools.pairwise(ordered)]


def _judge(
    plane: ControlPlane, source: Endpoint, target: Endpoint, proto: str, ports: PortInterval
) -> PortDecision:
    base = PortDecision(source, target, proto, ports)
    try:
        flow = Flow(
            src_ip=source.address,
            dst_ip=target.address,
            protocol=Protocol.parse(proto),
            dst_port=ports[0],
            src_groups=source.groups,
            dst_groups=target.groups,
        )
        options = {"prefix_lists": plane.prefix_lists}
        sg = secgroup.evaluate_flow(
            flow, plane.groups, port_range_lists=plane.port_lists, **options
        )
        acl = nacl.evaluate_flow(flow, source.vswitch_id, target.vswitch_id, plane.acls, **options)
        reply = nacl.evaluate_reply(
            flow,
            source.vswitch_id,
            target.vswitch_id,
            plane.acls,
            ephemeral_ports=LINUX_EPHEMERAL_PORTS,
            **options,
        )
    except (
        secgroup.SecurityGroupConfigError,
        nacl.NetworkAclConfigError,
        CloudModelError,
    ) as error:
        return replace(base, unknown=plane.explain(str(error)))
    return replace(base, security_groups=sg, network_acls=acl, reply=reply)


def _merge(decisions: Sequence[PortDecision]) -> list[PortDecision]:
    """Adjacent pieces with the same outcome and reasons, as one piece."""
    merged: list[PortDecision] = []
    for decision in decisions:
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.source == decision.source
            and last.target == decision.target
            and last.ports[1] + 1 == decision.ports[0]
            and last.accepted == decision.accepted
            and last.deciding() == decision.deciding()
        ):
            merged[-1] = replace(last, ports=(last.ports[0], decision.ports[1]))
        else:
            merged.append(decision)
    return merged


def judge_range(
    plane: ControlPlane, source: Endpoint, target: Endpoint, proto: str, ports: PortInterval
) -> list[PortDecision]:
    """The decisions on `ports` from `source` to `target`, one per piece of the range."""
    low, high = ports
    if not MIN_PORT <= low <= high <= MAX_PORT:
        raise ValueError(f"port interval {ports} is out of 1..65535 or reversed")
    return _merge(
        [
            _judge(plane, source, target, proto, piece)
            for piece in _cuts(plane, source, target, low, high)
        ]
    )


def _endpoints(node: str, interface: NetworkInterface) -> list[Endpoint]:
    groups = frozenset(interface.security_group_ids)
    addresses = [a for a in (interface.address, *interface.ipv6_addresses[:1]) if a]
    return [Endpoint(node, a, groups, interface.vswitch_id, interface) for a in addresses]


def interface_pairs(
    plane: ControlPlane, source: str, target: str
) -> list[tuple[Endpoint, Endpoint]]:
    """Every (source, target) endpoint pair to judge: interfaces of one kind, one family."""
    pairs = []
    for src_if in plane.node(source).interfaces:
        for dst_if in plane.node(target).interfaces:
            if src_if.role != dst_if.role:
                continue
            for src in _endpoints(source, src_if):
                for dst in _endpoints(target, dst_if):
                    if parse_ip(src.address).version == parse_ip(dst.address).version:
                        pairs.append((src, dst))
    return pairs


def flow_verdict(
    plane: ControlPlane, source: str, target: str, proto: str, ports: PortInterval
) -> FlowDecisions:
    """Both layers' verdict on `proto` `ports` from node `source` to node `target`."""
    base = FlowDecisions(source, target, proto.lower(), ports)
    gaps = plane.gaps(source, target)
    if gaps:
        return replace(base, problem="; ".join(gaps))
    decisions = [
        decision
        for src, dst in interface_pairs(plane, source, target)
        for decision in judge_range(plane, src, dst, proto, ports)
    ]
    return replace(base, decisions=tuple(decisions))


def port_decision(
    plane: ControlPlane, src_node: object, dst_node: object, proto: str, port: int
) -> FlowDecisions:
    """`flow_verdict` on one port (nodes by name or by object with a `name`)."""
    return flow_verdict(plane, _name(src_node), _name(dst_node), proto, (port, port))


def _name(node: object) -> str:
    return node if isinstance(node, str) else str(node.name)


def required_verdicts(
    plane: ControlPlane, source: object, target: object, required: Iterable[RequiredFlow]
) -> list[FlowDecisions]:
    """The verdict on each required flow from `source` to `target`."""
    return [
        flow_verdict(plane, _name(source), _name(target), flow.protocol, flow.bounds)
        for flow in required
    ]


def external_verdict(plane: ControlPlane, flow: ExternalFlow) -> FlowDecisions:
    """The verdict on a flow between a host outside the cluster and a node's primary ENI."""
    outside = Endpoint(flow.name, flow.address, frozenset(flow.security_group_ids), flow.vswitch_id)
    inbound = flow.direction == "inbound"
    source, target = (flow.name, flow.target) if inbound else (flow.target, flow.name)
    base = FlowDecisions(source, target, flow.protocol, (flow.port, flow.port))
    missing = [g for g in flow.security_group_ids if g not in plane.groups]
    gaps = plane.gaps(flow.target) + [
        f"{flow.name}: security group {g} could not be read "
        f"({plane.missing_groups.get(g, 'not among the groups the audit read')})"
        for g in missing
    ]
    if gaps:
        return replace(base, problem="; ".join(gaps))
    primary = plane.node(flow.target).primary
    if primary is None:
        return replace(base, problem=f"{flow.target}: no primary ENI")
    version = parse_ip(flow.address).version
    node_ends = [
        e for e in _endpoints(flow.target, primary) if parse_ip(e.address).version == version
    ]
    if not node_ends:
        return replace(base, problem=f"{flow.target}: no IPv{version} address on {primary}")
    src, dst = (outside, node_ends[0]) if inbound else (node_ends[0], outside)
    return replace(
        base, decisions=tuple(judge_range(plane, src, dst, flow.protocol, (flow.port, flow.port)))
    )


def cross_check(
    verdict: FlowDecisions,
    probe: Reachability | None,
    listening: bool = True,
    *,
    addresses: tuple[str | None, str | None] = (None, None),
) -> str | None:
    """One line naming both facts when the control plane and the data-plane probe disagree;
    None when they agree or the probe cannot say (not tried, no listener).

    The probe's `addresses` (source, target) pick the interface pair it crossed; when one
    is not known, the primary ENIs. An address on no interface the cloud lists is a finding.
    """
    if probe is None or verdict.unknown is not None:
        return None
    src_address, dst_address = addresses

    def crossed(decision: PortDecision) -> bool:
        if src_address is None or dst_address is None:
            interfaces = (decision.source.interface, decision.target.interface)
            return all(i is not None and i.role == "primary" for i in interfaces)
        return (decision.source.address, decision.target.address) == addresses

    matching = [d for d in verdict.decisions if crossed(d)]
    seen = f"data plane: {probe.proto}/{probe.port} {probe.outcome}"
    if not matching:
        return (
            f"{verdict.label}: the probed addresses {src_address} -> {dst_address} are on no "
            f"pair of interfaces the cloud lists for these nodes; {seen}"
        )
    decision = matching[0]
    if decision.accepted and not probe.open and listening:
        return (
            f"{verdict.label}: control plane: {decision.deciding()}; {seen}: "
            "something outside the rules is in the path, or the probe is wrong"
        )
    if decision.denied and probe.open:
        return (
            f"{verdict.label}: control plane: {decision.deciding()}; {seen}: the cloud does not "
            "enforce these rules (stale snapshot, another ENI or group), or the probe is wrong"
        )
    return None
