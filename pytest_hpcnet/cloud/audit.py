"""The control-plane audit: what the cloud's rules say about the cluster's traffic.

`snapshot(cluster)` reads, once per session, the nodes' ECS instances (matched by the
instance id their metadata service gives, else by private IP), their instance types'
`EriQuantity`, every security group of those instances and the network ACLs (the
inventory's `cloud.network_acl_ids`, else those bound to the nodes' vSwitches). The
functions below judge that `ControlPlane` without further calls: `port_decision` and
`flow_decision` give both layers' verdict (security groups, stateful; network ACLs,
stateless, reply included) with the deciding rule or entry, `cross_check` compares it
with the data-plane probe, `eri_supported` says whether a node's type has eRDMA.

Secrets (AccessKey secret, STS token) are registered with `redact` when read; every
message leaving this module is scrubbed of them and of request signatures
(`credentials.scrub`, which also says whether credentials are there at all).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pytest_hpcnet.cloud import nacl, secgroup
from pytest_hpcnet.cloud.credentials import (  # noqa: F401 - part of the audit's interface
    NO_CREDENTIALS,
    credentials_available,
    ram_role_available,
    scrub,
    skip_reason,
)
from pytest_hpcnet.cloud.readers import AliyunReader, CloudReadError, InstanceInfo
from pytest_hpcnet.cloud.rules import (
    CloudModelError,
    Direction,
    Flow,
    NetworkAcl,
    Protocol,
    SecurityGroup,
)
from pytest_hpcnet.probes.metadata import MetadataFacts, parse_metadata
from pytest_hpcnet.redact import register_secret

if TYPE_CHECKING:
    from pytest_hpcnet.campaigns.cluster import Cluster
    from pytest_hpcnet.inventory.bench_settings import CloudSettings
    from pytest_hpcnet.inventory.expectations import Flow as InventoryFlow
    from pytest_hpcnet.probes.ports import Reachability

INSTANCE_ID_BATCH = 100  # DescribeInstances InstanceIds takes up to 100 ids
LINUX_EPHEMERAL_PORTS = (32768, 60999)
"""Client ports the stateless ACLs must let replies back to (Linux ip_local_port_range)."""
RAM_ACTIONS = (
    "ecs:DescribeInstances",
    "ecs:DescribeInstanceTypes",
    "ecs:DescribeSecurityGroupAttribute",
    "vpc:DescribeVSwitchAttributes",
    "vpc:DescribeNetworkAclAttributes",
)
"""Everything the audit calls (all read-only)."""


class AuditError(RuntimeError):
    """A control plane that cannot be judged (one line)."""


# -- reading -------------------------------------------------------------------------------


class AuditReader(AliyunReader):
    """`AliyunReader` plus the vSwitch -> network ACL binding (DescribeVSwitchAttributes)."""

    def vswitch_network_acl_id(self, vswitch_id: str) -> str | None:
        """The id of the network ACL bound to `vswitch_id`, None when it has none."""
        from alibabacloud_vpc20160428 import models

        request = models.DescribeVSwitchAttributesRequest(
            region_id=self.region_id, v_switch_id=vswitch_id
        )
        body = self._call(
            "vpc:DescribeVSwitchAttributes",
            lambda: self._vpc.describe_vswitch_attributes(request),
        ).body.to_map()
        return str(body.get("NetworkAclId") or "").strip() or None


def open_reader(
    region_id: str, settings: CloudSettings, credential: Any = None, **options: Any
) -> AuditReader:
    """A reader for `region_id` with the inventory's endpoints (`options`: the reader's
    retry settings); the credential's secret and token are registered before any call."""
    if credential is None:
        from alibabacloud_credentials.client import Client as CredentialClient

        credential = CredentialClient()
    try:
        model = credential.get_credential()
    except Exception as error:  # the SDK raises bare exceptions from its providers
        first = (str(error).splitlines() or [type(error).__name__])[0]
        raise CloudReadError(scrub(f"cannot load Alibaba Cloud credentials: {first}")) from None
    register_secret(getattr(model, "access_key_secret", None))
    register_secret(getattr(model, "security_token", None))
    return AuditReader(
        region_id,
        credential=credential,
        ecs_endpoint=settings.ecs_endpoint,
        vpc_endpoint=settings.vpc_endpoint,
        protocol=settings.protocol,
        **options,
    )


