"""Judges of the network plane: a node answers, nodes share their placement, required ports
are open between nodes, and the inventory's ACL flows are enforced.

Each takes typed probe results (`probes.metadata`, `probes.ports`) and the expectations and
returns a `Verdict` with the values as measurements. A flow that was not tried, a tool that
is missing, a port nothing listened on, a metadata key that could not be read: not measured;
a closed port, a placement that differs: a failure. Reasons leave the node or pair to the
suite's context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.identity import HOSTNAME, KERNEL
from pytest_hpcnet.probes.metadata import METADATA, MetadataFacts
from pytest_hpcnet.probes.ports import ConnectResults, ListenerStatus, Reachability, flows_for
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    failing,
    not_applicable,
    not_measured,
    passing,
)

MAX_NAMED = 8
MEANING = {
    "refused": "refused (answered with a reset or port unreachable: a REJECT rule or no listener)",
    "timeout": "silently dropped (no answer in time: security group, ACL or firewall DROP)",
}
PLACEMENT_FIELDS = {"vswitch-id": "vswitch_id", "vpc-id": "vpc_id", "zone-id": "zone_id"}
"""The metadata keys every node must share, and their `expect.placement` fields."""
FIX_PORTS = (
    "open the ports between the nodes in the security group (and the network ACL and host firewall)"
)


def named(nodes: Sequence[str]) -> str:
    """`a, b, c` (at most MAX_NAMED names, then `and N more`)."""
    more = f" and {len(nodes) - MAX_NAMED} more" if len(nodes) > MAX_NAMED else ""
    return ", ".join(nodes[:MAX_NAMED]) + more


def judge_reachability(hostname: str, kernel: str, metadata: MetadataFacts | None) -> Verdict:
    """The node answered over SSH and said its hostname and kernel release; both measured,
    with its instance type, id and vSwitch where the metadata gave them (reported)."""
    measurements = [
        Measurement("hostname", hostname or None),
        Measurement("kernel", kernel or None),
    ]
    for name in ("instance_type", "instance_id", "vswitch_id"):
        if metadata is not None and getattr(metadata, name):
            measurements.append(Measurement(name, getattr(metadata, name)))
    missing = [
        what for what, value in (("hostname", hostname), ("kernel release", kernel)) if not value
    ]
    kw = {"measurements": tuple(measurements), "sections": (HOSTNAME.name, KERNEL.name)}
    if missing:
        return failing(
            f"answered over SSH but reported no {' and no '.join(missing)}",
            "check the node's shell and coreutils (`hostname`, `uname -r`)",
            **kw,
        )
    return passing(**kw)


@dataclass(frozen=True)
class ValueGroup:
    """Nodes that share one value."""

    value: str
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class MetadataGrouping:
    """One metadata key compared across nodes."""

    key: str
    expected: str | None
    groups: tuple[ValueGroup, ...]
    """Largest first, ties by value."""
    odd: tuple[str, ...]
    """Nodes whose value differs from `expected` (empty when no expectation)."""
    undetermined: tuple[tuple[str, str], ...]
    """(node, why) for nodes whose value could not be read."""
    findings: tuple[str, ...]
    """Human-readable statements of disagreement, empty when every node read agrees."""

    @property
    def consistent(self) -> bool:
        """All nodes read and equal (and equal to `expected` when given)."""
        return not self.findings and not self.undetermined


def group_by_value(
    facts: Mapping[str, MetadataFacts], key: str, expected: str | None = None
) -> MetadataGrouping:
    """Group nodes by the value of `key` (e.g. `vswitch-id`).

    With `expected`, nodes with another value are odd. Without it, disagreeing nodes
    are all reported by group; no majority is taken to be right.
    """
    by_value: dict[str, list[str]] = {}
    undetermined: list[tuple[str, str]] = []
    for node, fact in facts.items():
        value = fact.value(key)
        if value is None:
            why = fact.why_missing(key) or (
                "curl not installed" if fact.tool_missing else "not read"
            )
            undetermined.append((node, why))
        else:
            by_value.setdefault(value, []).append(node)
    groups = tuple(
        ValueGroup(value, tuple(sorted(nodes)))
        for value, nodes in sorted(by_value.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    )
    findings: list[str] = []
    odd: tuple[str, ...] = ()
    if expected is not None:
        odd = tuple(sorted(n for g in groups if g.value != expected for n in g.nodes))
        findings += [
            f"{key} is {g.value} on {', '.join(g.nodes)}; the inventory expects {expected}"
            for g in groups
            if g.value != expected
        ]
    elif len(groups) > 1:
        findings.append(
            f"{key} differs between nodes: "
            + "; ".join(f"{g.value} on {', '.join(g.nodes)}" for g in groups)
        )
    return MetadataGrouping(
        key=key,
        expected=expected,
        groups=groups,
        odd=odd,
        undetermined=tuple(undetermined),
        findings=tuple(findings),
    )


def judge_placement(
    metadata: Mapping[str, MetadataFacts], key: str, expect: Expectations
) -> Verdict:
    """Every node reports the same `key` (`vswitch-id`, `vpc-id`, `zone-id`), the one
    `expect.placement` names when it names one; each value measured with the nodes holding
    it. A node whose value could not be read is not measured (unless others already
    disagree). `extra["suspects"]`: the odd nodes, or the minority under a clear majority."""
    field = PLACEMENT_FIELDS[key]
    expected = getattr(expect.placement, field)
    grouping = group_by_value(metadata, key, expected)
    source = f"expect.placement.{field}" if expected else "all nodes agree"
    measurements = tuple(
        Measurement(key, g.value, "", expected, "==", source, named(g.nodes))
        for g in grouping.groups
    )
    suspects = [*grouping.odd, *(n for n, _ in grouping.undetermined)]
    sizes = [len(g.nodes) for g in grouping.groups]
    if not expected and len(sizes) > 1 and sizes[0] > sizes[1]:  # a clear majority
        suspects += [n for g in grouping.groups[1:] for n in g.nodes]
    unread = [f"{key} on {node}: cannot determine ({why})" for node, why in grouping.undetermined]
    kw = {
        "measurements": measurements,
        "sections": (METADATA.name,),
        "extra": {"suspects": suspects},
    }
    if grouping.findings:
        return failing(
            "; ".join([*grouping.findings, *unread]),
            "move the odd instances into the cluster's vSwitch (same VPC and zone), or correct "
            f"expect.placement.{field}",
            **kw,
        )
    if unread or not metadata:
        return not_measured(
            "; ".join(unread) or "no node reported its metadata",
            "check the metadata service (curl http://100.100.100.200/latest/meta-data/)",
            **kw,
        )
    return passing(**kw)


def _closed(result: Reachability) -> str:
    if result.outcome == "error":
        return f"failed to connect ({result.detail or 'error'})"
    return MEANING.get(result.outcome, result.outcome)


def judge_required_ports(
    ports: ConnectResults, listener: ListenerStatus, expect: Expectations
) -> Verdict:
    """Every `expect.ports` flow opened from the source to the target (`open_ports` measured,
    and each flow that did not open). A flow not tried, a missing python3, or a port nothing
    listened on at the target is not measured; a refused, dropped or failed one fails."""
    required = flows_for(expect.ports.tcp, expect.ports.udp)
    if not required:
        return not_applicable("no ports expected between nodes (expect.ports is empty)")
    if ports.tool_missing:
        return not_measured(
            "python3 is needed on the source to probe ports", "install python3 on the nodes"
        )
    closed, unread, measurements = [], [], []
    for flow in required:
        name = f"{flow.proto}/{flow.port}"
        result = ports.get(flow.proto, flow.port)
        if result is not None and result.open:
            continue
        if result is None:
            unread.append(f"{name} not tried")
        elif not listener.listening(flow.proto, flow.port):
            unread.append(f"{name} could not be listened on at the target")
        else:
            closed.append(f"{name} {_closed(result)}")
        outcome = result.outcome if result is not None else "not tried"
        measurements.append(Measurement("port", outcome, "", "open", "==", "expect.ports", name))
    total = len(required)
    opened = total - len(closed) - len(unread)
    measurements.insert(0, Measurement("open_ports", opened, "ports", total, ">=", "expect.ports"))
    kw = {"measurements": tuple(measurements)}
    if closed:
        return failing("; ".join([*closed, *unread]), FIX_PORTS, **kw)
    if unread:
        problems = "; ".join(ports.problems + listener.problems)
        why = "; ".join(unread) + (f" ({problems})" if problems else "")
        return not_measured(why, "re-run; check that the listener can bind the ports", **kw)
    return passing(f"{total} ports open", **kw)


def judge_acl_flow(
    kind: str,
    protocol: str,
    port: int,
    result: ConnectResults | None,
    listener: ListenerStatus | None,
) -> Verdict:
    """A must-allow flow (`kind` `allow`) opens; a must-deny one (`deny`) does not. A flow
    that could not be tried, or whose closed port nothing listened on (a reset then proves
    nothing), is not measured; a connect error on a must-deny flow likewise."""
    allow = kind == "allow"
    bound: str | list[str] = "open" if allow else ["refused", "timeout"]
    comparison = "==" if allow else "in"
    if result is None:
        return not_measured("could not be tried (node unreachable?)", "re-run")
    found = result.get(protocol, port)
    outcome = found.outcome if found is not None else None
    kw = {
        "measurements": (
            Measurement("outcome", outcome, "", bound, comparison, f"expect.flows.{kind}"),
        )
    }
    if found is None:
        return not_measured(f"no result ({'; '.join(result.problems) or 'none'})", "re-run", **kw)
    listened = listener is not None and listener.listening(protocol, port)
    if allow:
        if found.open:
            return passing(**kw)
        if not listened and found.outcome != "timeout":
            return not_measured(
                "nothing listened on the target port: a closed port proves nothing", "re-run", **kw
            )
        return failing(
            f"must-allow flow is {_closed(found)}",
            "allow the flow in the network ACL and security group",
            **kw,
        )
    if found.open:
        return failing(
            "must-deny flow connected: the ACL lets it through",
            "add the deny rule to the network ACL",
            **kw,
        )
    if found.outcome == "timeout" or (found.outcome == "refused" and listened):
        return passing(**kw)
    why = (
        f"failed to connect ({found.detail or 'error'})"
        if found.outcome == "error"
        else "refused, but nothing listened on the target port: a reset proves nothing"
    )
    return not_measured(why, "re-run; check that the listener can bind the port", **kw)
