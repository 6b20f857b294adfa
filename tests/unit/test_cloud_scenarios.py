"""Issue 14: the eight scenarios where the audit disagreed with Alibaba Cloud's own rules.

Each test names its scenario; each failed on 8ddee07 (before the fix).
"""

from __future__ import annotations

import pytest

pytest.importorskip("alibabacloud_ecs20140526")
pytest.importorskip("alibabacloud_vpc20160428")

from alibabacloud_credentials.client import Client as CredentialClient
from alibabacloud_credentials.models import Config as CredentialConfig

from pytest_hpcnet.cloud import audit, nacl, secgroup
from pytest_hpcnet.cloud.nacl_model import network_acl_from_api
from pytest_hpcnet.cloud.rules import Direction, Flow
from pytest_hpcnet.cloud.secgroup_model import security_group_from_api
from pytest_hpcnet.inventory.bench_settings import CloudSettings
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.lab.cloud_api import CloudWorld, FakeAliyun, instance_item, permission
from pytest_hpcnet.probes.ports import Reachability
from pytest_hpcnet.redact import clear_secrets

REGION = "cn-hangzhou"
GPU = "ecs.ebmgn8is.32xlarge"
SUBNET = "10.0.0.0/16"
LOCATORS = [
    audit.NodeLocator("gpu1", "i-gpu1", "10.0.1.1", "vpc-1"),
    audit.NodeLocator("gpu2", "i-gpu2", "10.0.1.2", "vpc-1"),
]


def base_world() -> CloudWorld:
    """Two GPU nodes in one vSwitch and one basic group accepting TCP/UDP from the VPC."""
    w = CloudWorld(region_id=REGION)
    w.instances = [
        instance_item("i-gpu1", GPU, "10.0.1.1", ["sg-gpu"], vswitch_id="vsw-a"),
        instance_item("i-gpu2", GPU, "10.0.1.2", ["sg-gpu"], vswitch_id="vsw-a"),
    ]
    w.eri = {GPU: 2}
    w.add_group(
        "sg-gpu",
        [
            permission("ingress", "TCP", "1/65535", SUBNET, priority=10, rule_id="sgr-tcp"),
            permission("ingress", "UDP", "1/65535", SUBNET, priority=10, rule_id="sgr-udp"),
        ],
    )
    return w


def gather(w: CloudWorld, locators: list[audit.NodeLocator] | None = None) -> audit.ControlPlane:
    """The control plane of `w` (default nodes gpu1, gpu2) read through the fake ECS/VPC API."""
    with FakeAliyun(w) as fake:
        credential = CredentialClient(
            CredentialConfig(type="access_key", access_key_id="ak", access_key_secret="sk-x")
        )
        settings = CloudSettings(
            ecs_endpoint=fake.endpoint, vpc_endpoint=fake.endpoint, protocol="http"
        )
        reader = audit.open_reader(
            REGION, settings, credential, attempts=2, wait_multiplier=0, max_wait_seconds=0
        )
        try:
            return audit.gather(reader, LOCATORS if locators is None else locators)
        finally:
            clear_secrets()


# 1 -----------------------------------------------------------------------------------------


def test_scenario1_enterprise_group_type_comes_from_describe_security_groups():
    w = base_world()
    w.add_group(
        "sg-gpu",
        [permission("ingress", "TCP", "1/65535", SUBNET, priority=10, rule_id="sgr-in")],
        inner_access_policy="Accept",  # an enterprise group ignores it
    )
    w.group_types = {"sg-gpu": "enterprise"}
    plane = gather(w)
    assert plane.groups["sg-gpu"].is_enterprise
    decision = audit.port_decision(plane, "gpu1", "gpu2", "tcp", 22)
    assert not decision.accepted
    assert "default egress deny (enterprise security group)" in str(decision)

    w.add_group("sg-gpu", [], inner_access_policy="Accept", group_type="enterprise")
    plane = gather(w)
    decision = audit.port_decision(plane, "gpu1", "gpu2", "tcp", 22)
    assert decision.denied and "inner access" not in str(decision)  # no intra-group access
    assert "default ingress deny (enterprise security group)" in str(decision)

    w.add_group("sg-basic", [])
    w.instances[1]["SecurityGroupIds"]["SecurityGroupId"].append("sg-basic")
    decision = audit.port_decision(gather(w), "gpu1", "gpu2", "tcp", 22)
    assert not decision.accepted and not decision.denied  # undetermined, never open
    assert "basic and enterprise security groups mixed" in decision.unknown


# 2 -----------------------------------------------------------------------------------------


