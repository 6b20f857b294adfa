"""The lab's control plane as the ECS and VPC APIs tell it, built from the lab's own state.

`lab_world(state)` is what `hpcnet lab up` serves (`cloud_api.py`): one ECS instance per
node (`i-lab00001`.., type `ecs.hpcnet-lab.emulated` with `EriQuantity` 2), its primary ENI
on eth0 (the id, address and vSwitch its metadata service gives), an ERI per eRDMA device
with its NIC index (erdma_0 shares eth0's address on index 0; with `--eris 2`, eth1's
secondary ENI is erdma_1's ERI on index 1, in vsw-lab0002), one security group
`sg-lab0001`, and a network ACL `nacl-lab0001` on both vSwitches that lets everything pass.

The group says what the nodes' iptables do (`firewall.py`): TCP and UDP from the lab VPC
accepted at priority 10 (`sgr-lab-tcp-1-65535`, `sgr-lab-udp-1-65535`); each baseline ACL
drop (`firewall.acl_denials`) a quintuple Drop rule at priority 5 from the source node's
addresses to the target node's; and each console fault of a node (`sg-drop`, `sg-block`:
`faults.py`) a Drop rule at priority 1 for its ports at that node (`sgr-lab-fault-...`);
`nic-index` attaches every ERI of the node on one NIC index.
Rebuilt from lab.json on every request, so a fault applies at once.
"""

from __future__ import annotations

from pytest_hpcnet.lab import firewall, host_view
from pytest_hpcnet.lab.cloud_api import (
    CloudWorld,
    instance_item,
    network_interface_item,
    permission,
)
from pytest_hpcnet.lab.state import (
    BRIDGE_ADDRESS,
    SECONDARY_VSWITCH,
    LabNode,
    LabState,
)

GROUP = "sg-lab0001"
NETWORK_ACL = "nacl-lab0001"
VPC_CIDR = "198.18.0.0/15"
"""The lab VPC (both vSwitches' /24s), as the metadata service tells it."""
ERI_QUANTITY = 2
"""`EriQuantity` of the lab's instance type: `lab up --eris 2` gives each node two."""
CONTROLLER = BRIDGE_ADDRESS
"""Where the suite's SSH comes from: the host's own address on the lab bridge."""
CONSOLE_FAULTS = ("sg-drop", "sg-block")
"""Node faults that put a Drop rule in the group (`sg-block` also blocks in iptables)."""


def eni_id(node: LabNode, nic: int) -> str:
    """The ENI id the node's metadata gives for eth`nic` (`metadata_server.interface_values`)."""
    return f"eni-lab{node.name[4:]}{nic}"


def eri_id(node: LabNode) -> str:
    """The ERI of erdma_0, on eth0 (the lab has one netdev for the primary ENI and it)."""
    return f"eri-lab{node.name[4:]}0"


def addresses(state: LabState, node: LabNode) -> list[str]:
    """The node's private addresses the cloud lists: eth0's, and eth1's with two ERIs."""
    found = [node.address]
    if state.eris == 2 and node.secondary_address:
        found.append(node.secondary_address)
    return found


def _interfaces(state: LabState, node: LabNode) -> list[dict]:
    common = {"vpc_id": state.vpc_id}
    shared = node.faults.get("nic-index")
    card = int(shared) if shared else None
    found = [
        network_interface_item(
            eni_id(node, 0),
            node.instance_id,
            node.address,
            [GROUP],
            vswitch_id=node.vswitch_id,
            kind="Primary",
            network_card_index=0,
            **common,
        ),
        network_interface_item(
            eri_id(node),
            node.instance_id,
            node.address,
            [GROUP],
            vswitch_id=node.vswitch_id,
            traffic_mode="HighPerformance",
            network_card_index=0 if card is None else card,
            **common,
        ),
    ]
    if state.eris == 2 and node.secondary_address:
        found.append(
            network_interface_item(
                eni_id(node, 1),
                node.instance_id,
                node.secondary_address,
                [GROUP],
                vswitch_id=SECONDARY_VSWITCH,
                traffic_mode="HighPerformance",
                network_card_index=1 if card is None else card,
                **common,
            )
        )
    return found


