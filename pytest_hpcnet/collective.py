"""NCCL all-reduce across the inventory's nodes, launched once from the first reachable node."""

from __future__ import annotations

from pytest_hpcnet.bench_settings import NcclSettings
from pytest_hpcnet.launch import (
    MpirunSpec,
    NcclBenchArgs,
    SrunSpec,
    mpirun_command,
    srun_command,
    template_command,
    write_hostfile_command,
)
from pytest_hpcnet.probes.nccl import NcclExpected, nccl_size


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


def expected_run(settings: NcclSettings, nodes: int) -> NcclExpected:
    """What `launch_command` starts on `nodes` nodes, for the parser to hold the output to."""
    a = settings.args
    ranks = nodes * settings.gpus_per_node * (a.g or 1)
    return NcclExpected(max_bytes=nccl_size(a.e), ranks=ranks, nodes=nodes, validation=a.c == 1)


def launch_command(settings: NcclSettings, hosts: list[str], names: list[str]) -> str:
    """The command the launch node runs: mpirun (hostfile written first), srun or a template."""
    bench = bench_args(settings)
    ppn = settings.gpus_per_node
    if settings.launcher == "srun":
        spec = SrunSpec(
            nodes=tuple(names), tasks_per_node=ppn, env=settings.env, binary=settings.binary
        )
        return srun_command(spec, bench)
    if settings.launcher == "template":
        if not settings.template:
            raise ValueError("benchmarks.nccl.template is required with launcher: template")
        return template_command(
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
    return f"{hostfile} && {mpirun_command(spec, bench)}"
