"""Unit tests of the nccl-tests launch command builders."""

from __future__ import annotations

import shlex

import pytest

from pytest_hpcnet.campaigns.nccl.launch import (
    MpirunSpec,
    NcclBenchArgs,
    SrunSpec,
    expected_run,
    hostfile_text,
    launch_command,
    mpirun_argv,
    mpirun_command,
    nccl_env,
    srun_argv,
    srun_command,
    template_command,
    write_hostfile_command,
)
from pytest_hpcnet.inventory.bench_settings import NcclSettings
from pytest_hpcnet.probes.nccl import NcclExpected

BENCH = NcclBenchArgs(min_bytes="1M", max_bytes="8G", step_factor=2, iters=50, warmup_iters=10)


def test_bench_args():
    assert BENCH.argv() == [
        "-b", "1M", "-e", "8G", "-f", "2", "-g", "1", "-c", "1", "-n", "50", "-w", "10"
    ]  # fmt: skip
    bare = NcclBenchArgs(step_factor=None, gpus_per_process=None, check=None, iters=None,
                         warmup_iters=None, extra=("-d", "half"))  # fmt: skip
    assert bare.argv() == ["-b", "8", "-e", "8G", "-d", "half"]


def test_hostfile_text_and_write_command():
    assert hostfile_text([("n1", 8), ("n2", 8)]) == "n1 slots=8\nn2 slots=8\n"
    cmd = write_hostfile_command("/tmp/host file", [("n1", 8)])
    assert shlex.split(cmd) == ["printf", "%s", "n1 slots=8\n", ">", "/tmp/host file"]
    with pytest.raises(ValueError):
        hostfile_text([("bad host;", 1)])


def test_nccl_env():
    env = nccl_env(ib_hca="erdma_0", socket_ifname="eth0", gid_index=1)
    assert env == {
        "NCCL_IB_HCA": "erdma_0",
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_IB_GID_INDEX": "1",
        "NCCL_DEBUG": "WARN",
    }
    assert nccl_env(debug=None, extra={"NCCL_NET_GDR_LEVEL": "5"}) == {"NCCL_NET_GDR_LEVEL": "5"}


def test_mpirun_argv():
    spec = MpirunSpec(
        hosts=("n1", "n2"),
        procs_per_node=8,
        hostfile_path="/tmp/hpcnet.hosts",
        env=nccl_env(ib_hca="erdma_0,erdma_1", gid_index=1),
        plm_rsh_args="-p 2222 -o StrictHostKeyChecking=yes",
        allow_run_as_root=True,
    )
    argv = mpirun_argv(spec, BENCH)
    assert argv[:2] == ["mpirun", "--allow-run-as-root"]
    assert argv[argv.index("-np") + 1] == "16"
    assert argv[argv.index("--hostfile") + 1] == "/tmp/hpcnet.hosts"
    assert argv[argv.index("--map-by") + 1] == "ppr:8:node"
    xs = [argv[i + 1] for i, a in enumerate(argv) if a == "-x"]
    assert xs == ["NCCL_IB_HCA=erdma_0,erdma_1", "NCCL_IB_GID_INDEX=1", "NCCL_DEBUG=WARN"]
    i = argv.index("--mca")
    assert argv[i + 1 : i + 3] == ["plm_rsh_args", "-p 2222 -o StrictHostKeyChecking=yes"]
    assert argv[-15] == "all_reduce_perf" and argv[-14:] == BENCH.argv()
    assert shlex.split(mpirun_command(spec, BENCH)) == argv
    assert spec.hostfile() == "n1 slots=8\nn2 slots=8\n"


def test_mpirun_refuses_bad_env_name():
    spec = MpirunSpec(hosts=("n1",), procs_per_node=1, hostfile_path="/h", env={"A B": "1"})
    with pytest.raises(ValueError):
        mpirun_argv(spec, BENCH)


def test_srun_argv_moves_comma_values_to_env():
    spec = SrunSpec(
        nodes=("gpu-[1]", "gpu-2"),
        tasks_per_node=8,
        env=nccl_env(ib_hca="erdma_0,erdma_1", socket_ifname="eth0"),
        gpus_per_node=8,
    )
    argv = srun_argv(spec, BENCH)
    assert argv[:5] == ["srun", "--nodelist=gpu-[1],gpu-2", "-N", "2", "--ntasks-per-node=8"]
    assert "--export=ALL,NCCL_SOCKET_IFNAME=eth0,NCCL_DEBUG=WARN" in argv
    assert "--mpi=pmix" in argv and "--gpus-per-node=8" in argv
    i = argv.index("env")
    assert argv[i + 1 : i + 3] == ["NCCL_IB_HCA=erdma_0,erdma_1", "all_reduce_perf"]
    assert shlex.split(srun_command(spec, BENCH)) == argv


