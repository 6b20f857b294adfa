"""The static suite with the control-plane audit against the 4-node lab's own control plane.

`hpcnet lab up` serves the lab's ECS/VPC API on 127.0.0.1 (lab/control_plane.py) and the lab
inventory points the real SDK at it, with the lab's dummy AccessKey in its credentials file;
the console faults (`sg-drop`: the console only, `sg-block`: console and iptables) and the
host fault (`block`: iptables only) are each caught and explained. The last two tests serve
a world of their own (the lab's, changed) with `FakeAliyun`.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

import pytest
import yaml

from pytest_hpcnet.cloud import audit
from pytest_hpcnet.lab import cluster, control_plane, faults
from pytest_hpcnet.lab.cloud_api import FakeAliyun
from pytest_hpcnet.lab.cloud_world import lab_world
from pytest_hpcnet.lab.state import LabState
from tests.lab.test_static_suite import failing, run_static

pytest.importorskip("alibabacloud_ecs20140526")
pytest.importorskip("alibabacloud_vpc20160428")

pytestmark = pytest.mark.lab

NODE = "node02"
PORT = "tcp/29500"
FAULT_RULE = "sgr-lab-fault-node02-tcp-29500"
ERI_GROUP = "sg-lab-eri"
# pairs x (rules, cross-check), 2 listed flows, the external flows, 4 nodes x (type, ERIs)
AUDIT_RECORDS = 4 * 2 + 2 + 1 + 4 + 4


@pytest.fixture
def cloud_env(monkeypatch, tmp_path):
    """No Alibaba Cloud credentials in the environment, no credentials file, CLI profile or
    RAM role to find: only what the inventory names."""
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


def lab_secret(lab4) -> str:
    state = LabState.load(Path(lab4.state_dir))
    text = control_plane.credentials_file(state).read_text()
    return text.split("access_key_secret = ")[1].split()[0]


def audit_records(records: list[dict]) -> list[dict]:
    return [r for r in records if r["check_id"] in ("cloud_audit", "erdma_nic_index")]


def assert_no_secret(reports: Path, secret: str) -> None:
    for path in reports.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path


def test_hpcnet_lab_up_serves_the_labs_control_plane(lab4):
    state = LabState.load(Path(lab4.state_dir))
    assert state.cloud_api_pid and Path(f"/proc/{state.cloud_api_pid}").exists()
    url = f"http://{control_plane.endpoint(state)}/?Action=DescribeInstances&MaxResults=100"
    with urllib.request.urlopen(url, timeout=10) as answer:
        body = json.loads(answer.read())
    ids = [i["InstanceId"] for i in body["Instances"]["Instance"]]
    assert ids == [n.instance_id for n in state.nodes]
    assert any("control plane (ECS/VPC API)" in line and "running" in line
               for line in cluster.status(Path(lab4.state_dir)))  # fmt: skip
    cloud = yaml.safe_load(Path(lab4.inventory).read_text())["cloud"]
    assert cloud["ecs_endpoint"] == control_plane.endpoint(state)
    assert lab_secret(lab4) not in Path(lab4.inventory).read_text()


def test_healthy_lab_passes_the_audit_in_scope_and_skips_it_without_credentials(
    lab4, cloud_env, tmp_path
):
    code, records = run_static(lab4.inventory, tmp_path / "with")
    assert not failing(records), [r["message"] for r in failing(records)]
    assert code == 0
    audited = audit_records(records)
    assert len(audited) == AUDIT_RECORDS
    assert {r["verdict"] for r in audited} == {"pass"}
    (run,) = list((tmp_path / "with").iterdir())
    summary = json.loads((run / "summary.json").read_text())
    assert not [e for e in summary["scope"]["excluded"] if e["kind"] == "inventory"]
    assert_no_secret(tmp_path / "with", lab_secret(lab4))

    # the same inventory without the lab's credentials file: skipped, and so INCOMPLETE
    data = yaml.safe_load(Path(lab4.inventory).read_text())
    del data["cloud"]["credentials_file"]
    bare_inventory = tmp_path / "no-credentials.yaml"
    bare_inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    code, bare = run_static(str(bare_inventory), tmp_path / "without")
    assert code == 0
    skipped = audit_records(bare)
    assert len(skipped) == len(audited)
    assert {(r["verdict"], r["message"]) for r in skipped} == {("skipped", audit.NO_CREDENTIALS)}
    (run,) = list((tmp_path / "without").iterdir())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["verdict"] == "INCOMPLETE"
    reasons = {e["check_id"] for e in summary["scope"]["incomplete"]}
    assert reasons == {"cloud_audit", "erdma_nic_index"}


def run_with_fault(lab4, kind: str, reports: Path) -> tuple[int, list[dict]]:
    faults.inject(kind, NODE, PORT, Path(lab4.state_dir))
    try:
        return run_static(lab4.inventory, reports)
    finally:
        faults.heal(NODE, Path(lab4.state_dir))


def test_console_denies_but_the_host_allows_names_the_console_rule(lab4, cloud_env, tmp_path):
    """`sg-drop`: a Drop rule in the console only; the probes still get through."""
    code, records = run_with_fault(lab4, "sg-drop", tmp_path / "reports")
    assert code == 1
    bad = failing(records)
    assert {r["check_id"] for r in bad} == {"cloud_audit"}, [r["message"] for r in bad]
    tests = sorted(r["nodeid"].split("::")[-1].split("[")[0] for r in bad)
    assert tests == [
        "test_control_plane_agrees_with_data_plane",
        "test_required_ports_accepted_by_control_plane",
    ], [r["message"] for r in bad]
    assert {r["subject"] for r in bad} == {"node01->node02"}
    (denied,) = [r for r in bad if "test_required_ports" in r["nodeid"]]
    assert (
        "tcp/1-65535 node01->node02: ports 29500 denied by security group rule"
        in (denied["message"])
    )
    assert FAULT_RULE in denied["message"] and "priority 1" in denied["message"]
    (disagreement,) = [r for r in bad if "agrees_with_data_plane" in r["nodeid"]]
    message = disagreement["message"]
    assert "tcp/29500 node01->node02: control plane: denied by security group rule" in message
    assert FAULT_RULE in message
    assert "data plane: tcp/29500 open: the cloud does not enforce these rules" in message
    assert_no_secret(tmp_path / "reports", lab_secret(lab4))


def test_console_and_host_both_deny_fails_the_rule_and_the_probe_alike(lab4, cloud_env, tmp_path):
    """`sg-block`: the console rule and the iptables drop agree: the audit names the rule,
    the probe the timeout, and the two planes agree."""
    code, records = run_with_fault(lab4, "sg-block", tmp_path / "reports")
    assert code == 1
    bad = failing(records)
    assert {r["check_id"] for r in bad} == {"cloud_audit", "security_group"}, bad
    (denied,) = audit_records(bad)
    assert "test_required_ports_accepted_by_control_plane" in denied["nodeid"]
    assert denied["subject"] == "node01->node02"
    assert FAULT_RULE in denied["message"] and "Drop" in denied["message"]
    assert "ingress at node02 eni-lab020" in denied["message"]
    agree = [r for r in records if "agrees_with_data_plane" in r["nodeid"]]
    assert {r["verdict"] for r in agree} == {"pass"}


def test_console_allows_but_the_host_blocks_names_both_facts(lab4, cloud_env, tmp_path):
    """`block`: iptables only; the console's accept rule is named beside the probe."""
    code, records = run_with_fault(lab4, "block", tmp_path / "reports")
    assert code == 1
    bad = failing(records)
    assert {r["check_id"] for r in bad} == {"cloud_audit", "security_group"}, bad
    (disagreement,) = audit_records(bad)
    assert "test_control_plane_agrees_with_data_plane" in disagreement["nodeid"]
    message = disagreement["message"]
    assert "tcp/29500 node01->node02: control plane: accepted by security group rule" in message
    assert "sgr-lab-tcp-1-65535" in message
    assert "; data plane: tcp/29500 timeout: something outside the rules is in the path" in message


