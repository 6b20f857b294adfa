"""Expectations: the thresholds every check reads, merged defaults <- profile <- inventory.

Numbers live here and in `profiles/*.yaml` only; suites never hold a number.
A threshold is either a bound (`min_gbps: 90`) or a ReFrame-style reference
with a tolerance (`reference: {value: 160, lower: -0.4}`), which yields a bound.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pytest_hpcnet.inventory.citations import with_sources
from pytest_hpcnet.inventory.cloud_flows import CloudExpect
from pytest_hpcnet.inventory.port_specs import port_spec_problem

PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
Port = Annotated[int, Field(ge=1, le=65535)]


class Strict(BaseModel):
    """Base of every inventory model: unknown keys are errors (typos must not pass silently),
    and so are YAML's `.inf` and `.nan` (no bound a measurement can be judged against)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


class Reference(Strict):
    """A reference value with relative tolerances, as in ReFrame: bound = value * (1 + lower)."""

    value: PositiveFloat
    lower: Annotated[float, Field(gt=-1, le=0)] | None = None
    """A tolerance of -1 (-100 %) would give a bound of 0, which any measurement passes."""
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


class ErdmaExpect(Strict):
    """eRDMA in depth: figures per ERI and per instance, driver state, NCCL.

    None means "not published / not expected": the check reports the value and does not
    judge it. Profiles give each key's source (the source keys of docs/sources.md: S1, S13, ...).
    """

    eris: Annotated[int, Field(ge=1)] | None = None
    """ERIs per node (identity counts devices bound to the erdma driver)."""
    per_eri_gbps: PositiveFloat | None = None
    """Rated Gbit/s of one ERI: each device's ib_write_bw pair is judged against it."""
    per_instance_gbps: PositiveFloat | None = None
    """Rated Gbit/s of the instance: all its ERIs run at once are judged against it."""
    same_nic_index_gbps: PositiveFloat | None = None
    """The lower instance figure when every ERI sits on one NIC index (ebmgn7ex only, S1)."""
    bw_fraction: Annotated[float, Field(gt=0, le=1)] = 0.8
    """Share of a rated figure a measurement must reach (project choice)."""
    compat_mode: bool | None = None
    """erdma `compat_mode` (Y on GPU nodes set up by the erdma-controller, S13)."""
    cc: str | None = None
    """Congestion-control algorithm `eadm conf -t cc` must show (`mpcc`), where readable."""
    driver_version: str | None = None
    """The erdma version the inventory pins (sysfs, modinfo or the package must show it);
    unset: reported only, and a driver that reports none passes."""
    gdr: bool | None = None
    """GPUDirect RDMA: True expected on, False "not supported here", None not judged."""
    nccl_network: Literal["IB", "Socket"] | None = "IB"
    """The network NCCL must choose (`NET/IB` for eRDMA); a Socket fallback fails."""
    numa: dict[str, int] = Field(default_factory=dict)
    """Device -> NUMA node it must sit on (compute-nest L20N: erdma_0 -> 0, erdma_1 -> 1)."""


class PortSpec(Strict):
    """Ports that must be open between cluster nodes."""

    tcp: list[str] = Field(default_factory=lambda: ["22", "18515", "29500-29510"])
    udp: list[str] = Field(default_factory=lambda: ["4791"])

    @field_validator("tcp", "udp", mode="before")
    @classmethod
    def _numbers_as_text(cls, value: object) -> object:
        if isinstance(value, list):
            return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
        return value

    @field_validator("tcp", "udp")
    @classmethod
    def _ports_expand(cls, value: list[str]) -> list[str]:
        problem = port_spec_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


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

    @model_validator(mode="after")
    def _minimum_is_numbers(self) -> SysctlValue:
        fields = str(self.value).split()
        numbers = fields and all(re.fullmatch(r"-?[0-9]+", f) for f in fields)
        if self.mode == "min" and not numbers:
            raise ValueError(
                f"mode min compares numbers: {self.value!r} is not an integer or integers "
                "separated by spaces (16777216, '4096 87380 16777216')"
            )
        return self


class LatencyPing(Strict):
    max_avg_ms: PositiveFloat = 1.0
    max_ms: PositiveFloat = 5.0


class BandwidthExpect(Strict):
    """ib_write_bw: a bound in Gbit/s, or a reference (link rate) with tolerance."""

    min_gbps: PositiveFloat | None = None
    reference: Reference | None = None
    max_gbps: PositiveFloat = 800.0
    """The physical ceiling of one pair's figure: above it, the output was misread (not
    measured). 800 Gbit/s: no RDMA port runs faster (ConnectX-8, the fastest shipping, is
    800G); a profile sets its instance's rated eRDMA figure."""

    @property
    def bound_gbps(self) -> float | None:
        if self.min_gbps is not None:
            return self.min_gbps
        return self.reference.min if self.reference else None