def test_template_command_quotes_values():
    cmd = template_command(
        "mpirun -H {hosts} -np {np} -npernode {ppn} {env} {binary} {args}",
        ["n1", "n2"],
        4,
        BENCH,
        env={"NCCL_IB_HCA": "erdma 0"},
        binary="/opt/nccl tests/all_reduce_perf",
    )
    argv = shlex.split(cmd)
    assert argv[:7] == ["mpirun", "-H", "n1,n2", "-np", "8", "-npernode", "4"]
    assert argv[7] == "NCCL_IB_HCA=erdma 0"
    assert argv[8] == "/opt/nccl tests/all_reduce_perf"
    assert argv[9:] == BENCH.argv()


@pytest.mark.parametrize("template", ["run {nodes}", "run {}", "run {0}"])
def test_template_unknown_field(template):
    with pytest.raises(ValueError, match="unknown field"):
        template_command(template, ["n1"], 1, BENCH)


def test_no_hosts_is_refused():
    with pytest.raises(ValueError):
        srun_argv(SrunSpec(nodes=(), tasks_per_node=1), BENCH)


def test_expected_run_is_what_the_launcher_starts():
    settings = NcclSettings(gpus_per_node=8, args={"b": "1M", "e": "128M", "g": 1, "c": 1})
    assert expected_run(settings, 4) == NcclExpected(
        max_bytes=134217728,
        ranks=32,
        nodes=4,
        validation=True,
        min_bytes=2**20,
        step_factor=2,
        gpus_per_process=1,
        op="sum",
        collective="all_reduce_perf",
    )
    two_per_process = NcclSettings(gpus_per_node=4, args={"g": 2, "c": 0})
    launched = expected_run(two_per_process, 2, [("a", "10.0.0.1"), ("b",)])
    assert launched == NcclExpected(
        max_bytes=8 * 2**30,
        ranks=16,
        nodes=2,
        validation=False,
        min_bytes=8,
        step_factor=2,
        gpus_per_process=2,
        op="sum",
        collective="all_reduce_perf",
        hosts=(("a", "10.0.0.1"), ("b",)),
    )
    gather = NcclSettings(binary="/opt/nccl-tests/build/all_gather_perf")
    assert expected_run(gather, 2).op is None
    assert expected_run(gather, 2).collective == "all_gather_perf"


def test_srun_launch_takes_mpi_args_and_the_launchers_own_env():
    settings = NcclSettings(
        launcher="srun",
        gpus_per_node=1,
        srun_mpi="none",
        srun_args=["--time=5"],
        env={"NCCL_IB_HCA": "erdma_0"},
        launch_env={"SLURM_CONF": "/var/lab/slurm/slurm.conf"},
    )
    words = shlex.split(launch_command(settings, ["10.0.0.1"], ["gpu1"]))
    assert words[:2] == ["env", "SLURM_CONF=/var/lab/slurm/slurm.conf"]
    assert words[2] == "srun" and "--mpi=none" in words and "--time=5" in words
    assert "--export=ALL,NCCL_IB_HCA=erdma_0" in words  # the ranks' env, not SLURM_CONF
    default = shlex.split(launch_command(NcclSettings(launcher="srun"), ["h"], ["n"]))
    assert default[0] == "srun" and "--mpi=pmix" in default


def test_launch_env_applies_to_mpirun_not_the_hostfile_write():
    settings = NcclSettings(launch_env={"PATH": "/opt/ompi/bin:/usr/bin"})
    command = launch_command(settings, ["10.0.0.1"], ["gpu1"])
    hostfile, run = command.split(" && ")
    assert hostfile.startswith("printf ") and run.startswith(
        "env PATH=/opt/ompi/bin:/usr/bin mpirun "
    )
    with pytest.raises(ValueError, match="not an environment variable name"):
        launch_command(NcclSettings(launch_env={"A B": "x"}), ["h"], ["n"])
