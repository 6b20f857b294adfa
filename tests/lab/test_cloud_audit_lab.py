"""The static suite with the control-plane audit against the 4-node lab.

A fake ECS/VPC API on 127.0.0.1 describes the lab's instances (i-lab00001.., private IPs
198.18.0.11.., vsw-lab0001, one security group, each instance's primary ENI); a copy of the
lab inventory points the audit at it over http and declares a bastion flow, and the
subprocess gets a dummy AccessKey in its environment.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from pytest_hpcnet.campaigns.pairs import required_flows
from pytest_hpcnet.cloud import audit
from pytest_hpcnet.lab.cloud_api import (
    CloudWorld,
    FakeAliyun,
    instance_item,
    network_interface_item,
    permission,
)
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import faults
from tests.lab.test_static_suite import failing, run_static

pytest.importorskip("alibabacloud_ecs20140526")
pytest.importorskip("alibabacloud_vpc20160428")

pytestmark = pytest.mark.lab

GROUP = "sg-lab0001"
LAB_SUBNET = "198.18.0.0/24"
DUMMY_KEY_ID = "LTAIlabDummyKeyId0001"
DUMMY_SECRET = "lab-dummy-secret-do-not-print-7f3a"
DROP_RULE = "sgr-lab-drop-29500"
NODE = "node02"
BASTION = "198.18.0.250"
ERI_GROUP = "sg-lab-eri"


def lab_world(lab4) -> CloudWorld:
    """The lab as DescribeInstances & co. would tell it: the required flows
    (`expect.cloud.required_flows`) and the probed ports (`expect.ports`) accepted from the
    lab subnet at priority 10, and each must-deny flow (`expect.flows.deny`) dropped
    between its two nodes at priority 5, as the lab's own firewall does."""
    inventory = load_inventory(lab4.inventory)
    world = CloudWorld(region_id=lab4.region_id)
    for node in lab4.nodes:
        world.instances.append(
            instance_item(
                node.instance_id,
                node.instance_type,
                node.address,
                [GROUP],
                vpc_id=lab4.vpc_id,
                vswitch_id=node.vswitch_id,
            )
        )
        world.eri[node.instance_type] = 2
    rules = [
        permission(
            "ingress",
            flow.protocol.upper(),
            "{}/{}".format(*flow.bounds),
            LAB_SUBNET,
            priority=10,
            rule_id=f"sgr-lab-{flow.protocol}-{flow.ports}",
        )
        for flow in inventory.expect.cloud.required_flows
    ]
    rules += [
        permission(
            "ingress",
            flow.proto.upper(),
            f"{flow.port}/{flow.port}",
            LAB_SUBNET,
            priority=10,
            rule_id=f"sgr-lab-{flow.proto}-{flow.port}",
        )
        for flow in required_flows(inventory.expect)  # the ports the probes try
    ]
    addresses = {node.name: node.address for node in lab4.nodes}
    rules += [
        permission(
            "ingress",
            flow.protocol.upper(),
            f"{flow.port}/{flow.port}",
            f"{addresses[flow.source]}/32",
            policy="Drop",
            priority=5,
            local_cidr=f"{addresses[flow.target]}/32",
            rule_id=f"sgr-lab-deny-{flow.protocol}-{flow.port}",
        )
        for flow in inventory.expect.flows.deny
    ]
    world.add_group(GROUP, rules, inner_access_policy="Drop")
    return world


@pytest.fixture
def fake_cloud(lab4):
    with FakeAliyun(lab_world(lab4)) as server:
        yield server


@pytest.fixture
def cloud_inventory(lab4, fake_cloud, tmp_path) -> str:
    """A copy of the lab inventory whose `cloud:` block points at the fake API."""
    data = yaml.safe_load(Path(lab4.inventory).read_text())
    data.pop("scope", None)  # with a cloud behind it, the audit is in scope
    endpoint = fake_cloud.endpoint
    data["cloud"] = {
        "ecs_endpoint": endpoint,
        "vpc_endpoint": endpoint,
        "protocol": "http",
        "external_flows": [
            {"name": "bastion", "address": BASTION, "target": "node01", "port": 22},
            {
                "name": "internet",
                "address": "203.0.113.9",
                "target": "node01",
                "port": 22,
                "expect": "deny",
            },
        ],
    }
    path = tmp_path / "lab-cloud.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