class LatencyExpect(Strict):
    """ib_write_lat bounds in microseconds."""

    max_avg_us: PositiveFloat = 20.0
    max_p99_us: PositiveFloat = 50.0


class CollectiveBounds(Strict):
    """One collective's busbw floors (GB/s, its own busbw formula); unset: measured, not
    judged (INCOMPLETE). No cloud publishes them for eRDMA: set them from a known-good run."""

    min_avg_busbw_gbs: PositiveFloat | None = None
    min_busbw_largest_gbs: PositiveFloat | None = None


class NcclCollectivesExpect(Strict):
    """`expect.nccl.collectives.<collective>`: all_gather, reduce_scatter, alltoall, sendrecv."""

    all_gather: CollectiveBounds = Field(default_factory=CollectiveBounds)
    reduce_scatter: CollectiveBounds = Field(default_factory=CollectiveBounds)
    alltoall: CollectiveBounds = Field(default_factory=CollectiveBounds)
    sendrecv: CollectiveBounds = Field(default_factory=CollectiveBounds)


class NcclExpect(Strict):
    min_avg_busbw_gbs: PositiveFloat | None = None
    min_busbw_largest_gbs: PositiveFloat | None = None
    max_busbw_gbs: PositiveFloat = 1800.0
    """The physical ceiling of a bus bandwidth: no GPU moves more than NVLink 5's 1.8 TB/s
    (B200); a profile sets its own. Above it, the output was misread (not measured)."""
    collectives: NcclCollectivesExpect = Field(default_factory=NcclCollectivesExpect)
    rail: CollectiveBounds = Field(default_factory=CollectiveBounds)
    """`expect.nccl.rail`: all_reduce_perf on one ERI alone (each rail), its busbw floors."""
    network_only_fraction: Annotated[float, Field(gt=0, le=1)] | None = None
    """The share of a node's rated eRDMA line rate (`erdma.per_instance_gbps`) that the
    network-only all-reduce (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1, NVLS off) reaches per
    rank x ranks per node at its largest size; unset: that run is not applicable."""


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
    """What CPFS clients put in /proc/mounts (docs/sources.md): cpfs-nfs mounts show
    as `nfs` (through a local proxy on 127.0.x.y), CPFS for Lingjun through EFC as
    `fuse.aliyun-alinas-efc`, legacy CPFS as `lustre`."""
    client: Literal["cpfs-nfs", "efc", "lustre"] | None = None
    """The CPFS client the nodes must use: `cpfs-nfs` also requires the 127.0.x.y proxy."""
    min_read_mbs_per_node: PositiveFloat | None = None
    min_write_mbs_per_node: PositiveFloat | None = None
    max_mbs_per_node: PositiveFloat = 100_000.0
    """The physical ceiling of one node's fio figure: what its network carries (100,000 MB/s
    is 800 Gbit/s); a profile sets its instance's VPC bandwidth. Above it: not measured."""
    min_fairness: Annotated[float, Field(gt=0, le=1)] = 0.5
    capacity_tib: PositiveFloat | None = None
    aggregate_lower: Annotated[float, Field(gt=-1, le=0)] = -0.5


CPFS_PER_CLIENT_MAX_MBS = 25_000
CPFS_READ_MBS_PER_TIB, CPFS_READ_MAX_MBS = 400, 400_000
CPFS_WRITE_MBS_PER_TIB, CPFS_WRITE_MAX_MBS = 200, 200_000


def rated_aggregate_mbs(rw: str, capacity_tib: float, clients: int) -> float:
    """Published CPFS (Lingjun) throughput: read min(400 MB/s per TiB, 400 GB/s), write
    min(200 MB/s per TiB, 200 GB/s), and at most 25 GB/s per client (docs/sources.md, S20)."""
    per_tib, ceiling = (
        (CPFS_READ_MBS_PER_TIB, CPFS_READ_MAX_MBS)
        if rw == "read"
        else (CPFS_WRITE_MBS_PER_TIB, CPFS_WRITE_MAX_MBS)
    )
    return min(per_tib * capacity_tib, ceiling, CPFS_PER_CLIENT_MAX_MBS * clients)


