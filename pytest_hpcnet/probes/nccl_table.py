"""The parts of a nccl-tests table (a size row, a rank line) and what the caller launched:
what the parser (`nccl`) builds and its checks (`nccl_checks`) read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NcclRow:
    """One size of the table; `*_wrong` is None where printed as N/A."""

    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    oop_time_us: float
    oop_algbw_gbs: float
    oop_busbw_gbs: float
    oop_wrong: float | None
    ip_time_us: float | None = None
    ip_algbw_gbs: float | None = None
    ip_busbw_gbs: float | None = None
    ip_wrong: float | None = None

    @property
    def busbw_gbs(self) -> float:
        """The better of out-of-place and in-place bus bandwidth."""
        return max(self.oop_busbw_gbs, self.ip_busbw_gbs or 0.0)


@dataclass(frozen=True)
class NcclRank:
    """One `#  Rank N Group G Pid P on HOST device D [BUS] NAME` line."""

    rank: int
    host: str
    device: int
    bus_id: str
    gpu: str
    pid: int | None = None
    group: int | None = None


@dataclass(frozen=True)
class NcclExpected:
    """What the caller launched; None where it is not known (then not checked)."""

    max_bytes: int | None = None  # -e, in bytes (see `nccl_size`)
    ranks: int | None = None  # processes x GPUs per process
    nodes: int | None = None  # distinct hosts the ranks should be on
    validation: bool | None = None  # True: -c 1 asked, #wrong counts must be printed
    min_bytes: int | None = None  # -b, in bytes
    step_factor: int | None = None  # -f
    gpus_per_process: int | None = None  # -g (the header's nGpus)
    op: str | None = None  # the reduction asked (-o; all_reduce_perf's default `sum`)
    collective: str | None = None  # the binary launched (`all_reduce_perf`)
    hosts: tuple[tuple[str, ...], ...] | None = None
    """Each launched node's names (inventory name, address, hostname): the rank table's
    hosts must be these, each with its ranks."""