@dataclass(frozen=True)
class NodeLocator:
    """How to find one node in the control plane (from its metadata and address)."""

    name: str
    instance_id: str | None = None
    private_ip: str | None = None
    vpc_id: str | None = None


@dataclass(frozen=True)
class NodeCloud:
    """One node as the control plane knows it; `problem` says why it is not matched."""

    name: str
    instance: InstanceInfo | None = None
    address: str | None = None
    matched_by: str = ""
    problem: str | None = None

    @property
    def vswitch_id(self) -> str | None:
        return self.instance.vswitch_id if self.instance else None

    @property
    def security_group_ids(self) -> tuple[str, ...]:
        return self.instance.security_group_ids if self.instance else ()


@dataclass(frozen=True)
class ControlPlane:
    """Everything the audit read, gathered once; judged by the functions below."""

    region_id: str
    nodes: dict[str, NodeCloud]
    eri: dict[str, int] = field(default_factory=dict)
    groups: dict[str, SecurityGroup] = field(default_factory=dict)
    missing_groups: dict[str, str] = field(default_factory=dict)
    """Group id -> why it could not be read (deleted, another region)."""
    acls: tuple[NetworkAcl, ...] = ()

    def node(self, name: str) -> NodeCloud:
        """A node by name (an unmatched placeholder for a node not in the snapshot)."""
        return self.nodes.get(name) or NodeCloud(name, problem=f"{name}: not in the snapshot")

    def gaps(self, *names: str) -> list[str]:
        """One line per reason these nodes cannot be judged (unmatched, unreadable group)."""
        found = []
        for name in names:
            node = self.node(name)
            if node.problem:
                found.append(node.problem)
                continue
            for group_id in node.security_group_ids:
                if group_id in self.missing_groups:
                    found.append(
                        f"{name}: security group {group_id} of {node.instance.instance_id} "
                        f"could not be read ({self.missing_groups[group_id]})"
                    )
        return found


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _match_instances(reader: AuditReader, locators: Sequence[NodeLocator]) -> dict[str, NodeCloud]:
    ids = sorted({loc.instance_id for loc in locators if loc.instance_id})
    by_id: dict[str, InstanceInfo] = {}
    for batch in _chunks(ids, INSTANCE_ID_BATCH):
        by_id.update({info.instance_id: info for info in reader.instances(instance_ids=batch)})
    by_ip: dict[str, list[InstanceInfo]] = {}
    need_ip = [loc for loc in locators if not loc.instance_id and loc.private_ip]
    if need_ip:
        vpcs = {loc.vpc_id for loc in need_ip} | {info.vpc_id for info in by_id.values()}
        vpcs.discard(None)
        listing = reader.instances(vpc_id=vpcs.pop() if len(vpcs) == 1 else None)
        for info in listing:
            for ip in info.private_ips:
                by_ip.setdefault(ip, []).append(info)
    region = reader.region_id
    nodes: dict[str, NodeCloud] = {}
    for loc in locators:
        if loc.instance_id:
            info = by_id.get(loc.instance_id)
            if info is None:
                nodes[loc.name] = NodeCloud(
                    loc.name,
                    problem=f"{loc.name}: instance {loc.instance_id} (from its metadata) not found "
                    f"by ecs:DescribeInstances in region {region}: is cluster.region right?",
                )
                continue
            matched_by = f"instance id {loc.instance_id}"
        elif loc.private_ip:
            candidates = by_ip.get(loc.private_ip, [])
            if len(candidates) != 1:
                count = "no instance" if not candidates else f"{len(candidates)} instances"
                nodes[loc.name] = NodeCloud(
                    loc.name,
                    problem=f"{loc.name}: no instance id from its metadata, and {count} with "
                    f"private IP {loc.private_ip} in region {region}",
                )
                continue
            info = candidates[0]
            matched_by = f"private IP {loc.private_ip}"
        else:
            nodes[loc.name] = NodeCloud(
                loc.name, problem=f"{loc.name}: neither instance id nor private IP known"
            )
            continue
        address = loc.private_ip if loc.private_ip in info.private_ips else None
        address = address or (info.private_ips[0] if info.private_ips else None)
        if address is None:
            nodes[loc.name] = NodeCloud(
                loc.name, info, problem=f"{loc.name}: {info.instance_id} has no private IP"
            )
            continue
        nodes[loc.name] = NodeCloud(loc.name, info, address, matched_by)
    return nodes


