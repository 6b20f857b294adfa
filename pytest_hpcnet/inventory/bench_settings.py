"""How the benchmark checks run (the inventory's `benchmarks:` block); thresholds stay in `expect:`.

Defaults follow the tools' and Alibaba's published guidance: perftest in duration mode
with `--report_gbits`; nccl-tests all_reduce_perf `-b 8 -e 8G -f 2 -g 1 -c 1`; fio
sequential read/write with `-direct=1 -ioengine=libaio -bs=1m` (Alibaba's CPFS fio guidance).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from pytest_hpcnet.inventory.cloud_flows import ExternalFlow
from pytest_hpcnet.inventory.expectations import Port, Strict

ScheduleKind = str


class PerftestSettings(Strict):
    """ib_write_bw / ib_write_lat runs between scheduled pairs."""

    schedule: ScheduleKind = "matchings"
    rounds: Annotated[int, Field(ge=1, le=64)] = 2
    time_budget_s: Annotated[float, Field(gt=0)] | None = None
    confirm_suspects: bool = True
    port_base: Port = 18515
    size: Annotated[int, Field(ge=1)] | None = 65536
    all_sizes: bool = False
    qps: Annotated[int, Field(ge=1, le=1024)] | None = None
    duration_s: Annotated[int, Field(ge=1, le=3600)] | None = 5
    latency_iterations: Annotated[int, Field(ge=1)] | None = 1000
    rdma_cm: bool = False
    extra_args: list[str] = Field(default_factory=list)
    timeout_s: Annotated[int, Field(ge=5, le=7200)] = 120
    gdr: bool = False
    """ib_write_bw with `--use_cuda=<gpu>` on each ERI and the GPU nearest it (`nvidia-smi
    topo -m`), where `expect.erdma.gdr` is true; off by default (needs a CUDA-built perftest)."""

    @field_validator("schedule")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        kinds = ("matchings", "ring", "full-mesh")
        if value in kinds or (value.startswith("random:") and value[7:].isdigit()):
            return value
        raise ValueError(f"schedule must be one of {', '.join(kinds)} or random:K (got {value!r})")


class NcclArgs(Strict):
    """nccl-tests arguments -b -e -f -g -c -n -w."""

    b: str = "8"
    e: str = "8G"
    f: Annotated[int, Field(ge=2)] | None = 2
    g: Annotated[int, Field(ge=1)] | None = 1
    c: Annotated[int, Field(ge=0, le=1)] | None = 1
    n: Annotated[int, Field(ge=1)] | None = 20
    w: Annotated[int, Field(ge=0)] | None = 5


class NcclCollectivesSettings(Strict):
    """The collectives beyond all-reduce, run in turn in one launch (`collectives` marker)."""

    run: list[Literal["all_gather", "reduce_scatter", "alltoall", "sendrecv"]] = Field(
        default_factory=lambda: ["all_gather", "reduce_scatter", "alltoall", "sendrecv"]
    )
    """Which collectives run (each its own requirement); an empty list runs none."""
    args: NcclArgs | None = None
    """Their -b -e -f -g -c -n -w; None: the all-reduce's (`benchmarks.nccl.args`, its
    large-message range)."""


class NcclSettings(Strict):
    """How all_reduce_perf is launched across the inventory's nodes."""

    launcher: Literal["mpirun", "srun", "template"] = "mpirun"
    template: str | None = None
    binary: str = "all_reduce_perf"
    gpus_per_node: Annotated[int, Field(ge=1, le=64)] = 8
    args: NcclArgs = Field(default_factory=NcclArgs)
    env: dict[str, str] = Field(default_factory=dict)
    mpirun_args: list[str] = Field(default_factory=list)
    plm_rsh_args: str | None = None
    allow_run_as_root: bool = True
    hostfile: str = "/tmp/hpcnet-hostfile"
    srun_mpi: str | None = "pmix"
    """srun's `--mpi=` (pmix for nccl-tests built with MPI; None: leave it to MpiDefault)."""
    srun_args: list[str] = Field(default_factory=list)
    launch_env: dict[str, str] = Field(default_factory=dict)
    """Environment of the launcher itself on the launch node (e.g. SLURM_CONF), not the ranks'."""
    timeout_s: Annotated[int, Field(ge=10, le=14400)] = 1800
    bisect_max_runs: Annotated[int, Field(ge=0, le=100)] | None = None
    """NCCL runs on halves to find a slow node the pair benchmarks do not blame (None: enough
    for one slow node, 2*log2(N)+2; 0: off)."""
    collectives: NcclCollectivesSettings = Field(default_factory=NcclCollectivesSettings)
    """all_gather_perf, reduce_scatter_perf, alltoall_perf and sendrecv_perf, one launch."""


class FioSettings(Strict):
    """fio sequential jobs run on every node at once against its own directory."""

    bs: str = "1m"
    numjobs: Annotated[int, Field(ge=1, le=256)] = 4
    size: str = "1g"
    runtime_s: Annotated[int, Field(ge=1, le=3600)] = 30
    iodepth: Annotated[int, Field(ge=1, le=1024)] = 16
    ioengine: str = "libaio"
    direct: bool = True
    timeout_s: Annotated[int, Field(ge=10, le=7200)] = 600


class NodeNcclSettings(Strict):
    """`all_reduce_perf -b B -e E -f F -g <the node's GPUs> -c 1 -n N -w W`, one process."""

    b: str = "128M"
    e: str = "8G"
    f: Annotated[int, Field(ge=2)] = 2
    n: Annotated[int, Field(ge=1)] = 20
    w: Annotated[int, Field(ge=0)] = 5
    timeout_s: Annotated[int, Field(ge=10, le=7200)] = 900


class GpuLoadSettings(Strict):
    """The GPU load phase: every GPU of every node loaded at once (`gpu_load` marker)."""

    seconds: Annotated[float, Field(ge=5, le=3600)] = 60.0
    """Load per node: bf16 GEMM 60 %, tf32 GEMM 25 %, the copies 15 %."""
    size: Annotated[int, Field(ge=256, le=32768)] = 8192
    """The GEMMs' n (n x n x n)."""
    copy_mib: Annotated[int, Field(ge=16, le=65536)] = 1024
    nccl: NodeNcclSettings = Field(default_factory=lambda: NodeNcclSettings())
    """The single-node all-reduce (`all_reduce_perf -g <GPUs>` on every node at once)."""


class BenchmarkSettings(Strict):
    perftest: PerftestSettings = Field(default_factory=PerftestSettings)
    nccl: NcclSettings = Field(default_factory=NcclSettings)
    fio: FioSettings = Field(default_factory=FioSettings)
    gpu_load: GpuLoadSettings = Field(default_factory=GpuLoadSettings)


class CloudSettings(Strict):
    """Where the control-plane audit reads the cloud (credentials never live here: they come
    from the Alibaba Cloud credential chain: environment, credentials file, ECS RAM role)."""

    enabled: bool = True
    ecs_endpoint: str | None = None
    vpc_endpoint: str | None = None
    protocol: Literal["https", "http"] = "https"
    credentials_file: str | None = None
    """A credentials file in the SDK's ini format (profile `default`, or `ALIBABA_CLOUD_PROFILE`)
    read instead of the default chain, as `ALIBABA_CLOUD_CREDENTIALS_FILE` would name it; the
    lab inventory names the lab's own (a dummy AccessKey for its control plane)."""
    network_acl_ids: list[str] = Field(default_factory=list)
    external_flows: list[ExternalFlow] = Field(default_factory=list)
