"""The ECS calls of the repair loop: `RebootInstance` and `DescribeInstanceStatus`, through
the SDK core's generic call the audit's readers use, with the audit's credentials."""

from __future__ import annotations

from typing import Any

from pytest_hpcnet.cloud.audit import AuditReader, credential_client
from pytest_hpcnet.cloud.credentials import scrub
from pytest_hpcnet.cloud.readers import CloudReadError
from pytest_hpcnet.inventory.bench_settings import CloudSettings
from pytest_hpcnet.redact import register_secret


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
    if credential is None:
        credential = credential_client(settings.credentials_file)
    try:
        model = credential.get_credential()
    except Exception as error:  # the SDK raises bare exceptions from its providers
        first = (str(error).splitlines() or [type(error).__name__])[0]
        raise CloudReadError(scrub(f"cannot load Alibaba Cloud credentials: {first}")) from None
    register_secret(getattr(model, "access_key_secret", None))
    register_secret(getattr(model, "security_token", None))
    return EcsPower(
        region_id,
        credential=credential,
        ecs_endpoint=settings.ecs_endpoint,
        vpc_endpoint=settings.vpc_endpoint,
        protocol=settings.protocol,
    )
