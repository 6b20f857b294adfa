"""Read instances, interfaces, instance types, security groups (rules and type), prefix
lists, port lists and network ACLs through the SDK.

Each call is the official SDK core's generic RPC call (`alibabacloud_tea_openapi`'s
`call_api`, imported lazily: the evaluators do not need it), with the ECS (2014-05-26) and
VPC (2016-04-28) API versions and parameters the generated clients send. Credentials come from the
`alibabacloud_credentials` default chain unless a credential client is given. Calls
are retried with tenacity on `Throttling*` error codes; a permission error becomes a
one-line `CloudPermissionError` naming the RAM action to grant.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from pytest_hpcnet.cloud.interfaces import NetworkInterface, interface_from_api
from pytest_hpcnet.cloud.nacl_model import NetworkAcl, network_acl_from_api
from pytest_hpcnet.cloud.rules import PortRange, parse_cidr
from pytest_hpcnet.cloud.secgroup_model import SecurityGroup, security_group_from_api

SG_PAGE_SIZE = 1000  # DescribeSecurityGroupAttribute MaxResults upper bound
INSTANCE_PAGE_SIZE = 100  # DescribeInstances MaxResults upper bound
INSTANCE_TYPE_BATCH = 10  # InstanceTypes.N accepts up to 10 types per call
GROUP_ID_BATCH = 100  # DescribeSecurityGroups SecurityGroupIds takes up to 100 ids
GROUP_PAGE_SIZE = 100  # DescribeSecurityGroups MaxResults upper bound
ENI_PAGE_SIZE = 500  # DescribeNetworkInterfaces MaxResults upper bound
API_VERSIONS = {"ecs": "2014-05-26", "vpc": "2016-04-28"}
"""The RPC API version of each service the readers call."""
PERMISSION_CODES = ("Forbidden.RAM", "NoPermission", "Forbidden.NoPermission")

T = TypeVar("T")


class CloudReadError(RuntimeError):
    """A control-plane read that failed (after retries for throttling)."""


class CloudPermissionError(CloudReadError):
    """The credentials lack a RAM permission; `ram_action` names it (`ecs:...`)."""

    def __init__(self, ram_action: str, code: str, message: str) -> None:
        super().__init__(
            f"missing RAM permission {ram_action} ({code}): grant it to the audit's RAM user "
            f"or role. {message}".replace("\n", " ").strip()
        )
        self.ram_action = ram_action
        self.code = code


def error_code(error: BaseException) -> str:
    """The API error code of an SDK exception ('' when it has none)."""
    code = getattr(error, "code", None)
    if not code or code == "None":
        data = getattr(error, "data", None) or {}
        code = data.get("Code") or data.get("code") if isinstance(data, dict) else None
    return str(code or "")


def is_throttling(error: BaseException) -> bool:
    """Whether `error` is a `Throttling*` API error."""
    return error_code(error).startswith("Throttling")


def is_permission_error(error: BaseException) -> bool:
    """Whether `error` says the caller lacks a RAM permission."""
    code = error_code(error)
    return code in PERMISSION_CODES or code.startswith("Forbidden.RAM")


@dataclass(frozen=True)
class InstanceInfo:
    """What the audit needs of one ECS instance (from DescribeInstances)."""

    instance_id: str
    instance_type: str
    vpc_id: str | None
    vswitch_id: str | None
    private_ips: tuple[str, ...]
    security_group_ids: tuple[str, ...]
    status: str | None = None


def instance_from_api(item: dict[str, Any]) -> InstanceInfo:
    """One `Instances.Instance[]` item of DescribeInstances as an InstanceInfo."""
    vpc = item.get("VpcAttributes") or {}
    ips = (vpc.get("PrivateIpAddress") or {}).get("IpAddress") or []
    groups = (item.get("SecurityGroupIds") or {}).get("SecurityGroupId") or []
    return InstanceInfo(
        instance_id=item["InstanceId"],
        instance_type=item.get("InstanceType", ""),
        vpc_id=vpc.get("VpcId") or None,
        vswitch_id=vpc.get("VSwitchId") or None,
        private_ips=tuple(ips),
        security_group_ids=tuple(groups),
        status=item.get("Status"),
    )


@dataclass(frozen=True)
class InstanceTypeInfo:
    """What the checks need of one instance type (one `InstanceTypes.InstanceType[]` item of
    DescribeInstanceTypes): `EriQuantity`, `CpuCoreCount` (the vCPUs) and `MemorySize` (GiB,
    a float: 0.5 for the smallest types); None where the answer leaves one out."""

    instance_type: str
    eri_quantity: int = 0
    cpus: int | None = None
    memory_gib: float | None = None


def instance_type_from_api(item: dict[str, Any]) -> InstanceTypeInfo:
    """One `InstanceTypes.InstanceType[]` item as an InstanceTypeInfo."""
    cpus, memory = item.get("CpuCoreCount"), item.get("MemorySize")
    return InstanceTypeInfo(
        instance_type=item["InstanceTypeId"],
        eri_quantity=int(item.get("EriQuantity") or 0),
        cpus=None if cpus is None else int(cpus),
        memory_gib=None if memory is None else float(memory),
    )


class AliyunReader:
    """Control-plane reads of one region.

    `credential` is an `alibabacloud_credentials.client.Client` (default chain when
    None); `ecs_endpoint`/`vpc_endpoint` and `protocol` override the SDK's endpoint
    resolution (tests point them at a local server over http).
    """

    def __init__(
        self,
        region_id: str,
        *,
        credential: Any = None,
        ecs_endpoint: str | None = None,
        vpc_endpoint: str | None = None,
        protocol: str = "https",
        attempts: int = 5,
        max_wait_seconds: float = 20.0,
        wait_multiplier: float = 0.5,
    ) -> None:
        from alibabacloud_credentials.client import Client as CredentialClient
        from alibabacloud_tea_openapi.client import Client as OpenApiClient
        from alibabacloud_tea_openapi.utils_models import Config

        self.region_id = region_id
        self._attempts = attempts
        self._wait = wait_exponential(multiplier=wait_multiplier, max=max_wait_seconds)
        credential = credential if credential is not None else CredentialClient()

        def client(endpoint: str | None, service: str) -> Any:
            return OpenApiClient(
                Config(
                    credential=credential,
                    region_id=region_id,
                    endpoint=endpoint or f"{service}.{region_id}.aliyuncs.com",
                    protocol=protocol,
                )
            )

        self._clients = {"ecs": client(ecs_endpoint, "ecs"), "vpc": client(vpc_endpoint, "vpc")}

    def _rpc(self, ram_action: str, query: dict[str, Any]) -> dict[str, Any]:
        """The body of one RPC-style call, `ram_action` being `service:Action`.

        The SDK core's generic call (`call_api`, the same request the ECS and VPC clients'
        `*_with_options` methods build): the generated ECS and VPC packages import their
        whole API's models, about 4,000 modules and half a second of every run's start."""
        from alibabacloud_tea_openapi.utils import Utils
        from alibabacloud_tea_openapi.utils_models import OpenApiRequest, Params
        from darabonba.runtime import RuntimeOptions

        service, action = ram_action.split(":")
        params = Params(
            action=action,
            version=API_VERSIONS[service],
            protocol="HTTPS",
            pathname="/",
            method="POST",
            auth_type="AK",
            style="RPC",
            req_body_type="formData",
            body_type="json",
        )
        request = OpenApiRequest(
            query=Utils.query({k: v for k, v in query.items() if v is not None})
        )
        client = self._clients[service]
        response = self._call(
            ram_action, lambda: client.call_api(params, request, RuntimeOptions())
        )
        return dict(response.get("body") or {})

    def _call(self, ram_action: str, call: Callable[[], T]) -> T:
        retrying = Retrying(
            retry=retry_if_exception(is_throttling),
            stop=stop_after_attempt(self._attempts),
            wait=self._wait,
            reraise=True,
        )
        try:
            return retrying(call)
        except Exception as error:
            if is_permission_error(error):
                message = str(getattr(error, "message", "") or "").splitlines()[0:1]
                raise CloudPermissionError(
                    ram_action, error_code(error), " ".join(message)
                ) from error
            if type(error).__module__.startswith(("alibabacloud", "darabonba")):
                code = error_code(error) or type(error).__name__
                first_line = (str(error).splitlines() or [""])[0]
                raise CloudReadError(f"{ram_action} failed: {code}: {first_line}") from error
            raise

    def _instance_pages(self, **filters: Any) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            query = {"RegionId": self.region_id, "MaxResults": INSTANCE_PAGE_SIZE}
            body = self._rpc("ecs:DescribeInstances", {**query, "NextToken": token, **filters})
            yield body
            token = body.get("NextToken") or None
            if not token:
                return

    def instances(
        self, *, instance_ids: Iterable[str] | None = None, vpc_id: str | None = None
    ) -> list[InstanceInfo]:
        """Instances of the region, optionally only `instance_ids` or one VPC."""
        filters: dict[str, Any] = {}
        if instance_ids is not None:
            filters["InstanceIds"] = json.dumps(list(instance_ids))
        if vpc_id is not None:
            filters["VpcId"] = vpc_id
        found = []
        for body in self._instance_pages(**filters):
            for item in (body.get("Instances") or {}).get("Instance") or []:
                found.append(instance_from_api(item))
        return found

    def eri_quantity(self, instance_types: Iterable[str]) -> dict[str, int]:
        """`EriQuantity` (elastic RDMA interfaces) of each instance type."""
        found = self.instance_types(instance_types)
        return {name: info.eri_quantity for name, info in found.items()}

    def instance_types(self, instance_types: Iterable[str]) -> dict[str, InstanceTypeInfo]:
        """Each instance type's ERIs, vCPUs and memory (DescribeInstanceTypes, 10 a call)."""
        wanted = sorted(set(instance_types))
        found: dict[str, InstanceTypeInfo] = {}
        for start in range(0, len(wanted), INSTANCE_TYPE_BATCH):
            batch = wanted[start : start + INSTANCE_TYPE_BATCH]
            token: str | None = None
            while True:
                body = self._rpc(
                    "ecs:DescribeInstanceTypes", {"InstanceTypes": batch, "NextToken": token}
                )
                for item in (body.get("InstanceTypes") or {}).get("InstanceType") or []:
                    info = instance_type_from_api(item)
                    found[info.instance_type] = info
                token = body.get("NextToken") or None
                if not token:
                    break
        return found

    def security_group(
        self, security_group_id: str, *, group_type: str | None = None
    ) -> SecurityGroup:
        """A security group with all its rules (pages joined through NextToken)."""
        pages: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            body = self._rpc(
                "ecs:DescribeSecurityGroupAttribute",
                {
                    "RegionId": self.region_id,
                    "SecurityGroupId": security_group_id,
                    "MaxResults": SG_PAGE_SIZE,
                    "NextToken": token,
                },
            )
            pages.append(body)
            token = body.get("NextToken") or None
            if not token:
                break
        return security_group_from_api(pages[0], group_type=group_type, extra_pages=pages[1:])

    def network_acl(self, network_acl_id: str) -> NetworkAcl:
        """A network ACL with its entries and bound vSwitches."""
        body = self._rpc(
            "vpc:DescribeNetworkAclAttributes",
            {"RegionId": self.region_id, "NetworkAclId": network_acl_id},
        )
        return network_acl_from_api(body)

    def security_group_types(self, security_group_ids: Iterable[str]) -> dict[str, str]:
        """`SecurityGroupType` (`normal` or `enterprise`) of each group, from
        DescribeSecurityGroups (the attribute call does not return it); a group the
        answer leaves out is missing from the result."""
        wanted = sorted(set(security_group_ids))
        types: dict[str, str] = {}
        for start in range(0, len(wanted), GROUP_ID_BATCH):
            batch = wanted[start : start + GROUP_ID_BATCH]
            token: str | None = None
            while True:
                body = self._rpc(
                    "ecs:DescribeSecurityGroups",
                    {
                        "RegionId": self.region_id,
                        "SecurityGroupIds": json.dumps(batch),
                        "MaxResults": GROUP_PAGE_SIZE,
                        "NextToken": token,
                    },
                )
                for item in (body.get("SecurityGroups") or {}).get("SecurityGroup") or []:
                    kind = str(item.get("SecurityGroupType") or "").strip()
                    if item.get("SecurityGroupId") and kind:
                        types[item["SecurityGroupId"]] = kind
                token = body.get("NextToken") or None
                if not token:
                    break
        return types

    def network_interfaces(self, instance_id: str) -> list[NetworkInterface]:
        """Every ENI attached to `instance_id` (primary, secondary, ERIs), all pages."""
        found: list[NetworkInterface] = []
        token: str | None = None
        while True:
            body = self._rpc(
                "ecs:DescribeNetworkInterfaces",
                {
                    "RegionId": self.region_id,
                    "InstanceId": instance_id,
                    "MaxResults": ENI_PAGE_SIZE,
                    "NextToken": token,
                },
            )
            sets = (body.get("NetworkInterfaceSets") or {}).get("NetworkInterfaceSet") or []
            found.extend(interface_from_api(item) for item in sets)
            token = body.get("NextToken") or None
            if not token:
                return found

    def prefix_list(self, prefix_list_id: str) -> tuple[str, ...]:
        """The CIDR blocks of a prefix list (DescribePrefixListAttributes `Entries.Entry[]`)."""
        body = self._rpc(
            "ecs:DescribePrefixListAttributes",
            {"RegionId": self.region_id, "PrefixListId": prefix_list_id},
        )
        entries = (body.get("Entries") or {}).get("Entry") or []
        cidrs = tuple(str(entry.get("Cidr") or "").strip() for entry in entries)
        for cidr in cidrs:
            parse_cidr(cidr)  # a malformed entry is a CloudModelError, not a silent miss
        return cidrs

    def port_range_list(self, port_range_list_id: str) -> tuple[PortRange, ...]:
        """The port ranges of a port list (DescribePortRangeListEntries `Entries[]`)."""
        body = self._rpc(
            "ecs:DescribePortRangeListEntries",
            {"RegionId": self.region_id, "PortRangeListId": port_range_list_id},
        )
        entries = body.get("Entries") or []
        return tuple(PortRange.parse(str(entry.get("PortRange") or "")) for entry in entries)