def fault_rule_id(node: LabNode, proto: str, ports: str) -> str:
    """The id of the Drop rule a console fault puts in the group (`tcp`, `29500` or `1-9`)."""
    return f"sgr-lab-fault-{node.name}-{proto}-{ports}"


def console_rules(state: LabState) -> list[dict]:
    """The Drop rules of the nodes' console faults (`sg-drop:tcp/29500`, `sg-block:...`)."""
    rules = []
    for node in state.nodes:
        for fault_id in node.faults:
            kind, _, spec = fault_id.partition(":")
            if kind not in CONSOLE_FAULTS:
                continue
            proto, ports, _ = firewall.parse_fault_target(spec)
            first, _, last = ports.partition(":")
            shown = f"{first}-{last}" if last else first
            for address in addresses(state, node):
                rules.append(
                    permission(
                        "ingress",
                        proto.upper(),
                        f"{first}/{last or first}",
                        "0.0.0.0/0",
                        policy="Drop",
                        priority=1,
                        local_cidr=f"{address}/32",
                        rule_id=fault_rule_id(node, proto, shown),
                    )
                )
    return rules


def group_rules(state: LabState) -> list[dict]:
    """`sg-lab0001`'s rules: console faults, the baseline ACL's drops, the VPC accepts."""
    by_name = {node.name: node for node in state.nodes}
    rules = console_rules(state)
    for denial in firewall.acl_denials(state):
        source, target = by_name[denial.source], by_name[denial.target]
        for peer in addresses(state, source):
            for local in addresses(state, target):
                rules.append(
                    permission(
                        "ingress",
                        denial.proto.upper(),
                        f"{denial.port}/{denial.port}",
                        f"{peer}/32",
                        policy="Drop",
                        priority=5,
                        local_cidr=f"{local}/32",
                        rule_id=f"sgr-lab-acl-{denial.proto}-{denial.port}",
                    )
                )
    rules += [
        permission(
            "ingress", "TCP", "22/22", f"{CONTROLLER}/32", priority=10, rule_id="sgr-lab-ssh"
        ),
        *(
            permission(
                "ingress",
                proto,
                "1/65535",
                VPC_CIDR,
                priority=10,
                rule_id=f"sgr-lab-{proto.lower()}-1-65535",
            )
            for proto in ("TCP", "UDP")
        ),
        permission("ingress", "ICMP", "-1/-1", VPC_CIDR, priority=10, rule_id="sgr-lab-icmp"),
    ]
    return rules


def _allow_all(direction: str) -> dict:
    return {
        "NetworkAclEntryId": f"nae-lab-{direction}",
        "NetworkAclEntryName": f"lab-{direction}",
        "Policy": "accept",
        "Protocol": "all",
        "Port": "-1/-1",
        ("SourceCidrIp" if direction == "ingress" else "DestinationCidrIp"): "0.0.0.0/0",
        "EntryType": "custom",
        "IpVersion": "IPV4",
    }


def lab_world(state: LabState) -> CloudWorld:
    """The lab as DescribeInstances & co. tell it (see the module's docstring)."""
    world = CloudWorld(region_id=state.region_id)
    vswitches = sorted({node.vswitch_id for node in state.nodes} | {SECONDARY_VSWITCH})
    for node in state.nodes:
        world.instances.append(
            instance_item(
                node.instance_id,
                node.instance_type,
                node.address,
                [GROUP],
                vpc_id=state.vpc_id,
                vswitch_id=node.vswitch_id,
            )
        )
        world.eri[node.instance_type] = ERI_QUANTITY
        world.type_specs[node.instance_type] = dict(host_view.INSTANCE_TYPE_SPECS)
        world.network_interfaces += _interfaces(state, node)
    world.add_group(GROUP, group_rules(state), inner_access_policy="Drop")
    world.network_acls[NETWORK_ACL] = {
        "NetworkAclName": "hpcnet-lab",
        "VpcId": state.vpc_id,
        "Status": "Available",
        "IngressAclEntries": {"IngressAclEntry": [_allow_all("ingress")]},
        "EgressAclEntries": {"EgressAclEntry": [_allow_all("egress")]},
        "Resources": {
            "Resource": [
                {"ResourceId": v, "ResourceType": "VSwitch", "Status": "BINDED"} for v in vswitches
            ]
        },
    }
    world.vswitch_acls = {v: NETWORK_ACL for v in vswitches}
    return world
