"""The lab's recorded state: which namespaces, links and processes it made.

Written to `<state-dir>/lab.json` by `lab up`; read by `status`, `down`, faults and the
emulated tools on the nodes, so everything the lab did can be undone exactly.
"""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

DEFAULT_STATE_DIR = Path(os.environ.get("HPCNET_LAB_STATE", "/run/hpcnet-lab"))
SUBNET = ipaddress.ip_network("198.18.0.0/24")
BRIDGE = "hxbr0"
BRIDGE_ADDRESS = "198.18.0.1"
FIRST_NODE_HOST = 11
MAX_NODES = 240
NS_PREFIX = "hx-"
BRIDGE_MTU = 9000


@dataclass
class LabNode:
    """One lab node: a namespace with a veth into the bridge and its own sshd."""

    name: str
    address: str
    mtu: int
    vswitch_id: str = "vsw-lab0001"
    zone_id: str = "cn-lab-a"
    instance_id: str = ""
    sshd_pid: int | None = None
    pids: dict[str, int] = field(default_factory=dict)
    faults: dict[str, str] = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        return f"{NS_PREFIX}{self.name}"

    @property
    def host_veth(self) -> str:
        return f"hxv-{self.name}"[:15]


@dataclass
class LabState:
    """Everything `lab up` created, enough for `down` to remove exactly that."""

    state_dir: str
    inventory: str
    nodes: list[LabNode] = field(default_factory=list)
    region_id: str = "cn-lab"
    vpc_id: str = "vpc-lab0001"

    @property
    def root(self) -> Path:
        return Path(self.state_dir)

    def node_dir(self, name: str) -> Path:
        return self.root / "nodes" / name

    @property
    def client_key(self) -> Path:
        return self.root / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    def node(self, name: str) -> LabNode:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def save(self) -> None:
        path = self.root / "lab.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)

    @classmethod
    def load(cls, state_dir: Path) -> LabState | None:
        path = Path(state_dir) / "lab.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        nodes = [LabNode(**n) for n in data.pop("nodes", [])]
        return cls(nodes=nodes, **data)


def node_names(count: int) -> list[str]:
    """node01 .. nodeNN (three digits from 100 nodes up)."""
    width = 3 if count >= 100 else 2
    return [f"node{i:0{width}d}" for i in range(1, count + 1)]


def node_address(index: int) -> str:
    """The lab address of the index-th node (0-based), inside 198.18.0.0/24."""
    return str(SUBNET.network_address + FIRST_NODE_HOST + index)
