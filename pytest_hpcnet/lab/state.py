"""The lab's recorded state: which namespaces, links and processes it made.

Written to `<state-dir>/lab.json` by `lab up`; read by `status`, `down`, faults and the
emulated tools on the nodes, so everything the lab did can be undone exactly.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from pytest_hpcnet.lab.system import LabError

DEFAULT_STATE_DIR = Path(os.environ.get("HPCNET_LAB_STATE", "/run/hpcnet-lab"))
SUBNET = ipaddress.ip_network("198.18.0.0/24")
"""Nodes from 198.18.0.11 up; the 246th to 256th wrap to 198.18.0.0-10 (eth0 holds a /32, so
no address of the /24 is a broadcast one)."""
SECONDARY_SUBNET = ipaddress.ip_network("198.18.1.0/24")
"""The secondary ENIs (`eth1`, carrying erdma_1 with `--eris 2`): node i at the same host
number as its eth0, in its own vSwitch's /24."""
EXTRA_SUBNETS = tuple(ipaddress.ip_network(f"198.18.{n}.0/24") for n in (2, 3, 4))
"""Nodes 257 to 1,024, 256 to a /24 in the same way (a lab of up to 256 nodes is addressed
as before); their secondary ENIs' /24s follow in `EXTRA_SECONDARY_SUBNETS`."""
EXTRA_SECONDARY_SUBNETS = tuple(ipaddress.ip_network(f"198.18.{n}.0/24") for n in (5, 6, 7))
SECONDARY_VSWITCH = "vsw-lab0002"
BRIDGE = "hxbr0"
SECOND_BRIDGE = "hxbr1"
"""A Linux bridge takes at most 1,023 ports (`BR_MAX_PORTS` 1,024, port 0 reserved): nodes
from `PORTS_PER_BRIDGE` on hang off a second bridge, joined to the first by a veth pair."""
PORTS_PER_BRIDGE = 1000
BRIDGE_ADDRESS = "169.254.18.1"
"""The host's own address on the bridge: link-local, a /32, outside the nodes' /24."""
FIRST_NODE_HOST = 11
MAX_NODES = 1024
"""Four /24s (1,024 nodes on a 2-core, 24 GB host: see docs/speed.md); two ERIs per node up to
256 nodes."""
MAX_NODES_TWO_ERIS = 256
NS_PREFIX = "hx-"
BRIDGE_MTU = 9000
METADATA_ADDRESS = "100.100.100.200"
"""The ECS metadata address; each node serves it on its own `lo`, never the host."""
INSTANCE_TYPE = "ecs.hpcnet-lab.emulated"
"""No ECS type: the lab never passes for a real instance family (the `lab` profile is for it)."""
LOCK_WAIT_S = 60.0


@dataclass
class LabNode:
    """One lab node: a namespace with a veth into the bridge and its own sshd."""

    name: str
    address: str
    mtu: int
    vswitch_id: str = "vsw-lab0001"
    zone_id: str = "cn-lab-a"
    instance_id: str = ""
    instance_type: str = INSTANCE_TYPE
    mac: str = ""
    """The MAC of the node's eth0, fixed so it (and the eRDMA GUID) survives a re-created veth."""
    secondary_address: str = ""
    """The primary private address of the node's secondary ENI `eth1` (present with two ERIs)."""
    secondary_mac: str = ""
    """The MAC of `eth1` (erdma_1's GUID derives from it)."""
    metadata_token_required: bool = False
    """The metadata service refuses GETs without a token (hardened mode only)."""
    bridge: str = BRIDGE
    """The host bridge its veths join (`node_bridge`)."""
    sshd_pid: int | None = None
    pids: dict[str, int] = field(default_factory=dict)
    """Other lab processes of the node by role, e.g. `metadata`."""
    faults: dict[str, str] = field(default_factory=dict)
    """Injected faults by id (`mtu`, `block:tcp/18515`, ...) -> what was injected."""
    undo: dict[str, str] = field(default_factory=dict)
    """Fault id -> what `heal` restores (the value before the fault)."""

    @property
    def namespace(self) -> str:
        return f"{NS_PREFIX}{self.name}"

    @property
    def host_veth(self) -> str:
        return f"hxv-{self.name}"[:15]

    @property
    def host_veth_secondary(self) -> str:
        """The host end of `eth1`'s veth (also `hxv-*`, so `down` removes it)."""
        return f"hxv-{self.name}-1"[:15]