def test_scenario2_cidr_wins_over_group_and_group_over_prefix_list():
    group = security_group_from_api(
        {
            "SecurityGroupId": "sg-dst",
            "InnerAccessPolicy": "Drop",
            "Permissions": {
                "Permission": [
                    {
                        "Direction": "ingress",
                        "IpProtocol": "TCP",
                        "PortRange": "22/22",
                        "SourceCidrIp": "10.0.0.0/8",
                        "SourceGroupId": "sg-x",
                        "Policy": "Accept",
                        "Priority": "1",
                    },
                    {
                        "Direction": "ingress",
                        "IpProtocol": "TCP",
                        "PortRange": "80/80",
                        "SourceGroupId": "sg-y",
                        "SourcePrefixListId": "pl-far",
                        "Policy": "Accept",
                        "Priority": "1",
                    },
                ]
            },
        }
    )
    flows = [
        Flow("10.0.1.10", "10.0.2.2", "TCP", 22, src_groups=["sg-y"], dst_groups=["sg-dst"]),
        Flow("10.0.1.10", "10.0.2.2", "TCP", 80, src_groups=["sg-y"], dst_groups=["sg-dst"]),
    ]
    for flow in flows:
        ingress = secgroup.evaluate_side(
            flow, Direction.INGRESS, [group], prefix_lists={"pl-far": ["192.0.2.0/24"]}
        )
        assert ingress.accepted, (flow, ingress)


# 3 -----------------------------------------------------------------------------------------


def test_scenario3_numeric_ip_protocol_is_read_as_iana_number():
    w = base_world()
    w.security_groups["sg-gpu"]["Permissions"].insert(
        0, permission("ingress", "6", "29500/29500", SUBNET, policy="Drop", rule_id="sgr-num")
    )
    plane = gather(w)
    decision = audit.port_decision(plane, "gpu1", "gpu2", "tcp", 29500)
    assert decision.denied and "sgr-num" in str(decision)
    assert audit.port_decision(plane, "gpu1", "gpu2", "tcp", 22).accepted


# 4 -----------------------------------------------------------------------------------------


def test_scenario4_prefix_and_port_lists_are_read_and_unknown_is_never_open():
    w = base_world()
    drop = {
        "Direction": "ingress",
        "IpProtocol": "TCP",
        "PortRange": "1/65535",
        "SourcePrefixListId": "pl-1",
        "Policy": "Drop",
        "Priority": "1",
        "SecurityGroupRuleId": "sgr-pl-drop",
    }
    w.security_groups["sg-gpu"]["Permissions"].insert(0, drop)
    w.prefix_lists = {"pl-1": ["10.0.1.0/24"]}
    plane = gather(w)
    decision = audit.port_decision(plane, "gpu1", "gpu2", "tcp", 22)
    assert decision.denied and "sgr-pl-drop" in str(decision)

    by_list = {
        "Direction": "ingress",
        "IpProtocol": "TCP",
        "PortRangeListId": "prl-gone",
        "SourceCidrIp": SUBNET,
        "Policy": "Drop",
        "Priority": "1",
    }
    w = base_world()
    w.security_groups["sg-gpu"]["Permissions"].insert(0, by_list)
    plane = gather(w)
    verdict = audit.port_decision(plane, "gpu1", "gpu2", "tcp", 22)
    assert not verdict.accepted and not verdict.denied
    assert "prl-gone" in verdict.unknown
    failures = audit.not_accepted([verdict])
    assert len(failures) == 1 and "prl-gone" in failures[0] and "\n" not in failures[0]


# 5 -----------------------------------------------------------------------------------------


def test_scenario5_network_acl_entries_with_prefix_lists_and_ipv6():
    acl = network_acl_from_api(
        {
            "NetworkAclAttribute": {
                "NetworkAclId": "nacl-1",
                "IngressAclEntries": {
                    "IngressAclEntry": [
                        {
                            "Policy": "drop",
                            "Protocol": "tcp",
                            "Port": "22/22",
                            "SourceCidrIp": "pl-bastions",
                            "IpVersion": "IPV4",
                        },
                        {
                            "Policy": "accept",
                            "Protocol": "all",
                            "Port": "-1/-1",
                            "SourceCidrIp": "::/0",
                            "IpVersion": "IPV6",
                        },
                    ]
                },
                "EgressAclEntries": {"EgressAclEntry": []},
                "Resources": {"Resource": [{"ResourceId": "vsw-b", "ResourceType": "VSwitch"}]},
            }
        }
    )
    first, second = acl.ingress_entries
    assert first.prefix_list_id == "pl-bastions" and first.cidr is None
    assert second.cidr.version == 6
    lists = {"pl-bastions": ["10.0.9.0/24"]}
    ssh = Flow("10.0.9.5", "10.0.2.2", "TCP", 22)
    decision = nacl.evaluate_flow(ssh, None, "vsw-b", [acl], prefix_lists=lists)
    assert not decision.accepted and "pl-bastions" in str(decision)
    v6 = Flow("2001:db8::5", "2001:db8::6", "TCP", 22)
    assert nacl.evaluate_flow(v6, None, "vsw-b", [acl], prefix_lists=lists).accepted


