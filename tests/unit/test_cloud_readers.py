"""SDK readers against a local http.server on 127.0.0.1 answering documented-shape JSON."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("alibabacloud_ecs20140526")
pytest.importorskip("alibabacloud_vpc20160428")
pytest.importorskip("alibabacloud_credentials")

from alibabacloud_credentials.client import Client as CredentialClient
from alibabacloud_credentials.models import Config as CredentialConfig

from pytest_hpcnet.cloud.readers import (
    AliyunReader,
    CloudPermissionError,
    CloudReadError,
)
from pytest_hpcnet.cloud.rules import Direction
from pytest_hpcnet.lab.cloud_api import FakeAliyun


@pytest.fixture
def fake():
    """The project's fake ECS/VPC API on 127.0.0.1, answering only what a test scripts."""
    with FakeAliyun() as server:
        yield server


@pytest.fixture
def reader(fake):
    credential = CredentialClient(
        CredentialConfig(type="access_key", access_key_id="ak-test", access_key_secret="sk-test")
    )
    return AliyunReader(
        "cn-hangzhou",
        credential=credential,
        ecs_endpoint=fake.endpoint,
        vpc_endpoint=fake.endpoint,
        protocol="http",
        attempts=3,
        wait_multiplier=0,
        max_wait_seconds=0,
    )


def sg_page(rules, token=""):
    return {
        "RequestId": "r",
        "RegionId": "cn-hangzhou",
        "SecurityGroupId": "sg-gpu",
        "InnerAccessPolicy": "Drop",
        "VpcId": "vpc-1",
        "NextToken": token,
        "Permissions": {"Permission": rules},
    }


def ssh_rule(priority):
    return {
        "Direction": "ingress",
        "IpProtocol": "TCP",
        "PortRange": "22/22",
        "SourceCidrIp": "10.0.0.0/8",
        "Policy": "Accept",
        "Priority": str(priority),
        "NicType": "intranet",
    }


def test_security_group_pages_are_followed(fake, reader):
    fake.script("DescribeSecurityGroupAttribute", sg_page([ssh_rule(1), ssh_rule(2)], "tok-2"))
    fake.script("DescribeSecurityGroupAttribute", sg_page([ssh_rule(3)]))
    group = reader.security_group("sg-gpu")
    assert [rule.priority for rule in group.rules] == [1, 2, 3]
    assert group.rules_in(Direction.INGRESS) == group.rules
    first, second = fake.calls("DescribeSecurityGroupAttribute")
    assert first["MaxResults"] == "1000"
    assert first["SecurityGroupId"] == "sg-gpu"
    assert "NextToken" not in first
    assert second["NextToken"] == "tok-2"


def test_throttling_is_retried(fake, reader):
    throttled = {"Code": "Throttling.User", "Message": "Request was denied due to user flow"}
    fake.script("DescribeSecurityGroupAttribute", throttled, status=400)
    fake.script("DescribeSecurityGroupAttribute", throttled, status=503)
    fake.script("DescribeSecurityGroupAttribute", sg_page([ssh_rule(1)]))
    group = reader.security_group("sg-gpu")
    assert len(group.rules) == 1
    assert len(fake.calls("DescribeSecurityGroupAttribute")) == 3


def test_throttling_gives_up_after_the_attempts(fake, reader):
    for _ in range(3):
        fake.script("DescribeSecurityGroupAttribute", {"Code": "Throttling"}, status=400)
    with pytest.raises(CloudReadError, match="Throttling"):
        reader.security_group("sg-gpu")
    assert len(fake.calls("DescribeSecurityGroupAttribute")) == 3


@pytest.mark.parametrize("code", ["Forbidden.RAM", "NoPermission"])
def test_permission_error_names_the_ram_action(fake, reader, code):
    fake.script(
        "DescribeNetworkAclAttributes",
        {"Code": code, "Message": "User not authorized to operate on the specified resource."},
        status=403,
    )
    with pytest.raises(CloudPermissionError) as caught:
        reader.network_acl("nacl-gpu")
    message = str(caught.value)
    assert "vpc:DescribeNetworkAclAttributes" in message
    assert code in message
    assert "\n" not in message
    assert caught.value.ram_action == "vpc:DescribeNetworkAclAttributes"
    assert len(fake.calls("DescribeNetworkAclAttributes")) == 1  # not retried


def test_other_errors_are_not_retried(fake, reader):
    fake.script(
        "DescribeSecurityGroupAttribute",
        {"Code": "InvalidSecurityGroupId.NotFound", "Message": "not found"},
        status=404,
    )
    with pytest.raises(CloudReadError, match=r"InvalidSecurityGroupId\.NotFound"):
        reader.security_group("sg-nope")
    assert len(fake.calls("DescribeSecurityGroupAttribute")) == 1