@dataclass
class LabState:
    """Everything `lab up` created, enough for `down` to remove exactly that."""

    state_dir: str
    inventory: str
    nodes: list[LabNode] = field(default_factory=list)
    region_id: str = "cn-lab"
    vpc_id: str = "vpc-lab0001"
    sysctl: dict[str, str] = field(default_factory=dict)
    """The per-namespace sysctls `lab up` set on every node (and the inventory expects)."""
    host_backlog: int | None = None
    """The host's `net.core.netdev_max_backlog` before `lab up` raised it (None: untouched)."""
    host_neigh: dict[str, int] = field(default_factory=dict)
    """The host's ARP gc_thresh1..3 that `lab up` raised, with their values before."""
    eris: int = 1
    """eRDMA devices per node (`lab up --eris 2`; opt-in, the lab profile expects one)."""
    cloud_api_pid: int | None = None
    """The lab's control plane daemon (`control_plane.py`), on 127.0.0.1."""
    cloud_api_port: int | None = None

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

    @property
    def bin_dir(self) -> Path:
        """The emulated tools; bind-mounted over `/usr/local/sbin` for each node's sshd."""
        return self.root / "bin"

    def rdma_file(self, name: str) -> Path:
        """The node's eRDMA devices as the emulated `ibv_devinfo` and `rdma` read them."""
        return self.node_dir(name) / "rdma.json"

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
        known = {f.name for f in fields(LabNode)}
        raw_nodes = data.pop("nodes", [])
        nodes = [LabNode(**{k: v for k, v in n.items() if k in known}) for n in raw_nodes]
        top = {f.name for f in fields(cls)}
        return cls(nodes=nodes, **{k: v for k, v in data.items() if k in top})


def node_names(count: int) -> list[str]:
    """node01 .. nodeNN (three digits from 100 nodes up, four from 1,000)."""
    width = 4 if count >= 1000 else 3 if count >= 100 else 2
    return [f"node{i:0{width}d}" for i in range(1, count + 1)]


def node_address(index: int, nic: int = 0) -> str:
    """The lab address of the index-th node (0-based): .11 up, wrapping to .0 inside the /24
    (`nic` 1: its secondary ENI's, in `SECONDARY_SUBNET`); from the 257th node on, the same
    in the next /24 of `EXTRA_SUBNETS`."""
    block = index // SUBNET.num_addresses
    if block == 0:
        subnet = SECONDARY_SUBNET if nic else SUBNET
    else:
        subnet = (EXTRA_SECONDARY_SUBNETS if nic else EXTRA_SUBNETS)[block - 1]
    return str(subnet.network_address + (FIRST_NODE_HOST + index) % subnet.num_addresses)


def node_mac(index: int, nic: int = 0) -> str:
    """A fixed MAC for the index-th node's eth0 (`nic` 1: eth1); Alibaba's 00:16:3e OUI,
    the address's host last (its /24 block, from the 257th node on, beside the NIC)."""
    host = (FIRST_NODE_HOST + index) % SUBNET.num_addresses
    block = index // SUBNET.num_addresses
    return f"00:16:3e:18:{nic + 2 * block:02x}:{host:02x}"


def node_bridge(index: int) -> str:
    """The bridge the index-th node's veths join."""
    return BRIDGE if index < PORTS_PER_BRIDGE else SECOND_BRIDGE


@contextlib.contextmanager
def locked(state_dir: Path) -> Iterator[None]:
    """Hold the lab's lock (`<state>/lab.lock`) while reading, changing and saving lab.json."""
    root = Path(state_dir)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "lab.lock", "a") as handle:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LabError(f"lab lock held for over {LOCK_WAIT_S:.0f} s") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
