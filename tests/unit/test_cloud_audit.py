"""The control-plane audit against the fake ECS/VPC API on 127.0.0.1 (documented shapes)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("alibabacloud_ecs20140526")
pytest.importorskip("alibabacloud_vpc20160428")
pytest.importorskip("alibabacloud_credentials")

from alibabacloud_credentials.client import Client as CredentialClient
from alibabacloud_credentials.models import Config as CredentialConfig

from pytest_hpcnet.cloud import audit, credentials
from pytest_hpcnet.cloud.audit import NodeLocator
from pytest_hpcnet.cloud.readers import CloudPermissionError, CloudReadError
from pytest_hpcnet.inventory.bench_settings import CloudSettings
from pytest_hpcnet.inventory.expectations import Flow as InventoryFlow
from pytest_hpcnet.lab.cloud_api import (
    CloudWorld,
    FakeAliyun,
    error,
    instance_item,
    network_interface_item,
    permission,
)
from pytest_hpcnet.probes.ports import Reachability
from pytest_hpcnet.redact import clear_secrets, redact

REGION = "cn-hangzhou"
GPU_TYPE = "ecs.ebmgn8is.32xlarge"
SECRET = "sk-unit-very-secret-42"
SUBNET = "10.0.0.0/16"
REQUIRED = [("tcp", 22), ("tcp", 18515), ("tcp", 29500), ("udp", 4791)]


def accepting_rules() -> list[dict]:
    return [
        permission("ingress", "TCP", "22/22", SUBNET, priority=10, rule_id="sgr-ssh"),
        permission("ingress", "TCP", "18515/18515", SUBNET, priority=10, rule_id="sgr-perftest"),
        permission("ingress", "TCP", "29500/29510", SUBNET, priority=10, rule_id="sgr-nccl"),
        permission("ingress", "UDP", "4791/4791", SUBNET, priority=10, rule_id="sgr-rocev2"),
    ]


def world() -> CloudWorld:
    """Three GPU nodes in two vSwitches; gpu3 in a second group; an ACL on vsw-b."""
    w = CloudWorld(region_id=REGION, page_size=2)
    w.instances = [
        instance_item("i-gpu1", GPU_TYPE, "10.0.1.1", ["sg-gpu"], vswitch_id="vsw-a"),
        instance_item("i-gpu2", GPU_TYPE, "10.0.1.2", ["sg-gpu"], vswitch_id="vsw-a"),
        instance_item(
            "i-gpu3", "ecs.g8i.large", "10.0.2.3", ["sg-gpu", "sg-x"], vswitch_id="vsw-b"
        ),
        instance_item("i-other", "ecs.g8i.large", "10.0.9.9", ["sg-x"], vswitch_id="vsw-b"),
    ]
    w.eri = {GPU_TYPE: 8, "ecs.g8i.large": 0}
    w.add_group("sg-gpu", accepting_rules())
    w.add_group("sg-x", [])
    w.vswitch_acls = {"vsw-b": "nacl-b"}
    w.network_acls = {
        "nacl-b": {
            "IngressAclEntries": {
                "IngressAclEntry": [
                    {
                        "NetworkAclEntryName": "deny-nccl",
                        "Policy": "drop",
                        "Protocol": "tcp",
                        "Port": "29500/29510",
                        "SourceCidrIp": "0.0.0.0/0",
                    },
                    {
                        "NetworkAclEntryName": "all-in",
                        "Policy": "accept",
                        "Protocol": "all",
                        "Port": "-1/-1",
                        "SourceCidrIp": "0.0.0.0/0",
                    },
                ]
            },
            "EgressAclEntries": {
                "EgressAclEntry": [
                    {
                        "NetworkAclEntryName": "all-out",
                        "Policy": "accept",
                        "Protocol": "all",
                        "Port": "-1/-1",
                        "DestinationCidrIp": "0.0.0.0/0",
                    }
                ]
            },
            "Resources": {"Resource": []},
        }
    }
    return w


LOCATORS = [
    NodeLocator("gpu1", "i-gpu1", "10.0.1.1", "vpc-1"),
    NodeLocator("gpu2", "i-gpu2", "10.0.1.2", "vpc-1"),
    NodeLocator("gpu3", None, "10.0.2.3", "vpc-1"),  # metadata gave no instance id
]


@pytest.fixture
def fake():
    with FakeAliyun(world()) as server:
        yield server


@pytest.fixture
def reader(fake):
    credential = CredentialClient(
        CredentialConfig(type="access_key", access_key_id="ak-unit", access_key_secret=SECRET)
    )
    settings = CloudSettings(
        ecs_endpoint=fake.endpoint, vpc_endpoint=fake.endpoint, protocol="http"
    )
    yield audit.open_reader(
        REGION, settings, credential, attempts=3, wait_multiplier=0, max_wait_seconds=0
    )
    clear_secrets()


@pytest.fixture
def plane(reader):
    return audit.gather(reader, LOCATORS)


# -- credentials ---------------------------------------------------------------------------


def never_probe() -> bool:
    raise AssertionError("the RAM role must not be probed here")


def test_environment_access_key_is_enough(tmp_path):
    env = {"ALIBABA_CLOUD_ACCESS_KEY_ID": "LTAI", "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "s"}
    assert audit.credentials_available(env, tmp_path, never_probe) is None


@pytest.mark.parametrize("name", ["credentials", "credentials.ini"])
def test_credentials_file_is_enough(tmp_path, name):
    (tmp_path / ".alibabacloud").mkdir()
    (tmp_path / ".alibabacloud" / name).write_text("[default]\ntype = access_key\n")
    assert audit.credentials_available({}, tmp_path, never_probe) is None


def test_named_ram_role_or_a_probed_one_is_enough(tmp_path):
    assert (
        audit.credentials_available({"ALIBABA_CLOUD_ECS_METADATA": "r"}, tmp_path, never_probe)
        is None
    )
    assert audit.credentials_available({}, tmp_path, lambda: True) is None


def test_nothing_found_says_what_to_provide_in_one_line(tmp_path):
    message = audit.credentials_available({}, tmp_path, lambda: False)
    assert message is not None and "\n" not in message
    for what in (
        "ALIBABA_CLOUD_ACCESS_KEY_ID",
        "ALIBABA_CLOUD_ACCESS_KEY_SECRET",
        "~/.alibabacloud/credentials",
        "RAM role",
    ):
        assert what in message
    disabled = {"ALIBABA_CLOUD_ECS_METADATA_DISABLED": "true"}
    assert audit.credentials_available(disabled, tmp_path, never_probe) == message


def test_role_probe_stays_off_the_network_off_ecs(monkeypatch):
    monkeypatch.setattr(credentials, "_on_ecs", lambda: False)
    monkeypatch.setattr(credentials.urllib.request, "urlopen", never_probe)
    assert audit.ram_role_available() is False


def test_disabled_audit_is_skipped_with_one_line():
    assert "cloud.enabled: false" in audit.skip_reason(CloudSettings(enabled=False))


def test_secrets_are_registered_and_scrubbed(reader):
    assert SECRET not in redact(f"key {SECRET} leaked")
    text = f"GET /?Signature=abc%3D&SecurityToken=tok-1 Authorization: acs ak:sig {SECRET}"
    cleaned = audit.scrub(text)
    for secret in ("abc%3D", "tok-1", "ak:sig", SECRET):
        assert secret not in cleaned


# -- gathering -----------------------------------------------------------------------------


def test_nodes_are_matched_by_instance_id_else_private_ip(plane, fake):
    assert plane.node("gpu1").matched_by == "instance id i-gpu1"
    assert plane.node("gpu3").matched_by == "private IP 10.0.2.3"
    assert plane.node("gpu3").instance.instance_id == "i-gpu3"
    assert plane.gaps("gpu1", "gpu2", "gpu3") == []
    by_id, by_vpc = fake.calls("DescribeInstances")[:2]
    assert json.loads(by_id["InstanceIds"]) == ["i-gpu1", "i-gpu2"]
    assert by_vpc["VpcId"] == "vpc-1"


def test_every_page_is_read(plane, fake):
    assert len(plane.groups["sg-gpu"].rules) == 4
    assert [
        c.get("NextToken")
        for c in fake.calls("DescribeSecurityGroupAttribute")
        if c["SecurityGroupId"] == "sg-gpu"
    ] == [None, "2"]
    assert len(fake.calls("DescribeInstances")) == 1 + 2  # by id, then the VPC in two pages


def test_eri_and_acls_are_read(plane, fake):
    assert plane.eri == {GPU_TYPE: 8, "ecs.g8i.large": 0}
    (acl,) = plane.acls
    assert acl.network_acl_id == "nacl-b" and acl.vswitch_ids == ("vsw-b",)
    assert {c["VSwitchId"] for c in fake.calls("DescribeVSwitchAttributes")} == {"vsw-a", "vsw-b"}


def test_listed_network_acl_ids_are_read_instead(reader, fake):
    plane = audit.gather(reader, LOCATORS, network_acl_ids=["nacl-b"])
    assert [a.network_acl_id for a in plane.acls] == ["nacl-b"]
    assert fake.calls("DescribeVSwitchAttributes") == []


def test_throttling_is_retried(reader, fake):
    throttled = error("Throttling.User", "Request was denied due to user flow control.")
    fake.script("DescribeInstanceTypes", throttled, status=400)
    fake.script("DescribeInstanceTypes", throttled, status=503)
    plane = audit.gather(reader, LOCATORS)
    assert plane.eri[GPU_TYPE] == 8
    assert len(fake.calls("DescribeInstanceTypes")) == 3


@pytest.mark.parametrize(
    ("action", "ram_action"),
    [
        ("DescribeInstances", "ecs:DescribeInstances"),
        ("DescribeSecurityGroupAttribute", "ecs:DescribeSecurityGroupAttribute"),
        ("DescribeVSwitchAttributes", "vpc:DescribeVSwitchAttributes"),
        ("DescribeSecurityGroups", "ecs:DescribeSecurityGroups"),
        ("DescribeNetworkInterfaces", "ecs:DescribeNetworkInterfaces"),
    ],
)
def test_access_denied_is_one_line_naming_the_ram_action(reader, fake, action, ram_action):
    fake.script(action, error("Forbidden.RAM", f"User not authorized. Signature=zz9 {SECRET}"), 403)
    with pytest.raises(CloudPermissionError) as caught:
        audit.gather(reader, LOCATORS)
    message = str(caught.value)
    assert ram_action in message and "Forbidden.RAM" in message
    assert "\n" not in message and SECRET not in message and "zz9" not in message


def test_missing_group_leaves_the_node_undetermined(reader, fake):
    del fake.world.security_groups["sg-x"]
    plane = audit.gather(reader, LOCATORS)
    (gap,) = plane.gaps("gpu3")
    assert "sg-x" in gap and "InvalidSecurityGroupId.NotFound" in gap and "gpu3" in gap
    decision = audit.port_decision(plane, "gpu1", "gpu3", "tcp", 22)
    assert decision.unknown and not decision.accepted and not decision.denied
    assert audit.port_decision(plane, "gpu1", "gpu2", "tcp", 22).accepted


def test_unknown_instance_id_names_the_region(reader, fake):
    plane = audit.gather(reader, [NodeLocator("ghost", "i-ghost", "10.0.7.7")])
    (gap,) = plane.gaps("ghost")
    assert "i-ghost" in gap and REGION in gap


def test_other_read_errors_are_one_line(reader, fake):
    fake.script("DescribeNetworkAclAttributes", error("InternalError", "boom"), 500)
    with pytest.raises(CloudReadError, match="vpc:DescribeNetworkAclAttributes failed"):
        audit.gather(reader, LOCATORS)


# -- judging -------------------------------------------------------------------------------


def test_required_ports_accepted_name_the_accepting_rules(plane):
    for proto, port in REQUIRED:
        decision = audit.port_decision(plane, "gpu1", "gpu2", proto, port)
        assert decision.accepted, decision
    text = audit.port_decision(plane, "gpu1", "gpu2", "tcp", 29500).deciding()
    assert "sgr-nccl" in text and "ingress at gpu2" in text
    assert "default egress accept" in text and "same vSwitch vsw-a" in text


def test_security_group_drop_is_named(reader, fake):
    drop = permission(
        "ingress",
        "TCP",
        "29500/29500",
        "0.0.0.0/0",
        policy="Drop",
        priority=1,
        local_cidr="10.0.1.2/32",
        rule_id="sgr-drop-29500",
    )
    fake.world.security_groups["sg-gpu"]["Permissions"].append(drop)
    plane = audit.gather(reader, LOCATORS)
    decision = audit.port_decision(plane, "gpu1", "gpu2", "tcp", 29500)
    assert decision.denied
    text = str(decision)
    assert text.startswith("tcp/29500 gpu1->gpu2: denied by security group rule sg-gpu")
    assert "sgr-drop-29500" in text and "Drop" in text and "priority 1" in text
    assert audit.port_decision(plane, "gpu2", "gpu1", "tcp", 29500).accepted  # only gpu2 drops


def test_network_acl_entry_is_named(plane):
    decision = audit.port_decision(plane, "gpu1", "gpu3", "tcp", 29500)
    assert decision.denied
    assert "network ACL nacl-b entry deny-nccl" in str(decision)
    assert "gpu3's vSwitch" in str(decision)
    assert audit.port_decision(plane, "gpu1", "gpu3", "tcp", 22).accepted


def test_default_ingress_deny_is_named(plane):
    decision = audit.port_decision(plane, "gpu2", "gpu1", "tcp", 2323)
    assert decision.denied and "default ingress deny" in str(decision)


def test_flow_decision_of_inventory_flows(plane):
    allow = InventoryFlow(source="gpu1", target="gpu2", protocol="tcp", port=22)
    deny = InventoryFlow(source="gpu2", target="gpu1", protocol="tcp", port=2323)
    assert audit.flow_decision(plane, allow).accepted
    assert audit.flow_decision(plane, deny).denied


def test_cross_check_names_both_facts(plane):
    accepted = audit.port_decision(plane, "gpu1", "gpu2", "tcp", 29500)
    denied = audit.port_decision(plane, "gpu1", "gpu3", "tcp", 29500)
    timeout = Reachability("tcp", 29500, "timeout")
    opened = Reachability("tcp", 29500, "open")
    found = audit.cross_check(accepted, timeout)
    assert found.startswith("tcp/29500 gpu1->gpu2: control plane: accepted by security group rule")
    assert "; data plane: tcp/29500 timeout: something outside the rules" in found
    assert "sgr-nccl" in found
    reverse = audit.cross_check(denied, opened)
    assert "control plane: denied by network ACL nacl-b entry deny-nccl" in reverse
    assert "data plane: tcp/29500 open" in reverse
    assert audit.cross_check(accepted, opened) is None
    assert audit.cross_check(denied, timeout) is None
    assert audit.cross_check(accepted, timeout, listening=False) is None
    assert audit.cross_check(accepted, None) is None


def test_eri_support(plane):
    gpu = audit.eri_supported(plane, "gpu1")
    assert gpu.supported and gpu.quantity == 8 and gpu.instance_type == GPU_TYPE
    small = audit.eri_supported(plane, "gpu3")
    assert not small.supported and small.quantity == 0 and small.problem is None
    assert audit.eri_supported(plane, "nobody").problem


def test_instance_type_figures_come_with_the_eri_quantity(reader, fake):
    """The node's vCPUs and memory from the same DescribeInstanceTypes call the ERI check
    reads: no call added; a type the answer gives no figures for has none."""
    fake.world.type_specs = {GPU_TYPE: {"CpuCoreCount": 128, "MemorySize": 2048.0}}
    plane = audit.gather(reader, LOCATORS)
    assert len(fake.calls("DescribeInstanceTypes")) == 1
    figures = audit.type_figures(plane, "gpu1")
    assert (figures.instance_type, figures.cpus, figures.memory_gib) == (GPU_TYPE, 128, 2048.0)
    small = audit.type_figures(plane, "gpu3")
    assert (small.instance_type, small.cpus, small.memory_gib) == ("ecs.g8i.large", None, None)
    assert audit.type_figures(plane, "nobody") is None
    assert audit.type_figures(None, "gpu1") is None  # no control plane read in this session


def test_list_actions_denied_name_their_ram_action(reader, fake):
    fake.world.security_groups["sg-gpu"]["Permissions"].append(
        {
            "Direction": "ingress",
            "IpProtocol": "TCP",
            "PortRange": "-1/-1",
            "PortRangeListId": "prl-1",
            "SourcePrefixListId": "pl-1",
            "Policy": "Accept",
            "Priority": "50",
        }
    )
    fake.world.prefix_lists = {"pl-1": ["10.0.0.0/8"]}
    fake.world.port_range_lists = {"prl-1": ["80/80"]}
    for action, ram_action in (
        ("DescribePrefixListAttributes", "ecs:DescribePrefixListAttributes"),
        ("DescribePortRangeListEntries", "ecs:DescribePortRangeListEntries"),
    ):
        fake.script(action, error("Forbidden.RAM", "User not authorized."), 403)
        with pytest.raises(CloudPermissionError, match=ram_action):
            audit.gather(reader, LOCATORS)
    plane = audit.gather(reader, LOCATORS)
    assert plane.prefix_lists == {"pl-1": ("10.0.0.0/8",)}
    assert [str(r) for r in plane.port_lists["prl-1"]] == ["80/80"]


def test_every_interface_page_is_read_and_throttling_retried(reader, fake):
    fake.world.network_interfaces = [
        network_interface_item(f"eni-s{i}", "i-gpu1", f"10.0.1.{100 + i}", ["sg-gpu"])
        for i in range(3)
    ]
    throttled = error("Throttling.User", "Request was denied due to user flow control.")
    fake.script("DescribeNetworkInterfaces", throttled, status=400)
    plane = audit.gather(reader, LOCATORS)
    assert len(plane.node("gpu1").interfaces) == 4  # primary + 3 secondary, page size 2
    tokens = [
        c.get("NextToken")
        for c in fake.calls("DescribeNetworkInterfaces")
        if c.get("InstanceId") == "i-gpu1"
    ]
    assert tokens == [None, None, "2"]  # throttled, retried, then the second page


def test_deleted_prefix_list_leaves_the_flow_undetermined_with_the_reason(reader, fake):
    fake.world.security_groups["sg-gpu"]["Permissions"].insert(
        0,
        {
            "Direction": "ingress",
            "IpProtocol": "TCP",
            "PortRange": "22/22",
            "SourcePrefixListId": "pl-gone",
            "Policy": "Drop",
            "Priority": "1",
        },
    )
    plane = audit.gather(reader, LOCATORS)
    verdict = audit.port_decision(plane, "gpu1", "gpu2", "tcp", 22)
    assert not verdict.accepted and not verdict.denied
    assert "pl-gone" in verdict.unknown and "InvalidPrefixListId.NotFound" in verdict.unknown
    assert audit.port_decision(plane, "gpu1", "gpu2", "tcp", 18515).accepted


def test_ram_actions_are_documented():
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "cloud-audit.md").read_text()
    for action in audit.RAM_ACTIONS:
        assert action in text, action