@pytest.fixture
def fake_cloud(lab4):
    """A world of the test's own, the lab's to begin with, on another port."""
    with FakeAliyun(lab_world(LabState.load(Path(lab4.state_dir)))) as server:
        yield server


@pytest.fixture
def cloud_inventory(lab4, fake_cloud, tmp_path) -> str:
    """A copy of the lab inventory whose `cloud:` block points at `fake_cloud`."""
    data = yaml.safe_load(Path(lab4.inventory).read_text())
    data["cloud"]["ecs_endpoint"] = data["cloud"]["vpc_endpoint"] = fake_cloud.endpoint
    path = tmp_path / "lab-cloud.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_eri_in_another_group_than_its_primary_eni_is_caught(
    lab4, fake_cloud, cloud_inventory, cloud_env, tmp_path
):
    """node02's ERI (erdma_0's, NetworkInterfaceTrafficMode HighPerformance) moves to a group
    with no rule, so eRDMA from node01 meets the default deny while every primary ENI, and
    so every probe, passes."""
    world = fake_cloud.world
    world.add_group(ERI_GROUP, [], inner_access_policy="Drop")
    (eri,) = [i for i in world.network_interfaces if i["NetworkInterfaceId"] == "eri-lab020"]
    eri["SecurityGroupIds"] = {"SecurityGroupId": [ERI_GROUP]}
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
        assert "eri-lab020" in message, message
        assert "default ingress deny (basic security group)" in message
        assert "eni-lab020" not in message  # the primary ENIs are fine
    assert fake_cloud.calls("DescribeNetworkInterfaces")


