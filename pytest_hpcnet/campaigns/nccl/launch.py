"""Multi-node launch commands for nccl-tests (`all_reduce_perf` and friends).

Three launchers, all pure: Open MPI `mpirun` (with a generated hostfile), Slurm
`srun`, or a user template. `*_argv` functions return argv lists (no shell
involved); `*_command` functions return one shell string in which every value is
quoted with `shlex`. `launch_command` picks one from the inventory's `benchmarks.nccl`
(the whole-cluster run and the bisection trials use it). The output is parsed by
`pytest_hpcnet.probes.nccl`.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pytest_hpcnet.inventory.bench_settings import NcclSettings
from pytest_hpcnet.probes.nccl import NcclExpected, nccl_size

_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOST_RE = re.compile(r"^[A-Za-z0-9_.:\-\[\]]+$")


@dataclass(frozen=True)
class NcclBenchArgs:
    """nccl-tests arguments: -b -e -f -g -c -n -w (None = tool default)."""

    min_bytes: str = "8"  # -b, accepts 8, 1M, 8G
    max_bytes: str = "8G"  # -e
    step_factor: int | None = 2  # -f
    gpus_per_process: int | None = 1  # -g
    check: int | None = 1  # -c (validation)
    iters: int | None = 20  # -n
    warmup_iters: int | None = 5  # -w
    extra: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        """The arguments as an argv tail."""
        out = ["-b", str(self.min_bytes), "-e", str(self.max_bytes)]
        for flag, value in (
            ("-f", self.step_factor),
            ("-g", self.gpus_per_process),
            ("-c", self.check),
            ("-n", self.iters),
            ("-w", self.warmup_iters),
        ):
            if value is not None:
                out += [flag, str(int(value))]
        return out + [str(a) for a in self.extra]


def nccl_env(
    ib_hca: str | None = None,
    socket_ifname: str | None = None,
    gid_index: int | None = None,
    debug: str | None = "WARN",
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The usual NCCL environment (NCCL_IB_HCA, NCCL_SOCKET_IFNAME, ...), Nones left out."""
    env: dict[str, str] = {}
    if ib_hca:
        env["NCCL_IB_HCA"] = ib_hca
    if socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = socket_ifname
    if gid_index is not None:
        env["NCCL_IB_GID_INDEX"] = str(int(gid_index))
    if debug:
        env["NCCL_DEBUG"] = debug
    env.update(extra or {})
    return env


def _check_env(env: Mapping[str, str]) -> None:
    for name in env:
        if not _ENV_NAME_RE.match(name):
            raise ValueError(f"not an environment variable name: {name!r}")


def _check_hosts(hosts: Sequence[str]) -> None:
    if not hosts:
        raise ValueError("no hosts to launch on")
    for host in hosts:
        if not _HOST_RE.match(host):
            raise ValueError(f"not a host name: {host!r}")


def hostfile_text(hosts: Sequence[tuple[str, int]]) -> str:
    """Open MPI hostfile: one `host slots=N` line per (host, slots)."""
    _check_hosts([h for h, _ in hosts])
    return "".join(f"{host} slots={int(slots)}\n" for host, slots in hosts)


def write_hostfile_command(path: str, hosts: Sequence[tuple[str, int]]) -> str:
    """A shell command writing `hostfile_text(hosts)` to `path`."""
    return f"printf %s {shlex.quote(hostfile_text(hosts))} > {shlex.quote(path)}"


@dataclass(frozen=True)
class MpirunSpec:
    """An Open MPI launch: `procs_per_node` ranks on each host of `hosts`."""

    hosts: tuple[str, ...]
    procs_per_node: int
    hostfile_path: str
    env: Mapping[str, str] = field(default_factory=dict)
    binary: str = "all_reduce_perf"
    mpirun: str = "mpirun"
    plm_rsh_args: str | None = None  # e.g. "-p 2222 -i /root/.ssh/id_ed25519"
    allow_run_as_root: bool = False
    extra_mpi_args: tuple[str, ...] = ()

    @property
    def np(self) -> int:
        return len(self.hosts) * int(self.procs_per_node)

    def hostfile(self) -> str:
        """The hostfile text to place at `hostfile_path` first."""
        return hostfile_text([(h, self.procs_per_node) for h in self.hosts])


