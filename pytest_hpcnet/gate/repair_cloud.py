"""The ECS calls of the repair loop: `RebootInstance` and `DescribeInstanceStatus`, through
the SDK core's generic call the audit's readers use, with the audit's credentials."""

from __future__ import annotations

from typing import Any

from pytest_hpcnet.cloud.audit import AuditReader, open_reader
from pytest_hpcnet.inventory.bench_settings import CloudSettings


class EcsPower(AuditReader):
    """The audit's reader plus a reboot and the instance's status."""

    def reboot(self, instance_id: str) -> None:
        """Reboot `instance_id` (a normal stop first, `ForceStop=false`)."""
        self._rpc("ecs:RebootInstance", {"InstanceId": instance_id, "ForceStop": "false"})

    def status(self, instance_id: str) -> str | None:
        """The instance's `Status` (Running, Stopping, Starting, Stopped), None if unlisted."""
        body = self._rpc(
            "ecs:DescribeInstanceStatus",
            {"RegionId": self.region_id, "InstanceId.1": instance_id, "PageSize": 1},
        )
        for item in (body.get("InstanceStatuses") or {}).get("InstanceStatus") or []:
            if item.get("InstanceId") == instance_id:
                return str(item.get("Status") or "") or None
        return None


def open_power(region_id: str, settings: CloudSettings, credential: Any = None) -> EcsPower:
    """An `EcsPower` with the inventory's `cloud:` endpoints and credentials (their secret
    registered for redaction before any call)."""
    return open_reader(region_id, settings, credential, reader=EcsPower)  # type: ignore[return-value]
