"""A lab node's ECS-style metadata service (stdlib only; run as a script inside the node).

`lab up` starts one per node namespace, bound to 100.100.100.200:80 on that namespace's
`lo`. Values are read from `<state>/lab.json` as it is at every request, so faults (`vswitch`,
`zone`, `imds-token`) apply at once. Token mode as on ECS: `PUT /latest/api/token` with
`X-aliyun-ecs-metadata-token-ttl-seconds` returns a token; GETs carrying it in
`X-aliyun-ecs-metadata-token` succeed; GETs without one succeed too unless the node's
`metadata_token_required` is set (then 403). Unknown keys are 404.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TTL_HEADER = "X-aliyun-ecs-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aliyun-ecs-metadata-token"
MAX_TTL_S = 21600
MAX_TOKENS = 4096
LIFECHECK_GRACE_S = 60.0
"""After this long, the server exits once its lab is gone or records another PID for it."""
PREFIX = "/latest/meta-data/"
LAB_SUBNET = "198.18.0.0/24"
"""`state.SUBNET` (this script runs alone, stdlib only)."""
VPC_CIDR = "198.18.0.0/15"
"""The lab VPC: both ENIs' vSwitches (eth0's /24 and eth1's /24) lie inside it."""
SECONDARY_SUBNET = "198.18.1.0/24"
SECONDARY_VSWITCH = "vsw-lab0002"
"""`state.SECONDARY_SUBNET` and `state.SECONDARY_VSWITCH`: the secondary ENIs (eth1)."""


def interface_values(data: dict, node: dict) -> dict[str, str]:
    """`network/interfaces/macs/<mac>/...` of each ENI: eth0's, and eth1's where the lab
    gives nodes two ERIs (each ERI is an ENI, with its own MAC, address and vSwitch)."""
    address = node.get("address", "")
    enis = [(node.get("mac", ""), address, node.get("vswitch_id", ""), vswitch_cidr(address))]
    if data.get("eris") == 2 and node.get("secondary_mac"):
        enis.append(
            (node["secondary_mac"], node.get("secondary_address", ""), SECONDARY_VSWITCH,
             vswitch_cidr(node.get("secondary_address", ""), SECONDARY_SUBNET))
        )  # fmt: skip
    out: dict[str, str] = {}
    for i, (mac, address, vswitch, cidr) in enumerate(enis):
        if not mac:
            continue
        base = f"network/interfaces/macs/{mac}/"
        out |= {
            base + "network-interface-id": f"eni-lab{node['name'][4:]}{i}",
            base + "primary-ip-address": address,
            base + "private-ipv4s": f'["{address}"]',
            base + "netmask": "255.255.255.0",
            base + "vswitch-cidr-block": cidr,
            base + "vswitch-id": vswitch,
            base + "vpc-cidr-block": VPC_CIDR,
            base + "vpc-id": data.get("vpc_id", ""),
        }
    return out


_VALUES: dict[tuple[str, str], tuple[tuple[int, int, int], dict[str, str] | None]] = {}
"""Each node's metadata as last read, by (lab.json, node), with the file's (inode, mtime,
size) then: only this node's values are kept (a 1,024-node file is 0.5 MB per server)."""


def vswitch_cidr(address: str, default: str = LAB_SUBNET) -> str:
    """The /24 of a lab address (`LAB_SUBNET` for eth0 of the first 256 nodes)."""
    return ".".join(address.split(".")[:3]) + ".0/24" if address else default


def node_values(state_dir: Path, name: str) -> dict[str, str] | None:
    """Metadata keys -> values of node `name` from lab.json, None when it is not in the lab;
    read again only when the file changed (the lab saves it by replacing it)."""
    path = Path(state_dir) / "lab.json"
    try:
        stat = path.stat()
        key = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        cached = _VALUES.get((str(path), name))
        if cached is not None and cached[0] == key:
            return cached[1]
        values = _values_of(json.loads(path.read_text()), name)
    except (OSError, ValueError):
        return None
    _VALUES[(str(path), name)] = (key, values)
    return values


def _values_of(data: dict, name: str) -> dict[str, str] | None:
    node = next((n for n in data.get("nodes", []) if n.get("name") == name), None)
    if node is None:
        return None
    return {
        "hostname": node["name"],
        "instance-id": node.get("instance_id", ""),
        "instance/instance-type": node.get("instance_type", ""),
        "mac": node.get("mac", ""),
        "network-type": "vpc",
        "private-ipv4": node.get("address", ""),
        "region-id": data.get("region_id", ""),
        "vpc-cidr-block": VPC_CIDR,
        "vpc-id": data.get("vpc_id", ""),
        "vswitch-cidr-block": vswitch_cidr(node.get("address", "")),
        "vswitch-id": node.get("vswitch_id", ""),
        "zone-id": node.get("zone_id", ""),
        "@token-required": "1" if node.get("metadata_token_required") else "",
        "@pid": str((node.get("pids") or {}).get("metadata", "")),
        **interface_values(data, node),
    }


