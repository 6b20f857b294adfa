"""A local stand-in for the ECS and VPC OpenAPI, answering documented-shape JSON.

For tests and the lab only: `FakeAliyun` binds 127.0.0.1 (never another address) and
serves a `CloudWorld` (instances, instance types, security groups, vSwitches, network
ACLs) with the documented paging (`MaxResults`/`NextToken`) and error bodies
(`{"Code": ..., "Message": ...}`). Scripted answers queued with `script()` are served
first (throttling, access denied), and every request's parameters are recorded.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

Answer = tuple[int, dict[str, Any]]
LOOPBACK = "127.0.0.1"


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


@dataclass
class CloudWorld:
    """What the fake API describes; bodies are plain dicts in the API's shape."""

    region_id: str = "cn-hangzhou"
    instances: list[dict[str, Any]] = field(default_factory=list)
    eri: dict[str, int] = field(default_factory=dict)
    """Instance type -> EriQuantity."""
    security_groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Group id -> {"InnerAccessPolicy": ..., "Permissions": [...], ...}."""
    vswitch_acls: dict[str, str] = field(default_factory=dict)
    """vSwitch id -> bound NetworkAclId (DescribeVSwitchAttributes)."""
    network_acls: dict[str, dict[str, Any]] = field(default_factory=dict)
    """ACL id -> `NetworkAclAttribute` body."""
    page_size: int | None = None
    """Cap on items per page (forces paging whatever MaxResults says)."""

    def add_group(
        self, group_id: str, permissions: list[dict[str, Any]], inner_access_policy: str = "Drop"
    ) -> None:
        """Add (or replace) a basic security group."""
        self.security_groups[group_id] = {
            "InnerAccessPolicy": inner_access_policy,
            "Permissions": permissions,
        }

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
        body = {"RequestId": "fake", "TotalCount": len(found), "NextToken": token}
        return 200, {**body, "Instances": {"Instance": page}}

    def _DescribeInstanceTypes(self, params: dict[str, str]) -> Answer:
        wanted = {v for k, v in params.items() if k.startswith("InstanceTypes")}
        items = [
            {"InstanceTypeId": name, "EriQuantity": quantity}
            for name, quantity in sorted(self.eri.items())
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
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                query = parse_qs(urlparse(self.path).query, keep_blank_values=True)
                params = {key: values[-1] for key, values in query.items()}
                if "x-acs-action" in self.headers:  # ACS3 signature: action in a header
                    params.setdefault("Action", self.headers["x-acs-action"])
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    form = parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
                    params.update({key: values[-1] for key, values in form.items()})
                status, body = fake.handle(params)
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

        self._server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
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
