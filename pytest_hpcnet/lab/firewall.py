"""iptables rules of the lab, in dedicated chains of the node's own INPUT.

Fault rules live in the chain `HPCNET-LAB` (jumped to first from INPUT) with the comment
`hpcnet-lab fault`, so healing removes exactly the rule it added and, once the chain is
empty, the chain and its jump. The baseline network ACL that `lab up` installs (the
first node drops inbound tcp/2323 from the second node's addresses: `acl_denials`, the lab
inventory's `expect.flows.deny` and the lab control plane's Drop rule) lives in its own
chain `HPCNET-ACL` on every node, which faults and healing never touch. Nothing is ever
written in the host namespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_hpcnet.lab.system import LabError, in_ns

if TYPE_CHECKING:
    from pytest_hpcnet.lab.state import LabNode, LabState

CHAIN = "HPCNET-LAB"
COMMENT = "hpcnet-lab fault"
REJECT_WITH = {"tcp": "tcp-reset", "udp": "icmp-port-unreachable"}
ACL_CHAIN = "HPCNET-ACL"
ACL_COMMENT = "hpcnet-lab acl"
ACL_DENIED = (("tcp", 2323),)
"""Inbound flows the first lab node drops from the second (the lab inventory's
`expect.flows.deny`)."""


@dataclass(frozen=True)
class AclDenial:
    """One baseline drop: `proto`/`port` from node `source` to node `target`."""

    source: str
    target: str
    proto: str
    port: int


def acl_denials(state: LabState) -> list[AclDenial]:
    """The baseline ACL's drops: `ACL_DENIED` from the second node to the first (none below
    two nodes)."""
    if len(state.nodes) < 2:
        return []
    first, second = state.nodes[0].name, state.nodes[1].name
    return [AclDenial(second, first, proto, port) for proto, port in ACL_DENIED]


def acl_sources(state: LabState, node: LabNode) -> list[tuple[str, int, str]]:
    """(proto, port, source address) `node` drops: each of the source node's addresses
    (eth0's and eth1's, present or not, so `--eris 2` needs no new rule)."""
    found = []
    for denial in acl_denials(state):
        if denial.target != node.name:
            continue
        source = state.node(denial.source)
        for address in filter(None, (source.address, source.secondary_address)):
            found.append((denial.proto, denial.port, address))
    return found


def parse_target(spec: str | None) -> tuple[str, int]:
    """`tcp/18515` -> ("tcp", 18515); LabError on anything else."""
    m = re.fullmatch(r"(tcp|udp)/(\d{1,5})", (spec or "").strip().lower())
    if not m or not 1 <= int(m.group(2)) <= 65535:
        raise LabError(f"expected PROTO/PORT such as tcp/18515 or udp/4791, got {spec!r}")
    return m.group(1), int(m.group(2))


def parse_fault_target(spec: str | None) -> tuple[str, str, str | None]:
    """`tcp/18515`, `tcp/18515-18600`, `udp/4791@eth1` -> (proto, iptables ports, interface):
    the ports `18515` or `18515:18600`; the interface the rule is limited to, or None."""
    target, _, interface = (spec or "").strip().partition("@")
    m = re.fullmatch(r"(tcp|udp)/(\d{1,5})-(\d{1,5})", target.lower())
    if interface and not re.fullmatch(r"[A-Za-z0-9_.-]{1,15}", interface):
        raise LabError(f"not an interface name: {interface!r}")
    if m:
        first, last = int(m.group(2)), int(m.group(3))
        if not 1 <= first <= last <= 65535:
            raise LabError(f"expected a port range such as tcp/18515-18600, got {spec!r}")
        return m.group(1), f"{first}:{last}", interface or None
    proto, port = parse_target(target)
    return proto, str(port), interface or None


def _rule(action: str, proto: str, port: int | str, interface: str | None = None) -> list[str]:
    spec = ["-i", interface] if interface else []
    spec += ["-p", proto, "--dport", str(port), "-m", "comment", "--comment", COMMENT]
    if action == "block":
        return [*spec, "-j", "DROP"]
    return [*spec, "-j", "REJECT", "--reject-with", REJECT_WITH[proto]]


def _iptables(namespace: str, *args: str, check: bool = True) -> bool:
    return in_ns(namespace, "iptables", "-w", "5", *args, check=check).returncode == 0


def add_rule(
    namespace: str, action: str, proto: str, port: int | str, interface: str | None = None
) -> None:
    """Drop (`block`) or reject (`reject`) inbound traffic to proto/port (`18515:18600`: a
    range) in the namespace, arriving on `interface` only when given."""
    if not _iptables(namespace, "-n", "-L", CHAIN, check=False):
        _iptables(namespace, "-N", CHAIN)
    if not _iptables(namespace, "-C", "INPUT", "-j", CHAIN, check=False):
        _iptables(namespace, "-I", "INPUT", "1", "-j", CHAIN)
    rule = _rule(action, proto, port, interface)
    if not _iptables(namespace, "-C", CHAIN, *rule, check=False):
        _iptables(namespace, "-A", CHAIN, *rule)


def remove_rule(
    namespace: str, action: str, proto: str, port: int | str, interface: str | None = None
) -> None:
    """Remove the rule `add_rule` added; drop the chain once it holds no rule."""
    rule = _rule(action, proto, port, interface)
    if _iptables(namespace, "-C", CHAIN, *rule, check=False):
        _iptables(namespace, "-D", CHAIN, *rule)
    listing = in_ns(namespace, "iptables", "-w", "5", "-S", CHAIN, check=False).stdout
    if [line for line in listing.splitlines() if line.startswith("-A ")]:
        return
    _iptables(namespace, "-D", "INPUT", "-j", CHAIN, check=False)
    _iptables(namespace, "-X", CHAIN, check=False)


def acl_rule(proto: str, port: int, source: str) -> list[str]:
    """The iptables rule of one baseline drop (in `ACL_CHAIN`)."""
    spec = ["-s", f"{source}/32", "-p", proto, "--dport", str(port)]
    return [*spec, "-m", "comment", "--comment", ACL_COMMENT, "-j", "DROP"]


def install_acl(namespace: str, drops: list[tuple[str, int, str]]) -> None:
    """The baseline ACL: drop each (proto, port, source address) inbound (`acl_sources`),
    in its own chain after the fault chain."""
    _iptables(namespace, "-N", ACL_CHAIN)
    for proto, port, source in drops:
        _iptables(namespace, "-A", ACL_CHAIN, *acl_rule(proto, port, source))
    _iptables(namespace, "-A", "INPUT", "-j", ACL_CHAIN)