def listing(values: dict[str, str], folder: str) -> str | None:
    """The directory listing of `folder` ("" for meta-data/), None when there is none."""
    entries: set[str] = set()
    for key in values:
        if key.startswith("@") or not key.startswith(folder):
            continue
        head, slash, _ = key[len(folder) :].partition("/")
        entries.add(head + slash)
    return "\n".join(sorted(entries)) if entries else None


class MetadataHandler(BaseHTTPRequestHandler):
    """Serves one node's keys; the server carries `state_dir`, `node` and `tokens`."""

    server_version = "Tengine"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = 10
    disable_nagle_algorithm = True
    """Headers and body go out in two writes: with Nagle, every key after the first on a
    kept-alive connection waited for the client's delayed ACK (40 ms a key)."""

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the lab keeps no access log."""

    def _send(self, code: int, body: str = "") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self) -> None:
        """`PUT /latest/api/token` with the TTL header: a new token."""
        length = int(self.headers.get("Content-Length") or 0)
        if 0 < length <= 65536:
            self.rfile.read(length)
        if self.path.rstrip("/") != "/latest/api/token":
            self._send(404, "Not Found")
            return
        ttl = (self.headers.get(TTL_HEADER) or "").strip()
        if not ttl.isdigit() or not 1 <= int(ttl) <= MAX_TTL_S:
            self._send(400, f"{TTL_HEADER} must be 1..{MAX_TTL_S}")
            return
        token = secrets.token_urlsafe(32)
        tokens: dict[str, float] = self.server.tokens  # type: ignore[attr-defined]
        with self.server.lock:  # type: ignore[attr-defined]
            now = time.monotonic()
            for old in [t for t, until in tokens.items() if until < now]:
                del tokens[old]
            if len(tokens) >= MAX_TOKENS:
                tokens.pop(next(iter(tokens)))
            tokens[token] = now + int(ttl)
        self._send(200, token)

    def do_GET(self) -> None:
        """A key, a listing, or an error code as the ECS service answers."""
        values = node_values(self.server.state_dir, self.server.node)  # type: ignore[attr-defined]
        if values is None:
            self._send(503, "Service Unavailable")
            return
        token = self.headers.get(TOKEN_HEADER)
        if token is not None:
            with self.server.lock:  # type: ignore[attr-defined]
                until = self.server.tokens.get(token.strip(), 0.0)  # type: ignore[attr-defined]
            if until < time.monotonic():
                self._send(401, "Unauthorized")
                return
        elif values["@token-required"]:
            self._send(403, "Forbidden")
            return
        path = self.path.split("?", 1)[0]
        if path in ("/", ""):
            self._send(200, "latest")
            return
        if path.rstrip("/") == "/latest":
            self._send(200, "meta-data")
            return
        if path == PREFIX.rstrip("/"):
            path = PREFIX
        if not path.startswith(PREFIX):
            self._send(404, "Not Found")
            return
        key = path[len(PREFIX) :]
        if key in values and not key.startswith("@"):
            self._send(200, values[key])
            return
        body = listing(values, key if key.endswith("/") or not key else key + "/")
        if body is None:
            self._send(404, "Not Found")
        else:
            self._send(200, body)


class MetadataServer(ThreadingHTTPServer):
    """One node's service; exits once the lab no longer records it (after a grace time)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], state_dir: Path, node: str) -> None:
        super().__init__(address, MetadataHandler)
        self.state_dir = state_dir
        self.node = node
        self.tokens: dict[str, float] = {}
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.last_check = self.started

    def service_actions(self) -> None:
        now = time.monotonic()
        if now - self.started < LIFECHECK_GRACE_S or now - self.last_check < 5:
            return
        self.last_check = now
        values = node_values(self.state_dir, self.node)
        if values is None or values["@pid"] not in ("", str(os.getpid())):
            threading.Thread(target=self.shutdown, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    """Bind, then detach (print the server's PID) unless --foreground."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--node", required=True)
    parser.add_argument("--address", default="100.100.100.200")
    parser.add_argument("--port", type=int, default=80)
    parser.add_argument("--log", type=Path, default=Path(os.devnull))
    parser.add_argument("--foreground", action="store_true")
    args = parser.parse_args(argv)
    server = MetadataServer((args.address, args.port), args.state_dir, args.node)
    if not args.foreground:
        detach(args.log)
    server.serve_forever(poll_interval=1.0)
    return 0


def detach(log: str, *announce: object) -> None:
    """Go on as a daemon: the parent prints the child's pid (and `announce`) and exits; the
    child leaves the session, its stdin from /dev/null and its output appended to `log`."""
    pid = os.fork()
    if pid:
        print(pid, *announce, flush=True)
        os._exit(0)
    os.setsid()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)


if __name__ == "__main__":
    sys.exit(main())
