"""The fake API answers with the SDK's own shapes, so it cannot drift from the real cloud.

Every body the fake serves is read into the installed SDK's `*ResponseBody` model
(alibabacloud_ecs20140526, alibabacloud_vpc20160428) and written back: a key the model
does not know is dropped by `from_map`, so it would be missing from the round trip. Each
value's type is checked against the model's annotation (str, int, bool, lists, nested
models), and every request parameter the fake reads is a field of the request model.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest

ecs_models = pytest.importorskip("alibabacloud_ecs20140526.models")
vpc_models = pytest.importorskip("alibabacloud_vpc20160428.models")

from pytest_hpcnet.lab.cloud_api import (  # noqa: E402
    CloudWorld,
    instance_item,
    network_interface_item,
    permission,
)

ECS_ACTIONS = {
    "DescribeInstances": {"MaxResults": "10"},
    "DescribeInstanceTypes": {},
    "DescribeSecurityGroups": {"SecurityGroupIds": '["sg-a", "sg-e"]', "MaxResults": "10"},
    "DescribeSecurityGroupAttribute": {"SecurityGroupId": "sg-a", "MaxResults": "10"},
    "DescribeNetworkInterfaces": {"InstanceId": "i-1", "MaxResults": "10"},
    "DescribePrefixListAttributes": {"PrefixListId": "pl-1"},
    "DescribePortRangeListEntries": {"PortRangeListId": "prl-1"},
}
VPC_ACTIONS = {
    "DescribeVSwitchAttributes": {"VSwitchId": "vsw-a"},
    "DescribeNetworkAclAttributes": {"NetworkAclId": "nacl-1"},
}


def world() -> CloudWorld:
    w = CloudWorld(region_id="cn-hangzhou")
    w.instances = [instance_item("i-1", "ecs.ebmgn8is.32xlarge", "10.0.1.1", ["sg-a"])]
    eri = network_interface_item(
        "eni-eri", "i-1", "10.0.1.11", ["sg-e"], traffic_mode="HighPerformance"
    )
    eri["Ipv6Sets"] = {"Ipv6Set": [{"Ipv6Address": "2001:db8::11"}]}
    w.network_interfaces = [eri]
    w.eri = {"ecs.ebmgn8is.32xlarge": 2}
    w.type_specs = {"ecs.ebmgn8is.32xlarge": {"CpuCoreCount": 128, "MemorySize": 1024.0}}
    rules = [
        permission("ingress", "TCP", "22/22", "10.0.0.0/8", rule_id="sgr-1"),
        permission("egress", "6", "1/65535", "10.0.0.0/8", local_cidr="10.0.1.0/24"),
        {
            "Direction": "ingress",
            "IpProtocol": "TCP",
            "PortRange": "-1/-1",
            "PortRangeListId": "prl-1",
            "SourcePrefixListId": "pl-1",
            "SourceGroupId": "sg-e",
            "Ipv6SourceCidrIp": "2001:db8::/32",
            "SourcePortRange": "-1/-1",
            "Policy": "Drop",
            "Priority": "1",
        },
    ]
    w.add_group("sg-a", rules)
    w.add_group("sg-e", [], group_type="enterprise")
    w.prefix_lists = {"pl-1": ["10.0.0.0/16", "2001:db8::/32"]}
    w.port_range_lists = {"prl-1": ["22/22", "29500/29510"]}
    w.vswitch_acls = {"vsw-a": "nacl-1"}
    entry = {"Policy": "accept", "Protocol": "all", "Port": "-1/-1", "EntryType": "custom"}
    w.network_acls = {
        "nacl-1": {
            "IngressAclEntries": {
                "IngressAclEntry": [
                    {**entry, "SourceCidrIp": "pl-1", "IpVersion": "IPV4"},
                    {**entry, "SourceCidrIp": "::/0", "IpVersion": "IPV6"},
                ]
            },
            "EgressAclEntries": {"EgressAclEntry": [{**entry, "DestinationCidrIp": "0.0.0.0/0"}]},
            "Resources": {"Resource": [{"ResourceId": "vsw-a", "ResourceType": "VSwitch"}]},
        }
    }
    return w


def hints(cls: type, module: Any) -> dict[str, Any]:
    namespace = {"main_models": module, "List": list, "Dict": dict, "Any": Any}
    found = typing.get_type_hints(cls.__init__, globalns=namespace)
    found.pop("return", None)
    return found


def check_types(model: Any, module: Any, where: str) -> None:
    """Each set attribute of `model` has its annotated type (recursively)."""
    for name, annotation in hints(type(model), module).items():
        value = getattr(model, name)
        if value is not None:
            check_value(value, annotation, module, f"{where}.{name}")


def check_value(value: Any, annotation: Any, module: Any, where: str) -> None:
    origin = typing.get_origin(annotation)
    if origin is list:
        assert isinstance(value, list), where
        (item_type,) = typing.get_args(annotation)
        for index, item in enumerate(value):
            check_value(item, item_type, module, f"{where}[{index}]")
    elif annotation is bool:
        assert isinstance(value, bool), f"{where}: {value!r} is not a bool"
    elif annotation is int:
        assert isinstance(value, int) and not isinstance(value, bool), f"{where}: {value!r}"
    elif annotation is str:
        assert isinstance(value, str), f"{where}: {value!r} is not a str"
    elif isinstance(annotation, type) and hasattr(annotation, "from_map"):
        check_types(value, module, where)


def contained(sent: Any, back: Any, where: str = "") -> None:
    """Every key and value the fake sent survives the model's round trip."""
    if isinstance(sent, dict):
        assert isinstance(back, dict), where
        for key, value in sent.items():
            assert key in back, f"{where}.{key}: not a field of the SDK model"
            contained(value, back[key], f"{where}.{key}")
    elif isinstance(sent, list):
        assert isinstance(back, list) and len(back) == len(sent), where
        for index, (a, b) in enumerate(zip(sent, back, strict=True)):
            contained(a, b, f"{where}[{index}]")
    else:
        assert sent == back, where