@pytest.fixture
def cloud_env(monkeypatch, tmp_path):
    """Switch the subprocess's Alibaba Cloud credentials on (dummy AccessKey) or off; no
    credentials file, CLI profile or RAM role can be found either way."""
    for name in list(os.environ):
        if name.startswith(("ALIBABA_CLOUD_", "ALICLOUD_")):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ALIBABA_CLOUD_ECS_METADATA_DISABLED", "true")
    monkeypatch.setenv("ALIBABA_CLOUD_CLI_PROFILE_DISABLED", "true")
    for proxy in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(proxy, ",".join(filter(None, [os.environ.get(proxy), "127.0.0.1"])))

    def credentials(on: bool) -> None:
        if on:
            monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", DUMMY_KEY_ID)
            monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", DUMMY_SECRET)
        else:
            monkeypatch.delenv("ALIBABA_CLOUD_ACCESS_KEY_ID", raising=False)
            monkeypatch.delenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", raising=False)

    return credentials


def audit_records(records: list[dict]) -> list[dict]:
    return [r for r in records if r["check_id"] == "cloud_audit"]


def assert_no_secret(reports: Path) -> None:
    for path in reports.rglob("*"):
        if path.is_file():
            assert DUMMY_SECRET not in path.read_text(errors="replace"), path


def test_healthy_lab_passes_the_audit_and_skips_it_without_credentials(
    lab4, fake_cloud, cloud_inventory, cloud_env, tmp_path
):
    cloud_env(True)
    code, records = run_static(cloud_inventory, tmp_path / "with")
    assert not failing(records), [r["message"] for r in failing(records)]
    assert code == 0
    audited = audit_records(records)
    assert audited and {r["verdict"] for r in audited} == {"pass"}
    # pairs x (rules, cross-check), 2 listed flows, the external flows, 4 nodes
    assert len(audited) == 4 * 2 + 2 + 1 + 4
    assert fake_cloud.calls("DescribeSecurityGroupAttribute")
    assert_no_secret(tmp_path / "with")

    cloud_env(False)
    asked = len(fake_cloud.requests)
    code, bare = run_static(cloud_inventory, tmp_path / "without")
    assert code == 0
    assert len(fake_cloud.requests) == asked  # the API was not called
    skipped = audit_records(bare)
    assert len(skipped) == len(audited)
    assert {(r["verdict"], r["message"]) for r in skipped} == {("skipped", audit.NO_CREDENTIALS)}
    # skipped is not passed: the run is INCOMPLETE, naming the audit and why
    (run,) = list((tmp_path / "without").iterdir())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["verdict"] == "INCOMPLETE"
    reasons = {(e["check_id"], e["reason"]) for e in summary["scope"]["incomplete"]}
    assert reasons == {("cloud_audit", " ".join(audit.NO_CREDENTIALS.split()))}
    others = {r["nodeid"]: r["verdict"] for r in records if r["check_id"] != "cloud_audit"}
    assert {r["nodeid"]: r["verdict"] for r in bare if r["check_id"] != "cloud_audit"} == others


def test_recorded_drop_rule_is_named_and_agrees_with_the_lab(
    lab4, fake_cloud, cloud_inventory, cloud_env, tmp_path
):
    drop = permission(
        "ingress",
        "TCP",
        "29500/29500",
        "0.0.0.0/0",
        policy="Drop",
        priority=1,
        local_cidr="198.18.0.12/32",  # node02 only
        rule_id=DROP_RULE,
    )
    fake_cloud.world.security_groups[GROUP]["Permissions"].insert(0, drop)
    cloud_env(True)
    faults.inject("block", NODE, "tcp/29500", Path(lab4.state_dir))
    try:
        code, records = run_static(cloud_inventory, tmp_path / "reports")
    finally:
        faults.heal(NODE, Path(lab4.state_dir))
    assert code == 1
    bad = failing(records)
    assert {r["check_id"] for r in bad} == {"cloud_audit", "security_group"}, bad
    (denied,) = audit_records(bad)
    assert "test_required_ports_accepted_by_control_plane" in denied["nodeid"]
    assert denied["subject"] == "node01->node02"
    message = denied["message"]
    assert "tcp/1-65535 node01->node02: ports 29500 denied by security group rule" in message
    assert DROP_RULE in message and "Drop" in message and "priority 1" in message
    assert "ingress at node02 eni-i-lab" in message
    assert_no_secret(tmp_path / "reports")


def test_rules_allow_but_the_lab_blocks_names_both_facts(
    lab4, fake_cloud, cloud_inventory, cloud_env, tmp_path
):
    cloud_env(True)
    faults.inject("block", NODE, "tcp/29500", Path(lab4.state_dir))
    try:
        code, records = run_static(cloud_inventory, tmp_path / "reports")
    finally:
        faults.heal(NODE, Path(lab4.state_dir))
    assert code == 1
    bad = failing(records)
    assert {r["check_id"] for r in bad} == {"cloud_audit", "security_group"}, bad
    (disagreement,) = audit_records(bad)
    assert "test_control_plane_agrees_with_data_plane" in disagreement["nodeid"]
    message = disagreement["message"]
    assert "tcp/29500 node01->node02: control plane: accepted by security group rule" in message
    assert "sgr-lab-tcp-1-65535" in message
    assert "; data plane: tcp/29500 timeout: something outside the rules is in the path" in message
    assert_no_secret(tmp_path / "reports")