def test_two_eris_on_distinct_nic_indexes_and_the_nic_index_fault(lab2, cloud_env, tmp_path):
    """With `--eris 2` the lab's control plane lists eth1's ENI as erdma_1's ERI on NIC index
    1; with an ebmgn7ex-like `expect.erdma` (two ERIs, the one-NIC-index cap published) every
    node passes, and `nic-index` (both ERIs of node02 on index 0) fails node02 alone, naming
    its ERIs, the index and the fix. (Last in the module: `lab2` keeps two ERIs to its end.)"""
    data = yaml.safe_load(Path(lab2.inventory).read_text())
    data["expect"]["erdma"].update(eris=2, per_instance_gbps=2, same_nic_index_gbps=1)
    inventory = tmp_path / "nic-index.yaml"
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    code, records = run_static(str(inventory), tmp_path / "healthy", "-k", "nic_indexes")
    checked = [r for r in records if r["check_id"] == "erdma_nic_index"]
    assert code == 0 and len(checked) == len(lab2.nodes), [r["message"] for r in checked]
    for record in checked:
        measured = {m["name"]: m["value"] for m in record["measured"]}
        assert measured == {"eris": 2, "nic_indexes": 2}, record
    faults.inject("nic-index", NODE, None, Path(lab2.state_dir))
    try:
        code, records = run_static(str(inventory), tmp_path / "fault", "-k", "nic_indexes")
    finally:
        faults.heal(NODE, Path(lab2.state_dir))
    assert code == 1
    checked = [r for r in records if r["check_id"] == "erdma_nic_index"]
    (bad,) = failing(records)
    assert bad["check_id"] == "erdma_nic_index" and bad["subject"] == NODE, bad
    assert bad["message"].startswith(
        f"{NODE}: ERIs eri-lab020, eni-lab021 share NIC index 0: the instance is "
        "capped at 1 Gbit/s instead of 2 (source S1); attach one with another "
        "NetworkCardIndex (AttachNetworkInterface)"
    ), bad["message"]
    assert {r["verdict"] for r in checked if r["subject"] != NODE} == {"pass"}