class GpuExpect(Strict):
    """GPUs every node carries (`count: null`: a CPU-only profile; every GPU check is then
    skipped as not applicable). See docs/checks.md, "GPU node health"."""

    count: Annotated[int, Field(ge=0)] | None = None
    model: str | None = None
    """As `nvidia-smi --query-gpu=name` prints it; null: any model."""
    memory_gb: PositiveFloat | None = None
    """One GPU's memory as the instance type and datasheets publish it (GB); a `model`
    published with another size is refused when the inventory loads (`gpu_models`); null:
    not published."""
    persistence: bool = True
    mig: bool = False
    allowed_xids: list[Annotated[int, Field(ge=1)]] = Field(default_factory=list)
    modules: list[str] = Field(default_factory=lambda: ["nvidia"])
    """Kernel modules that must be loaded (add `nvidia_peermem` for GDR before NCCL 2.27)."""
    memlock_min_kib: Annotated[int, Field(ge=1)] | None = None
    """null: `ulimit -l` must be unlimited for the NCCL user."""
    nccl_user: str | None = None
    """The user NCCL runs as (its `ulimit -l` is read through `su`); null: the SSH user."""
    rdma_sysfs: bool = True
    """Whether /sys/class/infiniband describes the RDMA devices (PCIe link, NUMA node)."""
    power_limit_w: PositiveFloat | None = None
    """Each GPU's enforced power limit at least this (the SKU's published board power, with
    its source in the profile); null: at least the GPU's own default limit."""


class GpuLoadExpect(Strict):
    """GPUs under load (docs/checks.md, "GPUs under load"): each GPU against its node's best
    GPU and the cluster median, and against the SKU's published figures where a profile sets
    them (null: peer-relative only, and the record says so)."""

    peer_tolerance: Annotated[float, Field(gt=0, lt=1)] = 0.10
    """A GPU more than this fraction below its node's best GPU or the cluster median fails."""
    min_peer_gpus: Annotated[int, Field(ge=2)] = 8
    """A per-GPU figure is judged against its peers only with this many GPUs' figures."""
    min_peer_nodes: Annotated[int, Field(ge=2)] = 4
    """A per-node figure (the single-node all-reduce) is judged against its peers only with
    this many nodes' figures; with fewer and no floor it is measured, not judged."""
    max_bf16_tflops: PositiveFloat = 2500.0
    max_tf32_tflops: PositiveFloat = 1250.0
    """Ceilings: no GPU shipping computes faster (B200: 2,250 dense BF16, 1,125 TF32). A
    profile sets its SKU's dense datasheet figure x 1.1; above it: not measured."""
    max_hbm_gbs: PositiveFloat = 8800.0
    """Ceiling of the device-to-device copy: the fastest HBM (B200, 8 TB/s) x 1.1."""
    max_node_busbw_gbs: PositiveFloat = 1800.0
    """Ceiling of the single-node all-reduce: NVLink 5's 1.8 TB/s per GPU (B200)."""
    max_p2p_gbs: PositiveFloat = 1000.0
    """Ceiling of one GPU pair, one way: NVLink 5's 900 GB/s each way (B200) x 1.1."""
    min_bf16_tflops: PositiveFloat | None = None
    min_tf32_tflops: PositiveFloat | None = None
    min_hbm_gbs: PositiveFloat | None = None
    """Device-to-device copy, bytes read plus written."""
    min_h2d_gbs: PositiveFloat | None = None
    min_d2h_gbs: PositiveFloat | None = None
    min_pcie_fraction: Annotated[float, Field(gt=0, le=1)] = 0.7
    """H2D and D2H at least this share of what the GPU's PCIe link carries one way (Azure's
    48 GB/s floor on PCIe gen5 x16, 63.0 GB/s, is 0.76 of it)."""
    max_temperature_c: PositiveFloat | None = None
    """The hottest sample under load; null: reported, not judged (thermal slowdown still fails)."""
    burnin_tflops_drift: Annotated[float, Field(gt=0, lt=1)] = 0.05
    """Burn-in: a GPU's window more than this fraction below the median of its first windows
    fails (none published: this suite's default)."""
    burnin_copy_drift: Annotated[float, Field(gt=0, lt=1)] = 0.05
    """Burn-in: a window's device-to-device copy GB/s more than this fraction below the median
    of the GPU's first windows fails (none published: this suite's default)."""
    nvlink_links: Annotated[int, Field(ge=1, le=64)] | None = None
    """NVLink links active on every GPU (`nvidia-smi nvlink -s`); null: no NVLink expected."""
    nvlink_max_errors: Annotated[int, Field(ge=0)] = 0
    """Replay, recovery or CRC errors a link may have counted (`nvidia-smi nvlink -e`)."""
    min_node_busbw_gbs: PositiveFloat | None = None
    """Single-node all-reduce bus bandwidth at the largest size; null: against peers only."""
    p2p: bool = True
    """The node's GPUs copy to each other peer-to-peer (NVLink, or PCIe P2P through a switch),
    measured as nvbandwidth's GPU-to-GPU matrix; false: not applicable (no peer access)."""
    min_p2p_nvlink_gbs: PositiveFloat | None = None
    """Each GPU pair `topo -m` joins by NVLink (`NV#`): nvbandwidth read-CE GB/s, one way."""
    min_p2p_pcie_gbs: PositiveFloat | None = None
    """Each GPU pair joined over PCIe (PIX/PXB/PHB/NODE/SYS): the same figure."""
    nvswitch: bool = False
    """The SKU's GPUs meet in NVSwitches (HGX): every GPU's fabric state must be Completed and
    Success (`nvidia-smi -q`), nvidia-fabricmanager active; false: not applicable."""
    dcgm_level: Annotated[int, Field(ge=1, le=4)] | None = 3
    """`dcgmi diag -r LEVEL` on every node at once (3: about 10-20 min with the GEMM soak,
    memory bandwidth, PCIe, targeted stress and power); null: DCGM not part of the handover."""


