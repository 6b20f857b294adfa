"""perftest `ib_write_bw` / `ib_write_lat`: options and command builders.

Server shape: `timeout -k 5 <server_timeout_s> ib_write_bw <options>`. The server
serves exactly one client run and exits; the `timeout` wrapper bounds it when no
client ever connects, and the SSH channel (or the process group) can always be
killed earlier. The client carries its own, slightly longer bound.

`largest_size` is the largest message size the options ask for: the output parsers
(`perftest_parsers`) treat a table that stops before it as a run cut short.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

ALL_SIZES_MAX = 2**23
"""The largest message of `-a` (perftest's MAX_SIZE, 8 MiB)."""
DEFAULT_SIZE_BW, DEFAULT_SIZE_LAT = 65536, 2
"""perftest's message size without `-s`: `ib_*_bw` and `ib_*_lat`."""


@dataclass(frozen=True)
class PerftestOptions:
    """Options shared by the server and client side of one perftest run."""

    binary: str = "ib_write_bw"
    device: str | None = None  # -d
    gid_index: int | None = None  # -x
    port: int | None = None  # -p (TCP port of the exchange / rdma_cm)
    size: int | None = None  # -s
    all_sizes: bool = False  # -a
    qps: int | None = None  # -q
    duration_s: int | None = None  # -D
    iterations: int | None = None  # -n
    ignore_cpu_freq: bool = True  # -F
    rdma_cm: bool = False  # -R
    report_gbits: bool = True  # --report_gbits (bandwidth tools only)
    extra_args: tuple[str, ...] = ()
    server_timeout_s: int = 120
    use_cuda: int | None = None  # --use_cuda=<gpu>: GPUDirect RDMA (a CUDA-built perftest)

    def __post_init__(self) -> None:
        if self.size is not None and self.all_sizes:
            raise ValueError("perftest: give either size (-s) or all_sizes (-a), not both")
        if self.duration_s is not None and self.all_sizes:
            raise ValueError("perftest: duration (-D) cannot be combined with all_sizes (-a)")
        if self.duration_s is not None and self.iterations is not None:
            raise ValueError("perftest: duration (-D) cannot be combined with iterations (-n)")


def _is_bandwidth_tool(binary: str) -> bool:
    return binary.rsplit("/", 1)[-1].endswith("_bw")


def _perftest_args(opts: PerftestOptions) -> list[str]:
    args: list[str] = [shlex.quote(opts.binary)]
    if opts.device:
        args += ["-d", shlex.quote(opts.device)]
    if opts.gid_index is not None:
        args += ["-x", shlex.quote(str(int(opts.gid_index)))]
    if opts.port is not None:
        args += ["-p", shlex.quote(str(int(opts.port)))]
    if opts.all_sizes:
        args.append("-a")
    elif opts.size is not None:
        args += ["-s", shlex.quote(str(int(opts.size)))]
    if opts.qps is not None:
        args += ["-q", shlex.quote(str(int(opts.qps)))]
    if opts.duration_s is not None:
        args += ["-D", shlex.quote(str(int(opts.duration_s)))]
    if opts.iterations is not None:
        args += ["-n", shlex.quote(str(int(opts.iterations)))]
    if opts.ignore_cpu_freq:
        args.append("-F")
    if opts.rdma_cm:
        args.append("-R")
    if opts.report_gbits and _is_bandwidth_tool(opts.binary):
        args.append("--report_gbits")
    if opts.use_cuda is not None:
        args.append(f"--use_cuda={int(opts.use_cuda)}")
    args += [shlex.quote(str(a)) for a in opts.extra_args]
    return args


def largest_size(opts: PerftestOptions) -> int | None:
    """The largest message size these options ask for; None when `extra_args` set it."""
    if any(str(a).split("=")[0] in ("-s", "--size", "-a", "--all") for a in opts.extra_args):
        return None
    if opts.all_sizes:
        return ALL_SIZES_MAX
    if opts.size is not None:
        return int(opts.size)
    return DEFAULT_SIZE_BW if _is_bandwidth_tool(opts.binary) else DEFAULT_SIZE_LAT


def server_command(opts: PerftestOptions) -> str:
    """The server side: `timeout -k 5 N <tool> <options>` (exits after one client run)."""
    bound = shlex.quote(str(int(opts.server_timeout_s)))
    return " ".join(["timeout", "-k", "5", bound, *_perftest_args(opts)])


def client_command(opts: PerftestOptions, target: str) -> str:
    """The client side against `target` (the server's address), bounded a bit longer."""
    if not target:
        raise ValueError("perftest client needs a target address")
    bound = shlex.quote(str(int(opts.server_timeout_s) + 10))
    return " ".join(["timeout", "-k", "5", bound, *_perftest_args(opts), shlex.quote(target)])


_VERBS = {"write": "RDMA_Write", "read": "RDMA_Read", "send": "Send", "atomic": "Atomic"}


@dataclass(frozen=True)
class ExpectedRun:
    """What one perftest command asked for, as its output must show it (the parsers check
    it: an output of another test, size or iteration count is not measured)."""

    test: str | None = None
    """The header's test line: `RDMA_Write BW Test`, `RDMA_Write Latency Test`."""
    kind: str = "bw"  # "bw" or "lat": the table layout asked for
    size: int | None = None
    """The one message size every row must show (`-s`, or the tool's default); None
    with `-a` or where `extra_args` set it."""
    largest: int | None = None  # the largest size asked (`largest_size`)
    iterations: int | None = None  # `-n`, the `#iterations` of every row


def expected_run(opts: PerftestOptions) -> ExpectedRun:
    """What `opts` ask the output to show."""
    name = opts.binary.rsplit("/", 1)[-1]
    kind = "bw" if name.endswith("_bw") else "lat"
    parts = name.split("_")
    verb = _VERBS.get(parts[1]) if len(parts) == 3 and parts[0] == "ib" else None
    test = f"{verb} {'BW' if kind == 'bw' else 'Latency'} Test" if verb else None
    extra = {str(a).split("=")[0] for a in opts.extra_args}
    largest = largest_size(opts)
    iterations = opts.iterations if not extra & {"-n", "--iters", "-D", "--duration"} else None
    return ExpectedRun(
        test=test,
        kind=kind,
        size=None if opts.all_sizes else largest,
        largest=largest,
        iterations=iterations,
    )