LAB_ACTIONS = {
    "DescribeInstances": ({"MaxResults": "10"}, ecs_models),
    "DescribeInstanceTypes": ({}, ecs_models),
    "DescribeSecurityGroups": ({"MaxResults": "10"}, ecs_models),
    "DescribeSecurityGroupAttribute": (
        {"SecurityGroupId": "sg-lab0001", "MaxResults": "100"},
        ecs_models,
    ),
    "DescribeNetworkInterfaces": ({"InstanceId": "i-lab00002", "MaxResults": "10"}, ecs_models),
    "DescribeVSwitchAttributes": ({"VSwitchId": "vsw-lab0002"}, vpc_models),
    "DescribeNetworkAclAttributes": ({"NetworkAclId": "nacl-lab0001"}, vpc_models),
}


@pytest.mark.parametrize("action", sorted(LAB_ACTIONS))
def test_the_labs_own_world_has_the_sdk_model_shapes(action, tmp_path):
    """What `hpcnet lab up` serves (two ERIs, a console fault) in the models' shapes too."""
    from pytest_hpcnet.lab.cloud_world import lab_world
    from tests.unit.test_lab_cloud_world import make_state

    state = make_state(tmp_path, eris=2)
    state.node("node02").faults["sg-drop:tcp/29500-29510"] = ""
    params, module = LAB_ACTIONS[action]
    status, body = lab_world(state).answer({"Action": action, **params})
    assert status == 200, body
    model = getattr(module, f"{action}ResponseBody")().from_map(body)
    contained(body, model.to_map(), action)
    check_types(model, module, action)


@pytest.mark.parametrize(
    ("action", "params", "module"),
    [(a, p, ecs_models) for a, p in ECS_ACTIONS.items()]
    + [(a, p, vpc_models) for a, p in VPC_ACTIONS.items()],
)
def test_every_fake_answer_has_the_sdk_model_shape(action, params, module):
    status, body = world().answer({"Action": action, **params})
    assert status == 200, body
    model = getattr(module, f"{action}ResponseBody")().from_map(body)
    contained(body, model.to_map(), action)
    check_types(model, module, action)


@pytest.mark.parametrize(
    ("action", "params", "module"),
    [(a, p, ecs_models) for a, p in ECS_ACTIONS.items()]
    + [(a, p, vpc_models) for a, p in VPC_ACTIONS.items()],
)
def test_every_parameter_the_fake_reads_is_a_request_field(action, params, module):
    request = getattr(module, f"{action}Request")().from_map(dict(params))
    assert set(params) <= set(request.to_map()), action


def test_paging_uses_next_token_and_max_results():
    w = world()
    w.page_size = 1
    w.instances.append(instance_item("i-2", "ecs.g8i.large", "10.0.1.2", ["sg-a"]))
    first = w.answer({"Action": "DescribeNetworkInterfaces", "MaxResults": "10"})[1]
    second = w.answer(
        {"Action": "DescribeNetworkInterfaces", "MaxResults": "10", "NextToken": first["NextToken"]}
    )[1]
    ids = [
        body["NetworkInterfaceSets"]["NetworkInterfaceSet"][0]["NetworkInterfaceId"]
        for body in (first, second)
    ]
    assert len(set(ids)) == 2 and first["NextToken"]