class KnownBad(Strict):
    """A version that must not be installed, with why and where that is said."""

    tool: str
    version: str
    reason: str
    source: str


class VersionsExpect(Strict):
    """Versions every node must share; `pin` sets the exact one (tool -> version)."""

    pin: dict[str, str] = Field(default_factory=dict)
    known_bad: list[KnownBad] = Field(default_factory=list)


class HostExpect(Strict):
    """The host's own hardware and the settings that change results (docs/checks.md, "The
    host"). None: measured and reported, not judged (no source gives a value); a profile
    sets each value with its source."""

    cpu_model: str | None = None
    """A part of lscpu's `Model name` (`Platinum 8468`), case and spacing ignored."""
    cpus: Annotated[int, Field(ge=1)] | None = None
    """Logical CPUs (lscpu `CPU(s)`): the instance type's vCPUs."""
    memory_gib: PositiveFloat | None = None
    """The instance type's memory (GiB); MemTotal must reach `memory_gib * (1 + memory_lower)`."""
    memory_lower: Annotated[float, Field(gt=-1, le=0)] = -0.05
    """MemTotal is physical RAM less firmware and kernel reservations (proc(5)): 5 % below
    the published size passes, as NHC's `check_hw_physmem` tolerance (project choice)."""
    hugepages: Annotated[int, Field(ge=0)] | None = None
    """HugePages_Total at least this many (default-size) huge pages; None: not asked."""
    nvme_count: Annotated[int, Field(ge=0)] | None = None
    """Local NVMe namespaces (0: the SKU has none); None: counted, not judged."""
    nvme_min_gb: PositiveFloat | None = None
    """Each namespace at least this size (GB, 10^9 bytes, as datasheets)."""
    aer_max_correctable: Annotated[int, Field(ge=0)] | None = None
    """Correctable AER errors a device may have counted since boot; None: counted only
    (no vendor publishes a bound). Non-fatal and fatal errors always fail."""
    clocksource: str | None = None
    governor: str | None = None
    numa_balancing: str | int | None = None
    """`kernel.numa_balancing` (0: off), compared as text."""
    thp: Literal["always", "madvise", "never"] | None = None
    iommu: Literal["passthrough", "translated", "off"] | None = None
    """The IOMMU mode; `passthrough` where GPUDirect RDMA is expected."""
    max_time_offset_ms: PositiveFloat | None = None
    """The clock's largest offset from its time source (chrony or timesyncd)."""


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
    erdma: ErdmaExpect = Field(default_factory=ErdmaExpect)
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
    gpu: GpuExpect = Field(default_factory=GpuExpect)
    gpu_load: GpuLoadExpect = Field(default_factory=GpuLoadExpect)
    versions: VersionsExpect = Field(default_factory=VersionsExpect)
    host: HostExpect = Field(default_factory=HostExpect)
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


SOURCES = "sources"
"""`profiles/sources.yaml`: the sources the profiles cite, not a profile."""


def profile_names() -> list[str]:
    """Names of the profiles shipped in `pytest_hpcnet/profiles/`."""
    folder = resources.files("pytest_hpcnet") / "profiles"
    names = (p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))
    return sorted(n for n in names if n != SOURCES)


def load_profile(name: str) -> dict:
    """The `expect:` mapping of one shipped profile (its `source:` notes dropped)."""
    text = (resources.files("pytest_hpcnet") / "profiles" / f"{name}.yaml").read_text()
    data = yaml.safe_load(text) or {}
    return data.get("expect", {})


def load_profile_sources(name: str) -> dict[str, str]:
    """The `source:` notes of one shipped profile, by key, each on one line and followed by
    the title and address of each source it cites (`inventory.citations`)."""
    text = (resources.files("pytest_hpcnet") / "profiles" / f"{name}.yaml").read_text()
    notes = (yaml.safe_load(text) or {}).get("source") or {}
    out: dict[str, str] = {}
    for key, value in notes.items():
        items = value.items() if isinstance(value, dict) else [("", value)]
        for sub, text in items:
            out[f"{key}.{sub}" if sub else str(key)] = with_sources(" ".join(str(text).split()))
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