def _read_groups(
    reader: AuditReader, group_ids: Iterable[str]
) -> tuple[dict[str, SecurityGroup], dict[str, str]]:
    groups: dict[str, SecurityGroup] = {}
    missing: dict[str, str] = {}
    for group_id in sorted(set(group_ids)):
        try:
            groups[group_id] = reader.security_group(group_id)
        except CloudReadError as error:
            if getattr(error, "ram_action", None):
                raise
            missing[group_id] = scrub(str(error))
    return groups, missing


def _read_acls(
    reader: AuditReader, acl_ids: Sequence[str], vswitch_ids: Iterable[str]
) -> tuple[NetworkAcl, ...]:
    bound: dict[str, set[str]] = {}
    if not acl_ids:
        for vswitch_id in sorted(set(vswitch_ids)):
            acl_id = reader.vswitch_network_acl_id(vswitch_id)
            if acl_id:
                bound.setdefault(acl_id, set()).add(vswitch_id)
    acls = []
    for acl_id in list(acl_ids) or sorted(bound):
        acl = reader.network_acl(acl_id)
        extra = bound.get(acl_id, set()) - set(acl.vswitch_ids)
        if extra:  # the vSwitch says it is bound even if the ACL's resources lag behind
            acl = replace(acl, vswitch_ids=(*acl.vswitch_ids, *sorted(extra)))
        acls.append(acl)
    return tuple(acls)


def gather(
    reader: AuditReader, locators: Sequence[NodeLocator], network_acl_ids: Sequence[str] = ()
) -> ControlPlane:
    """Read the control plane of these nodes (raises CloudReadError, scrubbed, on failure)."""
    try:
        nodes = _match_instances(reader, locators)
        matched = [node.instance for node in nodes.values() if node.instance]
        eri = reader.eri_quantity({info.instance_type for info in matched if info.instance_type})
        groups, missing = _read_groups(
            reader, (g for info in matched for g in info.security_group_ids)
        )
        vswitches = {info.vswitch_id for info in matched if info.vswitch_id}
        acls = _read_acls(reader, network_acl_ids, vswitches)
    except CloudReadError as error:
        error.args = (scrub(str(error)),)
        raise
    except CloudModelError as error:
        raise CloudReadError(scrub(f"unexpected API answer: {error}")) from None
    return ControlPlane(reader.region_id, nodes, eri, groups, missing, acls)


def _is_ip(text: str | None) -> bool:
    try:
        ipaddress.ip_address(text or "")
    except ValueError:
        return False
    return True


def locators(cluster: Cluster) -> list[NodeLocator]:
    """Each node's instance id, private IP and VPC from its facts (metadata, addresses);
    an unreachable node falls back to its inventory host if that is an IP."""
    facts = cluster.gather_facts()
    found = []
    for node in cluster.nodes:
        node_facts = facts.get(node.name)
        section = node_facts.sections.get("metadata") if node_facts else None
        metadata = parse_metadata(section.text) if section else MetadataFacts()
        ip = metadata.private_ipv4 or (cluster.data_address(node.name) if node_facts else None)
        if not ip and _is_ip(node.host):
            ip = node.host
        found.append(NodeLocator(node.name, metadata.instance_id, ip, metadata.vpc_id))
    return found


def snapshot(cluster: Cluster, reader: AuditReader | None = None) -> ControlPlane:
    """The control plane of the cluster's nodes, read with the inventory's `cloud:` settings."""
    settings = cluster.inventory.cloud
    if reader is None:
        reader = open_reader(cluster.inventory.cluster.region, settings)
    return gather(reader, locators(cluster), settings.network_acl_ids)


# -- judging -------------------------------------------------------------------------------


def _name(node: Any) -> str:
    return node if isinstance(node, str) else node.name


def _sg_side(decision: secgroup.Decision, node: str) -> str:
    where = "egress at" if decision.direction is Direction.EGRESS else "ingress at"
    rule = f"rule {decision.rule}" if decision.by_rule else str(decision.rule)
    return f"{rule} ({where} {node})"


def _acl_side(decision: nacl.AclDecision, node: str) -> str:
    where = "egress from" if decision.direction is Direction.EGRESS else "ingress to"
    return f"{decision.reason} ({where} {node}'s vSwitch)"


