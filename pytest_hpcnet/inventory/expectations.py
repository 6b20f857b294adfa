"""Expectations: the thresholds every check reads, merged defaults <- profile <- inventory.

Numbers live here and in `profiles/*.yaml` only; suites never hold a number.
A threshold is either a bound (`min_gbps: 90`) or a ReFrame-style reference
with a tolerance (`reference: {value: 160, lower: -0.4}`), which yields a bound.
"""

from __future__ import annotations

from importlib import resources
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pytest_hpcnet.cloud.flows import CloudExpect

PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
Port = Annotated[int, Field(ge=1, le=65535)]


class Strict(BaseModel):
    """Base of every inventory model: unknown keys are errors (typos must not pass silently)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Reference(Strict):
    """A reference value with relative tolerances, as in ReFrame: bound = value * (1 + lower)."""

    value: PositiveFloat
    lower: Annotated[float, Field(ge=-1, le=0)] | None = None
    upper: Annotated[float, Field(ge=0)] | None = None

    @property
    def min(self) -> float | None:
        return None if self.lower is None else self.value * (1 + self.lower)

    @property
    def max(self) -> float | None:
        return None if self.upper is None else self.value * (1 + self.upper)


class RdmaExpect(Strict):
    """RDMA devices expected on every node."""

    device_glob: str = "erdma*"
    min_devices: Annotated[int, Field(ge=0)] = 1
    kernel_module: str | None = "erdma"
    compat_mode: str | None = None


class PortSpec(Strict):
    """Ports that must be open between cluster nodes."""

    tcp: list[str] = Field(default_factory=lambda: ["22", "18515", "29500-29510"])
    udp: list[str] = Field(default_factory=lambda: ["4791"])


class Flow(Strict):
    """One flow the network ACLs must allow or deny."""

    source: str
    target: str
    protocol: Literal["tcp", "udp"]
    port: Port


class FlowsExpect(Strict):
    allow: list[Flow] = Field(default_factory=list)
    deny: list[Flow] = Field(default_factory=list)


class PlacementExpect(Strict):
    """Ids every node must share; when unset, all nodes must merely agree."""

    vswitch_id: str | None = None
    vpc_id: str | None = None
    zone_id: str | None = None
    metadata_url: str = "http://100.100.100.200/latest/meta-data/"


class SysctlValue(Strict):
    value: str | int
    mode: Literal["min", "equal", "one_of"] = "equal"


class LatencyPing(Strict):
    max_avg_ms: PositiveFloat = 1.0
    max_ms: PositiveFloat = 5.0


class BandwidthExpect(Strict):
    """ib_write_bw: a bound in Gbit/s, or a reference (link rate) with tolerance."""

    min_gbps: PositiveFloat | None = None
    reference: Reference | None = None

    @property
    def bound_gbps(self) -> float | None:
        if self.min_gbps is not None:
            return self.min_gbps
        return self.reference.min if self.reference else None


class LatencyExpect(Strict):
    """ib_write_lat bounds in microseconds."""

    max_avg_us: PositiveFloat = 20.0
    max_p99_us: PositiveFloat = 50.0


class NcclExpect(Strict):
    min_avg_busbw_gbs: PositiveFloat | None = None
    min_busbw_largest_gbs: PositiveFloat | None = None


class CpfsExpect(Strict):
    mount: str = "/mnt/cpfs"
    fstypes: list[str] = Field(
        default_factory=lambda: [
            "cpfs",
            "cpfs-nfs",
            "nfs",
            "alinas",
            "fuse.aliyun-alinas-efc",
            "lustre",
        ]
    )
    """What CPFS clients put in /proc/mounts (ALIBABA-FACTS section 7): cpfs-nfs mounts show
    as `nfs` (through a local proxy on 127.0.x.y), CPFS for Lingjun through EFC as
    `fuse.aliyun-alinas-efc`, legacy CPFS as `lustre`."""
    client: Literal["cpfs-nfs", "efc", "lustre"] | None = None
    """The CPFS client the nodes must use: `cpfs-nfs` also requires the 127.0.x.y proxy."""
    min_read_mbs_per_node: PositiveFloat | None = None
    min_write_mbs_per_node: PositiveFloat | None = None
    min_fairness: Annotated[float, Field(gt=0, le=1)] = 0.5
    capacity_tib: PositiveFloat | None = None
    aggregate_lower: Annotated[float, Field(ge=-1, le=0)] = -0.5


DEFAULT_SYSCTL: dict[str, dict] = {
    "net.core.rmem_max": {"value": 16777216, "mode": "min"},
    "net.core.wmem_max": {"value": 16777216, "mode": "min"},
    "net.ipv4.tcp_rmem": {"value": "4096 87380 16777216", "mode": "min"},
    "net.ipv4.tcp_wmem": {"value": "4096 65536 16777216", "mode": "min"},
    "net.ipv4.tcp_window_scaling": {"value": 1, "mode": "equal"},
    "net.ipv4.tcp_congestion_control": {"value": "cubic,bbr", "mode": "one_of"},
}
"""Host tuning checked by default; an inventory may change a key or drop it with `null`."""


class Expectations(Strict):
    """Everything a check may compare against; merged from defaults, profile and inventory."""

    profile: str | None = None
    instance_types: list[str] = Field(default_factory=list)
    """Globs of the ECS instance types the thresholds are for (`ecs.ebmgn8is.*`)."""
    mtu: Annotated[int, Field(ge=68, le=65535)] = 8500
    jumbo_frames: bool = True
    rdma: RdmaExpect = Field(default_factory=RdmaExpect)
    ports: PortSpec = Field(default_factory=PortSpec)
    flows: FlowsExpect = Field(default_factory=FlowsExpect)
    placement: PlacementExpect = Field(default_factory=PlacementExpect)
    sysctl: dict[str, SysctlValue] = Field(
        default_factory=lambda: {k: SysctlValue(**v) for k, v in DEFAULT_SYSCTL.items()}
    )
    nic_max_errors: Annotated[int, Field(ge=0)] = 0
    nic_max_dropped: Annotated[int, Field(ge=0)] = 10
    """Linux counts frames of protocols nobody handles as rx_dropped: a few are normal."""
    ping: LatencyPing = Field(default_factory=LatencyPing)
    ib_write_bw: BandwidthExpect = Field(default_factory=BandwidthExpect)
    ib_write_lat: LatencyExpect = Field(default_factory=LatencyExpect)
    nccl: NcclExpect = Field(default_factory=NcclExpect)
    cpfs: CpfsExpect = Field(default_factory=CpfsExpect)
    cloud: CloudExpect = Field(default_factory=CloudExpect)
    regression_tolerance: Annotated[float, Field(gt=0, lt=1)] = 0.10
    regression_tolerances: dict[str, Annotated[float, Field(gt=0, le=100)]] = Field(
        default_factory=lambda: {"tuning.rtt_avg": 2.0, "tuning.rtt_max": 5.0}
    )
    """Per metric (`ib_write_bw.bw_avg`, `bw_avg` or `ib_write_bw`) overrides; sub-millisecond
    ICMP round trips jitter by far more than 10 % from run to run, hence their defaults."""

    @field_validator("sysctl", mode="before")
    @classmethod
    def _drop_nulls(cls, value: object) -> object:
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if v is not None}
        return value

    @model_validator(mode="after")
    def _bandwidth_has_one_source(self) -> Expectations:
        bw = self.ib_write_bw
        if bw.min_gbps is not None and bw.reference is not None:
            raise ValueError("ib_write_bw: give min_gbps or reference, not both")
        return self


def profile_names() -> list[str]:
    """Names of the profiles shipped in `pytest_hpcnet/profiles/`."""
    folder = resources.files("pytest_hpcnet") / "profiles"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_profile(name: str) -> dict:
    """The `expect:` mapping of one shipped profile (its `source:` notes dropped)."""
    text = (resources.files("pytest_hpcnet") / "profiles" / f"{name}.yaml").read_text()
    data = yaml.safe_load(text) or {}
    return data.get("expect", {})


def load_profile_sources(name: str) -> dict[str, str]:
    """The `source:` notes of one shipped profile, by key, each on one line."""
    text = (resources.files("pytest_hpcnet") / "profiles" / f"{name}.yaml").read_text()
    notes = (yaml.safe_load(text) or {}).get("source") or {}
    out: dict[str, str] = {}
    for key, value in notes.items():
        items = value.items() if isinstance(value, dict) else [("", value)]
        for sub, text in items:
            out[f"{key}.{sub}" if sub else str(key)] = " ".join(str(text).split())
    return out


def merge(base: dict, override: dict) -> dict:
    """Deep-merge two mappings; `override` wins, nested mappings merge key by key."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out