def test_network_acl_is_parsed(fake, reader, fixture_text):
    fake.script(
        "DescribeNetworkAclAttributes",
        json.loads(fixture_text("cloud", "describe_network_acl_attributes.json")),
    )
    acl = reader.network_acl("nacl-gpu")
    assert acl.network_acl_id == "nacl-gpu"
    assert acl.vswitch_ids == ("vsw-gpu-a", "vsw-gpu-b")
    assert [entry.label for entry in acl.ingress_entries] == ["deny-bad", "ssh", "replies"]
    (call,) = fake.calls("DescribeNetworkAclAttributes")
    assert call["NetworkAclId"] == "nacl-gpu"


def instance(instance_id, instance_type, vswitch, ip, groups):
    return {
        "InstanceId": instance_id,
        "InstanceType": instance_type,
        "Status": "Running",
        "VpcAttributes": {
            "VpcId": "vpc-1",
            "VSwitchId": vswitch,
            "PrivateIpAddress": {"IpAddress": [ip]},
        },
        "SecurityGroupIds": {"SecurityGroupId": groups},
    }


def test_instances_are_paged_and_read(fake, reader):
    fake.script(
        "DescribeInstances",
        {
            "NextToken": "p2",
            "Instances": {
                "Instance": [instance("i-1", "ecs.ebmgn8v.48xlarge", "vsw-a", "10.0.1.1", ["sg-a"])]
            },
        },
    )
    fake.script(
        "DescribeInstances",
        {
            "NextToken": "",
            "Instances": {
                "Instance": [
                    instance("i-2", "ecs.gn8is.8xlarge", "vsw-b", "10.0.2.1", ["sg-a", "sg-b"])
                ]
            },
        },
    )
    found = reader.instances(vpc_id="vpc-1")
    assert [info.instance_id for info in found] == ["i-1", "i-2"]
    assert found[1].security_group_ids == ("sg-a", "sg-b")
    assert found[0].vswitch_id == "vsw-a"
    assert found[0].private_ips == ("10.0.1.1",)
    first, second = fake.calls("DescribeInstances")
    assert first["VpcId"] == "vpc-1"
    assert first["MaxResults"] == "100"
    assert second["NextToken"] == "p2"


def test_eri_quantity_of_instance_types(fake, reader):
    fake.script(
        "DescribeInstanceTypes",
        {
            "NextToken": "",
            "InstanceTypes": {
                "InstanceType": [
                    {"InstanceTypeId": "ecs.ebmgn8v.48xlarge", "EriQuantity": 8},
                    {"InstanceTypeId": "ecs.g8i.large", "EriQuantity": 0},
                ]
            },
        },
    )
    quantities = reader.eri_quantity(["ecs.g8i.large", "ecs.ebmgn8v.48xlarge", "ecs.g8i.large"])
    assert quantities == {"ecs.ebmgn8v.48xlarge": 8, "ecs.g8i.large": 0}
    (call,) = fake.calls("DescribeInstanceTypes")
    assert "ecs.ebmgn8v.48xlarge" in json.dumps(call)


def test_instance_types_give_vcpus_and_memory_with_eri_quantity(fake, reader):
    """`CpuCoreCount` (vCPUs) and `MemorySize` (GiB, a float: 0.5 for the smallest types)
    come in the same DescribeInstanceTypes answer as `EriQuantity`."""
    item = {"InstanceTypeId": "ecs.ebmgn8v.48xlarge", "EriQuantity": 2}
    item |= {"CpuCoreCount": 192, "MemorySize": 1024.0}
    small = {"InstanceTypeId": "ecs.t1.xsmall", "CpuCoreCount": 1, "MemorySize": 0.5}
    body = {"NextToken": "", "InstanceTypes": {"InstanceType": [item, small]}}
    fake.script("DescribeInstanceTypes", body)
    found = reader.instance_types(["ecs.ebmgn8v.48xlarge", "ecs.t1.xsmall"])
    big = found["ecs.ebmgn8v.48xlarge"]
    assert (big.eri_quantity, big.cpus, big.memory_gib) == (2, 192, 1024.0)
    tiny = found["ecs.t1.xsmall"]
    assert (tiny.eri_quantity, tiny.cpus, tiny.memory_gib) == (0, 1, 0.5)
    assert len(fake.calls("DescribeInstanceTypes")) == 1
