"""The lab's stand-in for the ECS and VPC OpenAPI, answering in the SDK models' shapes.

`hpcnet lab up` serves the lab's own world with it (`control_plane.py`, `cloud_world.py`);
tests serve worlds of their own with `FakeAliyun`. Both bind 127.0.0.1 only and serve a
`CloudWorld` (instances, their network interfaces, instance types, security
groups and their types, prefix lists, port lists, vSwitches, network ACLs) with the
documented paging (`MaxResults`/`NextToken`) and error bodies (`{"Code": ..., "Message":
...}`). Every body has the keys and value types of the `*ResponseBody` model of
alibabacloud_ecs20140526 / alibabacloud_vpc20160428 (tests/unit/test_cloud_fake_shapes.py
round-trips each one through its model). Scripted answers queued with `script()` are
served first (throttling, access denied), and every request's parameters are recorded.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

Answer = tuple[int, dict[str, Any]]
LOOPBACK = "127.0.0.1"
MAX_BODY = 65536
"""The largest request body read (the audit's requests are a few hundred bytes)."""
REQUEST_TIMEOUT_S = 10


def instance_item(
    instance_id: str,
    instance_type: str,
    private_ip: str,
    security_group_ids: Iterable[str],
    *,
    vpc_id: str = "vpc-1",
    vswitch_id: str = "vsw-1",
    status: str = "Running",
) -> dict[str, Any]:
    """One `Instances.Instance[]` item of DescribeInstances."""
    return {
        "InstanceId": instance_id,
        "InstanceType": instance_type,
        "Status": status,
        "VpcAttributes": {
            "VpcId": vpc_id,
            "VSwitchId": vswitch_id,
            "PrivateIpAddress": {"IpAddress": [private_ip]},
        },
        "SecurityGroupIds": {"SecurityGroupId": list(security_group_ids)},
    }


def network_interface_item(
    interface_id: str,
    instance_id: str,
    private_ip: str,
    security_group_ids: Iterable[str],
    *,
    vswitch_id: str = "vsw-1",
    vpc_id: str = "vpc-1",
    kind: str = "Secondary",
    traffic_mode: str = "Standard",
    network_card_index: int = 0,
) -> dict[str, Any]:
    """One `NetworkInterfaceSets.NetworkInterfaceSet[]` item of DescribeNetworkInterfaces;
    `traffic_mode="HighPerformance"` makes it an ERI."""
    return {
        "NetworkInterfaceId": interface_id,
        "InstanceId": instance_id,
        "Type": kind,
        "NetworkInterfaceTrafficMode": traffic_mode,
        "Attachment": {"InstanceId": instance_id, "NetworkCardIndex": network_card_index},
        "PrivateIpAddress": private_ip,
        "PrivateIpSets": {"PrivateIpSet": [{"PrivateIpAddress": private_ip, "Primary": True}]},
        "SecurityGroupIds": {"SecurityGroupId": list(security_group_ids)},
        "VSwitchId": vswitch_id,
        "VpcId": vpc_id,
        "Status": "InUse",
    }


def primary_interface(instance: dict[str, Any]) -> dict[str, Any]:
    """The primary ENI the cloud reports for a DescribeInstances item."""
    vpc = instance["VpcAttributes"]
    return network_interface_item(
        f"eni-{instance['InstanceId']}",
        instance["InstanceId"],
        vpc["PrivateIpAddress"]["IpAddress"][0],
        instance["SecurityGroupIds"]["SecurityGroupId"],
        vswitch_id=vpc["VSwitchId"],
        vpc_id=vpc["VpcId"],
        kind="Primary",
    )


def permission(
    direction: str,
    protocol: str,
    ports: str,
    peer_cidr: str,
    *,
    policy: str = "Accept",
    priority: int = 1,
    local_cidr: str | None = None,
    rule_id: str | None = None,
) -> dict[str, Any]:
    """One `Permissions.Permission[]` item; `local_cidr` makes it a quintuple rule."""
    peer_key, local_key = (
        ("SourceCidrIp", "DestCidrIp") if direction == "ingress" else ("DestCidrIp", "SourceCidrIp")
    )
    item: dict[str, Any] = {
        "Direction": direction,
        "IpProtocol": protocol,
        "PortRange": ports,
        peer_key: peer_cidr,
        "Policy": policy,
        "Priority": str(priority),
        "NicType": "intranet",
    }
    if local_cidr:
        item[local_key] = local_cidr
    if rule_id:
        item["SecurityGroupRuleId"] = rule_id
    return item


def error(code: str, message: str) -> dict[str, Any]:
    """A documented error body."""
    return {"RequestId": "fake", "Code": code, "Message": message}


REBOOT_DOWN_S = 3.0
"""How long a rebooted instance of a fake world is away (a real one takes one to a few
minutes; the lab keeps its tests short)."""
STOPPING_SHARE = 0.3
"""The part of a reboot spent `Stopping` (the rest `Starting`)."""


@dataclass
class Reboot:
    """One RebootInstance in progress: accepted at `at` (monotonic), back when `up_at` is set
    (by the world's `on_reboot`, or `down_s` after `at` when nobody sets it)."""

    at: float
    down_s: float = REBOOT_DOWN_S
    up_at: float | None = None
    managed: bool = False
    """True when `on_reboot` sets `up_at` itself (the lab: once sshd is back)."""

    def status(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        if self.up_at is not None and now >= self.up_at:
            return "Running"
        if not self.managed and now >= self.at + self.down_s:
            return "Running"
        return "Stopping" if now < self.at + STOPPING_SHARE * self.down_s else "Starting"


@dataclass
class CloudWorld:
    """What the fake API describes; bodies are plain dicts in the API's shape."""

    region_id: str = "cn-hangzhou"
    instances: list[dict[str, Any]] = field(default_factory=list)
    eri: dict[str, int] = field(default_factory=dict)
    """Instance type -> EriQuantity."""
    type_specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Instance type -> its further `InstanceType` fields (`CpuCoreCount`, `MemorySize`)."""
    security_groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Group id -> {"InnerAccessPolicy": ..., "Permissions": [...], ...}."""
    vswitch_acls: dict[str, str] = field(default_factory=dict)
    """vSwitch id -> bound NetworkAclId (DescribeVSwitchAttributes)."""
    network_acls: dict[str, dict[str, Any]] = field(default_factory=dict)
    """ACL id -> `NetworkAclAttribute` body."""
    group_types: dict[str, str] = field(default_factory=dict)
    """Group id -> `SecurityGroupType` (`normal` when absent), told by DescribeSecurityGroups."""
    network_interfaces: list[dict[str, Any]] = field(default_factory=list)
    """Secondary ENIs and ERIs (and any primary ENI that differs from the instance record);
    every instance without a listed `Primary` interface gets one from its own record."""
    prefix_lists: dict[str, list[str]] = field(default_factory=dict)
    """Prefix list id -> CIDR blocks."""
    port_range_lists: dict[str, list[str]] = field(default_factory=dict)
    """Port list id -> port ranges (`80/80`)."""
    page_size: int | None = None
    """Cap on items per page (forces paging whatever MaxResults says)."""
    reboots: dict[str, Reboot] = field(default_factory=dict)
    """Instance id -> its reboot in progress (RebootInstance); shared between the worlds a
    server builds, so a reboot outlives a rebuild."""
    reboot_down_s: float = REBOOT_DOWN_S
    """How long a rebooted instance is away when no `on_reboot` says when it is back."""
    on_reboot: Callable[[str, Reboot], None] | None = None
    """Called with the instance id once RebootInstance is accepted (the lab restarts the
    node's sshd; FakeAliyun's worlds come back after `Reboot.down_s`)."""

    def status(self, instance_id: str, listed: str = "Running") -> str:
        """The instance's status now: `Stopping`, then `Starting` while it reboots."""
        reboot = self.reboots.get(instance_id)
        return reboot.status() if reboot is not None else listed

    def add_group(
        self,
        group_id: str,
        permissions: list[dict[str, Any]],
        inner_access_policy: str = "Drop",
        group_type: str = "normal",
    ) -> None:
        """Add (or replace) a security group (`group_type` `normal` or `enterprise`)."""
        self.security_groups[group_id] = {
            "InnerAccessPolicy": inner_access_policy,
            "Permissions": permissions,
        }
        self.group_types[group_id] = group_type

    def interfaces(self) -> list[dict[str, Any]]:
        """Every ENI: the listed ones plus a primary ENI per instance that has none listed."""
        listed = list(self.network_interfaces)
        has_primary = {i["InstanceId"] for i in listed if i.get("Type") == "Primary"}
        implied = [
            primary_interface(i) for i in self.instances if i["InstanceId"] not in has_primary
        ]
        return implied + listed

    # -- actions -------------------------------------------------------------------------

    def answer(self, params: dict[str, str]) -> Answer:
        """The answer to one request (by its `Action`)."""
        handler = getattr(self, f"_{params.get('Action', '')}", None)
        if handler is None:
            return 404, error("InvalidAction.NotFound", f"unknown action {params.get('Action')}")
        return handler(params)

    def _page(self, items: list[Any], params: dict[str, str]) -> tuple[list[Any], str]:
        size = int(params.get("MaxResults") or 10)
        if self.page_size:
            size = min(size, self.page_size)
        start = int(params.get("NextToken") or 0)
        end = start + size
        return items[start:end], (str(end) if end < len(items) else "")

    def _DescribeInstances(self, params: dict[str, str]) -> Answer:
        found = self.instances
        if params.get("InstanceIds"):
            wanted = set(json.loads(params["InstanceIds"]))
            found = [i for i in found if i["InstanceId"] in wanted]
        if params.get("VpcId"):
            found = [i for i in found if i["VpcAttributes"]["VpcId"] == params["VpcId"]]
        page, token = self._page(found, params)
        page = [{**i, "Status": self.status(i["InstanceId"], i["Status"])} for i in page]
        body = {"RequestId": "fake", "TotalCount": len(found), "NextToken": token}
        return 200, {**body, "Instances": {"Instance": page}}

    def _instance(self, instance_id: str) -> dict[str, Any] | None:
        return next((i for i in self.instances if i["InstanceId"] == instance_id), None)

    def _RebootInstance(self, params: dict[str, str]) -> Answer:
        instance_id = params.get("InstanceId", "")
        instance = self._instance(instance_id)
        if instance is None:
            return 404, error(
                "InvalidInstanceId.NotFound", "The specified instance does not exist."
            )
        if self.status(instance_id, instance.get("Status", "Running")) != "Running":
            message = "The current status of the resource does not support this operation."
            return 403, error("IncorrectInstanceStatus", message)
        managed = self.on_reboot is not None
        reboot = Reboot(time.monotonic(), self.reboot_down_s, managed=managed)
        self.reboots[instance_id] = reboot
        if self.on_reboot is not None:
            self.on_reboot(instance_id, reboot)
        return 200, {"RequestId": "fake"}

    def _DescribeInstanceStatus(self, params: dict[str, str]) -> Answer:
        wanted = {v for k, v in params.items() if k.startswith("InstanceId.")}
        found = [i for i in self.instances if not wanted or i["InstanceId"] in wanted]
        size = int(params.get("PageSize") or 10)
        number = int(params.get("PageNumber") or 1)
        page = found[(number - 1) * size : number * size]
        items = [
            {"InstanceId": i["InstanceId"], "Status": self.status(i["InstanceId"], i["Status"])}
            for i in page
        ]
        return 200, {
            "RequestId": "fake",
            "TotalCount": len(found),
            "PageNumber": number,
            "PageSize": size,
            "InstanceStatuses": {"InstanceStatus": items},
        }

    def _DescribeInstanceTypes(self, params: dict[str, str]) -> Answer:
        wanted = {v for k, v in params.items() if k.startswith("InstanceTypes")}
        items = [
            {"InstanceTypeId": name, "EriQuantity": self.eri.get(name, 0)}
            | self.type_specs.get(name, {})
            for name in sorted(self.eri.keys() | self.type_specs.keys())
            if not wanted or name in wanted
        ]
        return 200, {"RequestId": "fake", "NextToken": "", "InstanceTypes": {"InstanceType": items}}

    def _DescribeSecurityGroupAttribute(self, params: dict[str, str]) -> Answer:
        group_id = params.get("SecurityGroupId", "")
        group = self.security_groups.get(group_id)
        if group is None:
            message = "The specified SecurityGroupId does not exist."
            return 404, error("InvalidSecurityGroupId.NotFound", message)
        page, token = self._page(list(group.get("Permissions", [])), params)
        body = {key: value for key, value in group.items() if key != "Permissions"}
        return 200, {
            "RequestId": "fake",
            "RegionId": self.region_id,
            "SecurityGroupId": group_id,
            **body,
            "NextToken": token,
            "Permissions": {"Permission": page},
        }

    def _DescribeSecurityGroups(self, params: dict[str, str]) -> Answer:
        wanted = json.loads(params.get("SecurityGroupIds") or "[]")
        ids = [g for g in sorted(self.security_groups) if not wanted or g in wanted]
        page, token = self._page(ids, params)
        items = [
            {
                "SecurityGroupId": group_id,
                "SecurityGroupType": self.group_types.get(group_id, "normal"),
                "VpcId": "vpc-1",
            }
            for group_id in page
        ]
        body = {"RequestId": "fake", "RegionId": self.region_id, "TotalCount": len(ids)}
        return 200, {**body, "NextToken": token, "SecurityGroups": {"SecurityGroup": items}}

    def _DescribeNetworkInterfaces(self, params: dict[str, str]) -> Answer:
        found = self.interfaces()
        if params.get("InstanceId"):
            found = [i for i in found if i.get("InstanceId") == params["InstanceId"]]
        page, token = self._page(found, params)
        body = {"RequestId": "fake", "TotalCount": len(found), "NextToken": token}
        return 200, {**body, "NetworkInterfaceSets": {"NetworkInterfaceSet": page}}

    def _DescribePrefixListAttributes(self, params: dict[str, str]) -> Answer:
        list_id = params.get("PrefixListId", "")
        cidrs = self.prefix_lists.get(list_id)
        if cidrs is None:
            return 404, error("InvalidPrefixListId.NotFound", "The prefix list does not exist.")
        family = "IPv6" if any(":" in cidr for cidr in cidrs) else "IPv4"
        return 200, {
            "RequestId": "fake",
            "PrefixListId": list_id,
            "PrefixListName": list_id,
            "AddressFamily": family,
            "MaxEntries": max(len(cidrs), 1),
            "Entries": {"Entry": [{"Cidr": cidr, "Description": ""} for cidr in cidrs]},
        }

    def _DescribePortRangeListEntries(self, params: dict[str, str]) -> Answer:
        list_id = params.get("PortRangeListId", "")
        ranges = self.port_range_lists.get(list_id)
        if ranges is None:
            return 404, error("InvalidPortRangeListId.NotFound", "The port list does not exist.")
        entries = [{"PortRange": port_range, "Description": ""} for port_range in ranges]
        return 200, {"RequestId": "fake", "Entries": entries}

    def _DescribeVSwitchAttributes(self, params: dict[str, str]) -> Answer:
        vswitch_id = params.get("VSwitchId", "")
        return 200, {
            "RequestId": "fake",
            "VSwitchId": vswitch_id,
            "NetworkAclId": self.vswitch_acls.get(vswitch_id, ""),
        }

    def _DescribeNetworkAclAttributes(self, params: dict[str, str]) -> Answer:
        acl_id = params.get("NetworkAclId", "")
        acl = self.network_acls.get(acl_id)
        if acl is None:
            return 404, error(
                "InvalidNetworkAcl.NotFound", "The specified network ACL does not exist."
            )
        return 200, {"RequestId": "fake", "NetworkAclAttribute": {"NetworkAclId": acl_id, **acl}}


class FakeAliyun:
    """An ECS+VPC OpenAPI on 127.0.0.1 serving `world` (start with `with FakeAliyun(...)`)."""

    def __init__(self, world: CloudWorld | None = None) -> None:
        self.world = world or CloudWorld()
        self.scripted: dict[str, deque[Answer]] = defaultdict(deque)
        self.requests: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def script(self, action: str, body: dict[str, Any], status: int = 200) -> None:
        """Serve this answer to the next `action` request, before the world answers."""
        self.scripted[action].append((status, body))

    def calls(self, action: str) -> list[dict[str, str]]:
        """The parameters of every `action` request so far."""
        return [request for request in self.requests if request.get("Action") == action]

    def handle(self, params: dict[str, str]) -> Answer:
        """Record a request and answer it."""
        with self._lock:
            self.requests.append(params)
            queue = self.scripted.get(params.get("Action", ""))
            if queue:
                return queue.popleft()
        return self.world.answer(params)

    @property
    def endpoint(self) -> str:
        """`127.0.0.1:PORT` for `ecs_endpoint`/`vpc_endpoint` (with protocol http)."""
        assert self._server is not None, "FakeAliyun is not started"
        return f"{LOOPBACK}:{self._server.server_address[1]}"

    def start(self) -> FakeAliyun:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        self._server = ThreadingHTTPServer((LOOPBACK, 0), api_handler(self.handle))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> FakeAliyun:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def api_handler(answer: Callable[[dict[str, str]], Answer]) -> type[BaseHTTPRequestHandler]:
    """A request handler that answers each request's parameters (query string, form body,
    and the ACS3 `x-acs-action` header) with `answer`, as JSON."""

    class Handler(BaseHTTPRequestHandler):
        timeout = REQUEST_TIMEOUT_S

        def _serve(self) -> None:
            query = parse_qs(urlparse(self.path).query, keep_blank_values=True)
            params = {key: values[-1] for key, values in query.items()}
            if "x-acs-action" in self.headers:  # ACS3 signature: action in a header
                params.setdefault("Action", self.headers["x-acs-action"])
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                status, body = 413, error("RequestTooLarge", f"body over {MAX_BODY} bytes")
            else:
                if length:
                    form = parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
                    params.update({key: values[-1] for key, values in form.items()})
                status, body = answer(params)
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json;charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = _serve
        do_POST = _serve

        def log_message(self, *args: Any) -> None:
            pass

    return Handler