def mpirun_argv(spec: MpirunSpec, bench: NcclBenchArgs) -> list[str]:
    """`mpirun -np N --hostfile F --map-by ppr:P:node -x VAR=value ... BINARY ARGS`."""
    _check_hosts(spec.hosts)
    _check_env(spec.env)
    argv = [spec.mpirun]
    if spec.allow_run_as_root:
        argv.append("--allow-run-as-root")
    argv += [
        "-np",
        str(spec.np),
        "--hostfile",
        spec.hostfile_path,
        "--map-by",
        f"ppr:{int(spec.procs_per_node)}:node",
    ]
    for name, value in spec.env.items():
        argv += ["-x", f"{name}={value}"]
    if spec.plm_rsh_args:
        argv += ["--mca", "plm_rsh_args", spec.plm_rsh_args]
    argv += [str(a) for a in spec.extra_mpi_args]
    return [*argv, spec.binary, *bench.argv()]


def mpirun_command(spec: MpirunSpec, bench: NcclBenchArgs) -> str:
    """`mpirun_argv` as one quoted shell string."""
    return shlex.join(mpirun_argv(spec, bench))


@dataclass(frozen=True)
class SrunSpec:
    """A Slurm launch: `tasks_per_node` tasks on each node of `nodes`."""

    nodes: tuple[str, ...]
    tasks_per_node: int
    env: Mapping[str, str] = field(default_factory=dict)
    binary: str = "all_reduce_perf"
    srun: str = "srun"
    mpi: str | None = "pmix"  # --mpi=
    gpus_per_node: int | None = None
    extra_srun_args: tuple[str, ...] = ()


def srun_argv(spec: SrunSpec, bench: NcclBenchArgs) -> list[str]:
    """`srun --nodelist=a,b -N 2 --ntasks-per-node=P --export=ALL,VAR=value ... BINARY ARGS`.

    Slurm's `--export` splits on commas, so variables whose value holds a comma
    (NCCL_IB_HCA=mlx5_0,mlx5_1) are passed through an `env VAR=value` prefix instead.
    """
    _check_hosts(spec.nodes)
    _check_env(spec.env)
    plain = {k: v for k, v in spec.env.items() if "," not in v}
    with_comma = {k: v for k, v in spec.env.items() if "," in v}
    argv = [
        spec.srun,
        f"--nodelist={','.join(spec.nodes)}",
        "-N",
        str(len(spec.nodes)),
        f"--ntasks-per-node={int(spec.tasks_per_node)}",
        "--export=" + ",".join(["ALL", *(f"{k}={v}" for k, v in plain.items())]),
    ]
    if spec.mpi:
        argv.append(f"--mpi={spec.mpi}")
    if spec.gpus_per_node is not None:
        argv.append(f"--gpus-per-node={int(spec.gpus_per_node)}")
    argv += [str(a) for a in spec.extra_srun_args]
    if with_comma:
        argv += ["env", *(f"{k}={v}" for k, v in with_comma.items())]
    return [*argv, spec.binary, *bench.argv()]


def srun_command(spec: SrunSpec, bench: NcclBenchArgs) -> str:
    """`srun_argv` as one quoted shell string."""
    return shlex.join(srun_argv(spec, bench))


TEMPLATE_FIELDS = ("hosts", "hostfile", "np", "ppn", "nnodes", "binary", "args", "env")


def template_command(
    template: str,
    hosts: Sequence[str],
    procs_per_node: int,
    bench: NcclBenchArgs,
    env: Mapping[str, str] | None = None,
    binary: str = "all_reduce_perf",
    hostfile: str = "",
) -> str:
    """Fill a user launch template (str.format style) with quoted values.

    Fields: {hosts} (comma list), {hostfile}, {np}, {ppn}, {nnodes}, {binary},
    {args} (benchmark args), {env} (`VAR=value` words). Unknown fields raise ValueError.
    """
    _check_hosts(hosts)
    env = dict(env or {})
    _check_env(env)
    values = {
        "hosts": shlex.quote(",".join(hosts)),
        "hostfile": shlex.quote(hostfile) if hostfile else "",
        "np": str(len(hosts) * int(procs_per_node)),
        "ppn": str(int(procs_per_node)),
        "nnodes": str(len(hosts)),
        "binary": shlex.quote(binary),
        "args": shlex.join(bench.argv()),
        "env": " ".join(shlex.quote(f"{k}={v}") for k, v in env.items()),
    }
    for _, name, _, _ in string.Formatter().parse(template):
        if name is not None and name not in values:
            raise ValueError(
                f"unknown field {{{name}}} in launch template; known: {', '.join(TEMPLATE_FIELDS)}"
            )
    return template.format(**values)