@dataclass(frozen=True)
class PortDecision:
    """Both layers' verdict on `proto/port` from `source` to `target`."""

    source: str
    target: str
    proto: str
    port: int
    security_groups: secgroup.FlowDecision | None = None
    network_acls: nacl.AclFlowDecision | None = None
    reply: nacl.ReplyDecision | None = None
    unknown: str | None = None

    @property
    def label(self) -> str:
        return f"{self.proto}/{self.port} {self.source}->{self.target}"

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
            denials.append(f"network ACL {reply}")
        return "denied by " + "; ".join(denials)

    def __str__(self) -> str:
        return f"{self.label}: {self.deciding()}"


def _flow(plane: ControlPlane, source: str, target: str, proto: str, port: int) -> Flow:
    src, dst = plane.node(source), plane.node(target)
    return Flow(
        src_ip=src.address,
        dst_ip=dst.address,
        protocol=Protocol.parse(proto),
        dst_port=port,
        src_groups=frozenset(src.security_group_ids),
        dst_groups=frozenset(dst.security_group_ids),
    )


def port_decision(
    plane: ControlPlane, src_node: Any, dst_node: Any, proto: str, port: int
) -> PortDecision:
    """Security groups (egress at the source, ingress at the target) and network ACLs
    (source vSwitch egress, target vSwitch ingress, reply to Linux ephemeral ports) on
    one required port; `unknown` says why it cannot be judged."""
    source, target = _name(src_node), _name(dst_node)
    base = PortDecision(source, target, proto.lower(), port)
    gaps = plane.gaps(source, target)
    if gaps:
        return replace(base, unknown="; ".join(gaps))
    flow = _flow(plane, source, target, proto, port)
    src_vsw, dst_vsw = plane.node(source).vswitch_id, plane.node(target).vswitch_id
    try:
        sg = secgroup.evaluate_flow(flow, plane.groups)
        acl = nacl.evaluate_flow(flow, src_vsw, dst_vsw, plane.acls)
        reply = nacl.evaluate_reply(
            flow, src_vsw, dst_vsw, plane.acls, ephemeral_ports=LINUX_EPHEMERAL_PORTS
        )
    except (secgroup.SecurityGroupConfigError, nacl.NetworkAclConfigError) as error:
        return replace(base, unknown=str(error))
    return replace(base, security_groups=sg, network_acls=acl, reply=reply)


def flow_decision(plane: ControlPlane, flow: InventoryFlow) -> PortDecision:
    """`port_decision` of one inventory ACL flow (`expect.flows.allow`/`deny`)."""
    return port_decision(plane, flow.source, flow.target, flow.protocol, flow.port)


def cross_check(
    decision: PortDecision, probe: Reachability | None, listening: bool = True
) -> str | None:
    """One line naming both facts when the control plane and the data-plane probe disagree;
    None when they agree or one side cannot say (undetermined, not tried, no listener)."""
    if decision.unknown is not None or probe is None:
        return None
    seen = f"data plane: {probe.proto}/{probe.port} {probe.outcome}"
    if decision.accepted and not probe.open and listening:
        return (
            f"{decision.label}: control plane: {decision.deciding()}; {seen}: "
            "something outside the rules is in the path, or the probe is wrong"
        )
    if decision.denied and probe.open:
        return (
            f"{decision.label}: control plane: {decision.deciding()}; {seen}: the cloud does not "
            "enforce these rules (stale snapshot, another ENI or group), or the probe is wrong"
        )
    return None


@dataclass(frozen=True)
class EriSupport:
    """Whether a node's instance type has elastic RDMA interfaces (`EriQuantity`)."""

    node: str
    instance_type: str | None = None
    quantity: int | None = None
    problem: str | None = None

    @property
    def supported(self) -> bool:
        return self.quantity is not None and self.quantity > 0


def eri_supported(plane: ControlPlane, node: Any) -> EriSupport:
    """The node's instance type and its EriQuantity (DescribeInstanceTypes)."""
    name = _name(node)
    cloud = plane.node(name)
    if cloud.instance is None:
        return EriSupport(name, problem=cloud.problem)
    kind = cloud.instance.instance_type
    if kind not in plane.eri:
        problem = f"{name}: instance type {kind} unknown to ecs:DescribeInstanceTypes"
        return EriSupport(name, kind, problem=problem)
    return EriSupport(name, kind, plane.eri[kind])
