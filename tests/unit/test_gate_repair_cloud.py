"""The repair loop's ECS side: RebootInstance and DescribeInstanceStatus through the SDK
against the fake API (in the SDK models' shapes), and the waits of `LiveRepairer.reboot`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("alibabacloud_tea_openapi")
ecs_models = pytest.importorskip("alibabacloud_ecs20140526.models")

from pytest_hpcnet.gate.repair import RepairError  # noqa: E402
from pytest_hpcnet.gate.repair_cloud import EcsPower  # noqa: E402
from pytest_hpcnet.gate.repair_live import LiveRepairer  # noqa: E402
from pytest_hpcnet.inventory.gate_settings import RepairSettings  # noqa: E402
from pytest_hpcnet.lab.cloud_api import (  # noqa: E402
    CloudWorld,
    FakeAliyun,
    Reboot,
    instance_item,
)
from pytest_hpcnet.transport.results import CommandResult  # noqa: E402


class Credential:
    """A static AccessKey for the fake endpoint."""

    def get_credential(self):
        from alibabacloud_credentials.models import CredentialModel

        return CredentialModel(access_key_id="id", access_key_secret="secret", type="access_key")

    def get_access_key_id(self):
        return "id"

    def get_access_key_secret(self):
        return "secret"

    def get_security_token(self):
        return None

    def get_type(self):
        return "access_key"


def world(down_s: float = 0.3) -> CloudWorld:
    w = CloudWorld(reboot_down_s=down_s)
    w.instances = [instance_item(f"i-{n}", "ecs.x", f"10.0.0.{n}", ["sg-1"]) for n in (1, 2)]
    return w


def power(fake: FakeAliyun) -> EcsPower:
    return EcsPower(
        "cn-hangzhou",
        credential=Credential(),
        ecs_endpoint=fake.endpoint,
        vpc_endpoint=fake.endpoint,
        protocol="http",
        attempts=1,
    )


def test_reboot_answers_in_the_sdk_shapes_and_the_status_comes_back():
    w = world()
    ok, body = w.answer({"Action": "RebootInstance", "InstanceId": "i-1"})
    assert ok == 200 and ecs_models.RebootInstanceResponseBody().from_map(body).request_id
    params = {"Action": "DescribeInstanceStatus", "InstanceId.1": "i-1", "PageSize": "1"}
    status = w.answer(params)[1]
    model = ecs_models.DescribeInstanceStatusResponseBody().from_map(status)
    assert model.to_map() == status
    assert status["InstanceStatuses"]["InstanceStatus"] == [
        {"InstanceId": "i-1", "Status": "Stopping"}
    ]
    again = w.answer({"Action": "RebootInstance", "InstanceId": "i-1"})
    assert again[0] == 403 and again[1]["Code"] == "IncorrectInstanceStatus"
    missing = w.answer({"Action": "RebootInstance", "InstanceId": "i-9"})
    assert missing[0] == 404 and missing[1]["Code"] == "InvalidInstanceId.NotFound"


def test_reboot_status_goes_stopping_starting_running():
    r = Reboot(at=100.0, down_s=10.0)
    assert [r.status(t) for t in (100.0, 104.0, 110.0)] == ["Stopping", "Starting", "Running"]
    managed = Reboot(at=100.0, down_s=10.0, managed=True)
    assert managed.status(200.0) == "Starting"
    managed.up_at = 150.0
    assert managed.status(200.0) == "Running"


def test_ecs_power_through_the_sdk():
    with FakeAliyun(world()) as fake:
        ecs = power(fake)
        assert ecs.status("i-2") == "Running"
        ecs.reboot("i-2")
        assert ecs.status("i-2") == "Stopping"
        assert ecs.status("i-1") == "Running"
        assert fake.calls("RebootInstance")[0]["InstanceId"] == "i-2"
        assert fake.calls("RebootInstance")[0]["ForceStop"] == "false"
        deadline = time.monotonic() + 10  # down 0.3 s; bounded on a loaded host
        while ecs.status("i-2") != "Running" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ecs.status("i-2") == "Running"


def ssh_result(ok: bool) -> CommandResult:
    return CommandResult(
        "node01",
        "true",
        0 if ok else None,
        "",
        "",
        0.0,
        0.0,
        unreachable=None if ok else "connection refused",
    )


def repairer(
    power_, refusals: int, reboot_timeout_s: float = 0.5, ssh_timeout_s: float = 0.3
) -> LiveRepairer:
    """SSH refuses `refusals` connections, then answers; the waits bounded as given."""
    tries: list[int] = []

    def run(node, command, timeout_s):
        tries.append(1)
        return ssh_result(len(tries) > refusals)

    policy = RepairSettings(reboot_timeout_s=reboot_timeout_s, ssh_timeout_s=ssh_timeout_s)
    live = LiveRepairer(
        Path("inv.yaml"), None, Path("run"), policy, power=power_, run=run, poll_s=0.2
    )
    live._instances["node01"] = "i-1"
    return live


def test_live_reboot_times_running_and_ssh():
    with FakeAliyun(world(0.3)) as fake:
        # bounds far above the 0.3 s down time: a loaded host's slow calls are no timeout
        step = repairer(power(fake), 6, reboot_timeout_s=30, ssh_timeout_s=30).reboot("node01")
    assert step.reboot_to_running_s >= 0.2
    assert step.reboot_to_ssh_s - step.reboot_to_running_s >= 0.2  # 6 refusals 0.05 s apart


def test_live_reboot_is_bounded():
    with FakeAliyun(world(30)) as fake, pytest.raises(RepairError, match=r"not Running 0\.5 s"):
        repairer(power(fake), refusals=0).reboot("node01")
    with (
        FakeAliyun(world(0.1)) as fake,
        pytest.raises(RepairError, match=r"SSH not answering 0\.3"),
    ):
        repairer(power(fake), refusals=10**6).reboot("node01")


def test_a_reboot_that_never_happened_is_not_taken_for_one():
    with FakeAliyun(world()) as fake:
        fake.script("RebootInstance", {"RequestId": "accepted-but-lost"})
        live = repairer(power(fake), refusals=0)
        live.leave_running_s = 0.2
        with pytest.raises(RepairError, match=r"i-1 still Running 0\.2 s after RebootInstance"):
            live.reboot("node01")