def bench_args(settings: NcclSettings) -> NcclBenchArgs:
    """The inventory's `-b -e -f -g -c -n -w` as nccl-tests arguments."""
    a = settings.args
    return NcclBenchArgs(
        min_bytes=a.b,
        max_bytes=a.e,
        step_factor=a.f,
        gpus_per_process=a.g,
        check=a.c,
        iters=a.n,
        warmup_iters=a.w,
    )


REDUCING = ("all_reduce_perf", "reduce_perf", "reduce_scatter_perf")
"""The collectives that print a `redop` column (nccl-tests' default op: `sum`)."""


def expected_run(
    settings: NcclSettings, nodes: int, hosts: Sequence[Sequence[str]] | None = None
) -> NcclExpected:
    """What `launch_command` starts on `nodes` nodes, for the parser to hold the output to:
    the sizes (-b/-e/-f), ranks, GPUs per process (-g), validation, the op and, given
    `hosts` (each node's names: inventory name, address, hostname), the rank table's hosts."""
    a = settings.args
    ranks = nodes * settings.gpus_per_node * (a.g or 1)
    binary = settings.binary.rsplit("/", 1)[-1]
    collective = binary.removesuffix("_mpi")
    return NcclExpected(
        max_bytes=nccl_size(a.e),
        ranks=ranks,
        nodes=nodes,
        validation=a.c == 1,
        min_bytes=nccl_size(a.b),
        step_factor=a.f,
        gpus_per_process=a.g,
        op="sum" if collective in REDUCING else None,
        collective=collective,
        hosts=tuple(tuple(h) for h in hosts) if hosts is not None else None,
    )


def launch_command(
    settings: NcclSettings, hosts: list[str], names: list[str], extra: Sequence[str] = ()
) -> str:
    """The command the launch node runs: mpirun (hostfile written first), srun or a template;
    `launch_env` (the launcher's own environment, e.g. SLURM_CONF) as an `env` prefix;
    `extra` after the benchmark arguments (e.g. `-J <file>`)."""
    _check_env(settings.launch_env)
    env = [f"{k}={v}" for k, v in settings.launch_env.items()]
    prefix = shlex.join(["env", *env]) + " " if env else ""
    bench = bench_args(settings)
    if extra:
        bench = dataclasses.replace(bench, extra=(*bench.extra, *extra))
    ppn = settings.gpus_per_node
    if settings.launcher == "srun":
        spec = SrunSpec(
            nodes=tuple(names),
            tasks_per_node=ppn,
            env=settings.env,
            binary=settings.binary,
            mpi=settings.srun_mpi,
            extra_srun_args=tuple(settings.srun_args),
        )
        return prefix + srun_command(spec, bench)
    if settings.launcher == "template":
        if not settings.template:
            raise ValueError("benchmarks.nccl.template is required with launcher: template")
        return prefix + template_command(
            settings.template, hosts, ppn, bench, settings.env, settings.binary, settings.hostfile
        )
    spec = MpirunSpec(
        hosts=tuple(hosts),
        procs_per_node=ppn,
        hostfile_path=settings.hostfile,
        env=settings.env,
        binary=settings.binary,
        plm_rsh_args=settings.plm_rsh_args,
        allow_run_as_root=settings.allow_run_as_root,
        extra_mpi_args=tuple(settings.mpirun_args),
    )
    hostfile = write_hostfile_command(spec.hostfile_path, [(h, ppn) for h in hosts])
    return f"{hostfile} && {prefix}{mpirun_command(spec, bench)}"