# 6 -----------------------------------------------------------------------------------------


def test_scenario6_every_interface_is_audited_and_an_eri_in_another_group_is_caught():
    w = base_world()
    w.add_group("sg-eri", [])  # no ingress rule: basic default deny
    w.network_interfaces = [
        {
            "NetworkInterfaceId": "eni-eri2",
            "InstanceId": "i-gpu2",
            "Type": "Secondary",
            "NetworkInterfaceTrafficMode": "HighPerformance",
            "PrivateIpAddress": "10.0.1.102",
            "PrivateIpSets": {
                "PrivateIpSet": [{"PrivateIpAddress": "10.0.1.102", "Primary": True}]
            },
            "SecurityGroupIds": {"SecurityGroupId": ["sg-eri"]},
            "VSwitchId": "vsw-a",
            "VpcId": "vpc-1",
            "Status": "InUse",
        },
        {
            "NetworkInterfaceId": "eni-eri1",
            "InstanceId": "i-gpu1",
            "Type": "Secondary",
            "NetworkInterfaceTrafficMode": "HighPerformance",
            "PrivateIpAddress": "10.0.1.101",
            "PrivateIpSets": {
                "PrivateIpSet": [{"PrivateIpAddress": "10.0.1.101", "Primary": True}]
            },
            "SecurityGroupIds": {"SecurityGroupId": ["sg-gpu"]},
            "VSwitchId": "vsw-a",
            "VpcId": "vpc-1",
            "Status": "InUse",
        },
    ]
    plane = gather(w)
    decision = audit.port_decision(plane, "gpu1", "gpu2", "tcp", 29500)
    assert not decision.accepted
    text = str(decision)
    assert "eni-eri2" in text and "default ingress deny" in text
    # The probe cross-check compares the interface pair the probe crossed.
    opened = Reachability("tcp", 29500, "open")
    assert audit.cross_check(decision, opened, addresses=("10.0.1.1", "10.0.1.2")) is None
    found = audit.cross_check(decision, opened, addresses=("10.0.1.101", "10.0.1.102"))
    assert found and "eni-eri2" in found and "data plane: tcp/29500 open" in found
    lost = audit.cross_check(decision, opened, addresses=("10.0.1.1", "10.9.9.9"))
    assert lost and "on no pair of interfaces" in lost


# 7 -----------------------------------------------------------------------------------------


def test_scenario7_required_flows_match_the_traffic_and_say_documented_or_inferred():
    required = Expectations().cloud.required_flows
    by_ports = {(flow.protocol, flow.ports): flow for flow in required}
    assert ("tcp", "1-65535") in by_ports and ("tcp", "30608-30623") in by_ports
    assert all(flow.basis in ("documented", "inferred") and flow.source for flow in required)
    assert by_ports[("tcp", "30608-30623")].basis == "inferred"

    w = base_world()
    w.add_group(
        "sg-gpu",
        [
            permission("ingress", "TCP", "22/22", SUBNET, priority=10),
            permission("ingress", "TCP", "18515/18515", SUBNET, priority=10),
            permission("ingress", "TCP", "29500/29510", SUBNET, priority=10),
            permission("ingress", "UDP", "4791/4791", SUBNET, priority=10),
        ],
    )
    plane = gather(w)
    verdicts = audit.required_verdicts(plane, "gpu1", "gpu2", required)
    failures = audit.not_accepted(verdicts)
    assert any("tcp/1-65535" in line and "ports 1-21" in line for line in failures), failures


# 8 -----------------------------------------------------------------------------------------


def test_scenario8_bastion_flows_are_declared_with_an_address_and_judged():
    settings = CloudSettings(
        external_flows=[
            {"name": "bastion", "address": "10.0.9.50", "target": "gpu1", "port": 22},
            {
                "name": "internet",
                "address": "198.51.100.7",
                "target": "gpu1",
                "port": 22,
                "expect": "deny",
            },
        ]
    )
    plane = gather(base_world())
    bastion, internet = (audit.external_verdict(plane, flow) for flow in settings.external_flows)
    assert bastion.accepted, bastion
    assert internet.denied and "default ingress deny" in str(internet)
