"""The control-plane audit: what the cloud's rules say about the cluster's traffic.

`snapshot(cluster)` reads, once per session, the nodes' ECS instances (matched by the
instance id their metadata service gives, else by private IP), every network interface of
those instances (primary and secondary ENIs, ERIs), their instance types' `EriQuantity`,
`CpuCoreCount` and `MemorySize` (one DescribeInstanceTypes answer),
every security group of those interfaces with its type, the prefix lists and port lists
their rules and the ACL entries name, and the network ACLs (the inventory's
`cloud.network_acl_ids`, else those bound to the interfaces' vSwitches). `verdicts` judges
that `ControlPlane` without further calls; its functions are re-exported here.
`eri_supported` says whether a node's type has eRDMA; `eri_attachments` lists a node's ERIs
with their NIC index (`Attachment.NetworkCardIndex`); `type_figures` gives the host
hardware check a node's instance type's vCPUs and memory.

Anything that cannot be read (a deleted group, an unreadable list, a malformed rule) is
kept with its reason and makes the verdicts that need it undetermined, never open.
Secrets (AccessKey secret, STS token) are registered with `redact` when read; every
message leaving this module is scrubbed of them and of request signatures
(`credentials.scrub`, which also says whether credentials are there at all).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_hpcnet.cloud.credentials import (  # noqa: F401 - part of the audit's interface
    NO_CREDENTIALS,
    credentials_available,
    ram_role_available,
    scrub,
    skip_reason,
)
from pytest_hpcnet.cloud.interfaces import NetworkInterface
from pytest_hpcnet.cloud.nacl_model import NetworkAcl
from pytest_hpcnet.cloud.plane import ControlPlane, NodeCloud
from pytest_hpcnet.cloud.readers import AliyunReader, CloudReadError, InstanceInfo
from pytest_hpcnet.cloud.rules import CloudModelError, PortRange
from pytest_hpcnet.cloud.secgroup_model import SecurityGroup
from pytest_hpcnet.cloud.verdicts import (  # noqa: F401 - part of the audit's interface
    LINUX_EPHEMERAL_PORTS,
    FlowDecisions,
    PortDecision,
    cross_check,
    external_verdict,
    flow_verdict,
    not_accepted,
    port_decision,
    required_verdicts,
)
from pytest_hpcnet.probes.metadata import MetadataFacts, parse_metadata
from pytest_hpcnet.redact import register_secret
from pytest_hpcnet.requirements.host_hardware import InstanceTypeFigures

if TYPE_CHECKING:
    from pytest_hpcnet.campaigns.cluster import Cluster
    from pytest_hpcnet.inventory.bench_settings import CloudSettings
    from pytest_hpcnet.inventory.expectations import Flow as InventoryFlow

INSTANCE_ID_BATCH = 100  # DescribeInstances InstanceIds takes up to 100 ids
RAM_ACTIONS = (
    "ecs:DescribeInstances",
    "ecs:DescribeInstanceTypes",
    "ecs:DescribeNetworkInterfaces",
    "ecs:DescribeSecurityGroups",
    "ecs:DescribeSecurityGroupAttribute",
    "ecs:DescribePrefixListAttributes",
    "ecs:DescribePortRangeListEntries",
    "vpc:DescribeVSwitchAttributes",
    "vpc:DescribeNetworkAclAttributes",
)
"""Everything the audit calls (all read-only); docs/cloud-audit.md has the RAM policy."""


class AuditError(RuntimeError):
    """A control plane that cannot be judged (one line)."""


# -- reading -------------------------------------------------------------------------------


class AuditReader(AliyunReader):
    """`AliyunReader` plus the vSwitch -> network ACL binding (DescribeVSwitchAttributes)."""

    def vswitch_network_acl_id(self, vswitch_id: str) -> str | None:
        """The id of the network ACL bound to `vswitch_id`, None when it has none."""
        body = self._rpc(
            "vpc:DescribeVSwitchAttributes", {"RegionId": self.region_id, "VSwitchId": vswitch_id}
        )
        return str(body.get("NetworkAclId") or "").strip() or None


def credential_client(credentials_file: str | None = None) -> Any:
    """The SDK's credential client: the default chain, or the profile of `credentials_file`
    (the SDK's ini format; profile `ALIBABA_CLOUD_PROFILE`, else `default`)."""
    from alibabacloud_credentials.client import Client as CredentialClient

    if not credentials_file:
        return CredentialClient()
    from alibabacloud_credentials.provider import ProfileCredentialsProvider

    path = str(Path(credentials_file).expanduser())
    return CredentialClient(provider=ProfileCredentialsProvider(profile_file=path))


def open_reader(
    region_id: str,
    settings: CloudSettings,
    credential: Any = None,
    reader: type[AuditReader] | None = None,
    **options: Any,
) -> AuditReader:
    """A reader (`reader`, default `AuditReader`) for `region_id` with the inventory's
    endpoints (`options`: the reader's retry settings); the credential's secret and token
    are registered before any call."""
    if credential is None:
        credential = credential_client(settings.credentials_file)
    try:
        model = credential.get_credential()
    except Exception as error:  # the SDK raises bare exceptions from its providers
        first = (str(error).splitlines() or [type(error).__name__])[0]
        raise CloudReadError(scrub(f"cannot load Alibaba Cloud credentials: {first}")) from None
    register_secret(getattr(model, "access_key_secret", None))
    register_secret(getattr(model, "security_token", None))
    return (reader or AuditReader)(
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


def _read_interfaces(reader: AuditReader, nodes: dict[str, NodeCloud]) -> dict[str, NodeCloud]:
    """Each matched node with every ENI of its instance; no interface is a problem."""
    found = {}
    for name, node in nodes.items():
        if node.instance is None or node.problem:
            found[name] = node
            continue
        interfaces = tuple(reader.network_interfaces(node.instance.instance_id))
        problem = None
        if not any(i.role == "primary" for i in interfaces):
            problem = (
                f"{name}: ecs:DescribeNetworkInterfaces returned no primary ENI for "
                f"{node.instance.instance_id}"
            )
        found[name] = replace(node, interfaces=interfaces, problem=problem)
    return found


def _read_groups(
    reader: AuditReader, group_ids: Iterable[str]
) -> tuple[dict[str, SecurityGroup], dict[str, str]]:
    """The groups with their rules and type (DescribeSecurityGroups); a group that cannot
    be read, or whose type the cloud does not tell, is missing with the reason."""
    wanted = sorted(set(group_ids))
    types = reader.security_group_types(wanted) if wanted else {}
    groups: dict[str, SecurityGroup] = {}
    missing: dict[str, str] = {}
    for group_id in wanted:
        try:
            group = reader.security_group(group_id, group_type=types.get(group_id))
            if group_id in types:
                groups[group_id] = group
            else:
                missing[group_id] = "its type is not in the ecs:DescribeSecurityGroups answer"
        except CloudReadError as error:
            if getattr(error, "ram_action", None):
                raise
            missing[group_id] = scrub(str(error))
        except CloudModelError as error:
            missing[group_id] = scrub(
                f"unexpected ecs:DescribeSecurityGroupAttribute answer: {error}"
            )
    return groups, missing


def _read_lists(
    reader: AuditReader, groups: Iterable[SecurityGroup], acls: Iterable[NetworkAcl]
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[PortRange, ...]], dict[str, str]]:
    """The prefix lists and port lists the rules and ACL entries name."""
    prefix_ids: set[str] = set()
    port_ids: set[str] = set()
    for group in groups:
        for rule in group.rules:
            peer = rule.effective_peer()
            if peer is not None and peer.kind == "prefix_list":
                prefix_ids.add(str(peer.value))
            if rule.port_range_list_id:
                port_ids.add(rule.port_range_list_id)
    for acl in acls:
        for entry in (*acl.ingress_entries, *acl.egress_entries):
            if entry.prefix_list_id:
                prefix_ids.add(entry.prefix_list_id)
    prefix_lists: dict[str, tuple[str, ...]] = {}
    port_lists: dict[str, tuple[PortRange, ...]] = {}
    missing: dict[str, str] = {}
    for list_id in sorted(prefix_ids):
        try:
            prefix_lists[list_id] = reader.prefix_list(list_id)
        except CloudReadError as error:
            if getattr(error, "ram_action", None):
                raise
            missing[list_id] = scrub(str(error))
        except CloudModelError as error:
            missing[list_id] = scrub(f"unexpected ecs:DescribePrefixListAttributes answer: {error}")
    for list_id in sorted(port_ids):
        try:
            port_lists[list_id] = reader.port_range_list(list_id)
        except CloudReadError as error:
            if getattr(error, "ram_action", None):
                raise
            missing[list_id] = scrub(str(error))
        except CloudModelError as error:
            missing[list_id] = scrub(f"unexpected ecs:DescribePortRangeListEntries answer: {error}")
    return prefix_lists, port_lists, missing


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
        nodes = _read_interfaces(reader, _match_instances(reader, locators))
        matched = [node.instance for node in nodes.values() if node.instance]
        types = reader.instance_types({i.instance_type for i in matched if i.instance_type})
        eri = {name: info.eri_quantity for name, info in types.items()}
        interfaces: list[NetworkInterface] = [i for n in nodes.values() for i in n.interfaces]
        groups, missing = _read_groups(
            reader, (g for i in interfaces for g in i.security_group_ids)
        )
        vswitches = {i.vswitch_id for i in interfaces if i.vswitch_id}
        acls = _read_acls(reader, network_acl_ids, vswitches)
        prefix_lists, port_lists, missing_lists = _read_lists(reader, groups.values(), acls)
    except CloudReadError as error:
        error.args = (scrub(str(error)),)
        raise
    except CloudModelError as error:
        raise CloudReadError(scrub(f"unexpected API answer: {error}")) from None
    return ControlPlane(
        reader.region_id,
        nodes,
        eri,
        groups,
        missing,
        acls,
        prefix_lists=prefix_lists,
        port_lists=port_lists,
        missing_lists=missing_lists,
        instance_types=types,
    )


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
        section = node_facts.whole("metadata") if node_facts else None
        metadata = parse_metadata(section) if section is not None else MetadataFacts()
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


# -- judging ------------------------------------------------------------------------------


def flow_decision(plane: ControlPlane, flow: InventoryFlow) -> FlowDecisions:
    """The verdict on one inventory flow (`expect.flows.allow`/`deny`) between two nodes."""
    return port_decision(plane, flow.source, flow.target, flow.protocol, flow.port)


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
    name = node if isinstance(node, str) else node.name
    cloud = plane.node(name)
    if cloud.instance is None:
        return EriSupport(name, problem=cloud.problem)
    kind = cloud.instance.instance_type
    if kind not in plane.eri:
        problem = f"{name}: instance type {kind} unknown to ecs:DescribeInstanceTypes"
        return EriSupport(name, kind, problem=problem)
    return EriSupport(name, kind, plane.eri[kind])


def type_figures(plane: ControlPlane | None, name: str) -> InstanceTypeFigures | None:
    """The vCPUs and memory of the node's instance type as DescribeInstanceTypes gave them
    (None without a snapshot, an unmatched node or a type the answer lacks)."""
    cloud = plane.nodes.get(name) if plane is not None else None
    if cloud is None or cloud.instance is None:
        return None
    kind = cloud.instance.instance_type
    info = plane.instance_types.get(kind)  # type: ignore[union-attr]
    if info is None:
        return None
    return InstanceTypeFigures(kind, info.cpus, info.memory_gib)


def eri_attachments(plane: ControlPlane, name: str) -> list[tuple[str, int | None]]:
    """The node's ERIs (HighPerformance ENIs) as (ENI id, NetworkCardIndex or None)."""
    return [
        (i.interface_id, i.network_card_index)
        for i in plane.node(name).interfaces
        if i.role == "eri"
    ]


def eri_nic_indexes(plane: ControlPlane) -> dict[str, tuple[int, ...]]:
    """Each matched node's ERI NIC indexes, for the nodes whose every ERI reports one."""
    found = {}
    for name, node in plane.nodes.items():
        eris = eri_attachments(plane, name)
        if node.instance is not None and eris and all(i is not None for _, i in eris):
            found[name] = tuple(int(i) for _, i in eris)  # type: ignore[arg-type]
    return found