def test_eri_in_another_group_than_its_primary_eni_is_caught(
    lab4, fake_cloud, cloud_inventory, cloud_env, tmp_path
):
    """node01 and node02 each get an ERI (NetworkInterfaceTrafficMode HighPerformance);
    node02's sits in a group with no rule, so eRDMA between them meets the default deny
    while every primary ENI, and so every probe, passes."""
    world = fake_cloud.world
    world.add_group(ERI_GROUP, [], inner_access_policy="Drop")
    first, second = lab4.nodes[0], lab4.nodes[1]
    for node, group, address in (
        (first, GROUP, "198.18.0.211"),
        (second, ERI_GROUP, "198.18.0.212"),
    ):
        world.network_interfaces.append(
            network_interface_item(
                f"eni-eri-{node.name}",
                node.instance_id,
                address,
                [group],
                vswitch_id=node.vswitch_id,
                vpc_id=lab4.vpc_id,
                traffic_mode="HighPerformance",
                network_card_index=1,
            )
        )
    # The must-deny flow node02->node01 tcp/2323 holds between the ERIs too.
    world.security_groups[GROUP]["Permissions"].append(
        permission(
            "ingress",
            "TCP",
            "2323/2323",
            "198.18.0.212/32",
            policy="Drop",
            priority=5,
            local_cidr="198.18.0.211/32",
        )
    )
    cloud_env(True)
    code, records = run_static(cloud_inventory, tmp_path / "reports")
    assert code == 1
    bad = failing(records)
    assert {r["check_id"] for r in bad} == {"cloud_audit"}, bad
    # The required flows node01->node02 and the listed must-allow flow node01->node02 tcp/22
    # both fail on the ERI pair, and on nothing else.
    assert sorted(r["nodeid"].split("::")[-1].split("[")[0] for r in bad) == [
        "test_listed_flows_enforced_by_control_plane",
        "test_required_ports_accepted_by_control_plane",
    ], [r["nodeid"] for r in bad]
    (denied,) = [r for r in bad if "test_required_ports_accepted" in r["nodeid"]]
    assert denied["subject"] == "node01->node02"
    for record in bad:
        message = record["message"]
        assert "eni-eri-node02" in message, message
        assert "default ingress deny (basic security group)" in message
        assert "eni-i-lab" not in message  # the primary ENIs are fine
    assert fake_cloud.calls("DescribeNetworkInterfaces")
    assert_no_secret(tmp_path / "reports")


def test_eris_sharing_one_nic_index_fail_exactly_that_node(
    lab4, fake_cloud, cloud_inventory, cloud_env, tmp_path
):
    """Every lab instance gets two ERIs, node02's both on NIC index 0; with an ebmgn7ex-like
    `expect.erdma` (two ERIs, the one-NIC-index cap published), `erdma_nic_index` fails node02
    alone, naming its ENIs, the index and the fix."""
    world = fake_cloud.world
    for n, node in enumerate(lab4.nodes):
        for k in (0, 1):
            world.network_interfaces.append(
                network_interface_item(
                    f"eni-eri{k}-{node.name}",
                    node.instance_id,
                    f"198.18.0.{200 + 2 * n + k}",
                    [GROUP],
                    vswitch_id=node.vswitch_id,
                    vpc_id=lab4.vpc_id,
                    traffic_mode="HighPerformance",
                    network_card_index=0 if node.name == NODE else k,
                )
            )
    data = yaml.safe_load(Path(cloud_inventory).read_text())
    erdma = data.setdefault("expect", {}).setdefault("erdma", {})
    erdma.update(eris=2, per_instance_gbps=2, same_nic_index_gbps=1)
    inventory = tmp_path / "nic-index.yaml"
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    cloud_env(True)
    code, records = run_static(str(inventory), tmp_path / "reports", "-k", "nic_indexes")
    assert code == 1
    checked = [r for r in records if r["check_id"] == "erdma_nic_index"]
    assert len(checked) == len(lab4.nodes)
    (bad,) = failing(records)
    assert bad["check_id"] == "erdma_nic_index" and bad["subject"] == NODE, bad
    assert bad["message"].startswith(
        f"{NODE}: ERIs eni-eri0-{NODE}, eni-eri1-{NODE} share NIC index 0: the instance is "
        "capped at 1 Gbit/s instead of 2 (source S1); attach one with another "
        "NetworkCardIndex (AttachNetworkInterface)"
    ), bad["message"]
    assert {r["verdict"] for r in checked if r["subject"] != NODE} == {"pass"}
