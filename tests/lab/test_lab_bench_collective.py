"""all_reduce_perf through the real Open MPI mpirun across 4 lab nodes; fio on /mnt/cpfs.

The lab inventory's `benchmarks:` block is used as the plugin uses it. Every test heals
what it injects and leaves no mpirun/orted/rank/fio process in any node namespace.
"""

from __future__ import annotations

import pytest

from pytest_hpcnet.campaigns.nccl.launch import expected_run, launch_command
from pytest_hpcnet.campaigns.storage import run_fio
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import cgroups, faults
from pytest_hpcnet.probes.fio import fstype_allowed, mount_check_command, parse_mount
from pytest_hpcnet.probes.nccl import parse_nccl
from pytest_hpcnet.requirements.judges import is_not_measured, judge_nccl_correct, judge_nccl_run
from pytest_hpcnet.transport.fanout import Transport
from tests.lab.test_lab_bench_support import heal_all, leftovers

pytestmark = pytest.mark.lab


@pytest.fixture
def lab(lab4):
    """(state, inventory, transport); healed and checked for leftovers afterwards."""
    inventory = load_inventory(lab4.inventory)
    transport = Transport(inventory)
    try:
        yield lab4, inventory, transport
    finally:
        transport.close()
        heal_all(lab4)
    assert leftovers(lab4) == []


def _allreduce(inventory, transport, **args):
    settings = inventory.benchmarks.nccl
    if args:
        settings = settings.model_copy(update={"args": settings.args.model_copy(update=args)})
    hosts = [n.host for n in inventory.nodes]
    command = launch_command(settings, hosts, [n.name for n in inventory.nodes])
    result = transport.run("node01", command, settings.timeout_s)
    return parse_nccl(result.stdout + "\n" + result.stderr), result


def test_mpirun_runs_all_reduce_on_all_four_nodes(lab):
    state, inventory, transport = lab
    assert inventory.expect.flows.deny[0].port == 2323
    parsed, result = _allreduce(inventory, transport)
    assert result.ok and parsed.ok, result.stdout + result.stderr
    assert parsed.hosts == ("node01", "node02", "node03", "node04")  # orted started remotely
    assert parsed.avg_busbw_gbs > 0 and parsed.total_wrong == 0 and parsed.oob_values == 0
    assert [r.size_bytes for r in parsed.rows] == [2**20 * k for k in (1, 2, 4, 8, 16)]
    assert parsed.collective == "all_reduce_perf" and parsed.n_gpus_per_thread == 1
    assert not list((state.root / "rendezvous").glob("*"))


def test_nccl_slow_rank_lowers_bus_bandwidth(lab):
    state, inventory, transport = lab
    healthy, _ = _allreduce(inventory, transport, e="2M", n=2)
    faults.inject("nccl-slow", "node03", "8", state.state_dir)
    slowed, _ = _allreduce(inventory, transport, e="2M", n=2)
    assert slowed.ok and slowed.avg_busbw_gbs < healthy.avg_busbw_gbs / 3, (healthy, slowed)


def _launched(inventory, **args):
    settings = inventory.benchmarks.nccl
    settings = settings.model_copy(update={"args": settings.args.model_copy(update=args)})
    return expected_run(settings, len(inventory.nodes))


def test_rank_crashing_after_a_whole_table_fails_the_run(lab):
    """Issue 23 (3): node03's rank prints `Test NCCL failure` and segfaults once the table
    and its footer are out: the table is whole, the run is not ok, mpirun exits non-zero."""
    state, inventory, transport = lab
    faults.inject("nccl-crash", "node03", None, state.state_dir)
    parsed, result = _allreduce(inventory, transport, e="2M", n=2)
    assert parsed.max_size_bytes == 2 * 2**20 and parsed.avg_busbw_gbs is not None, parsed
    assert any("node03: Test NCCL failure common.cu:1279" in f for f in parsed.failures)
    assert not result.ok and not parsed.ok
    verdict = judge_nccl_run(parsed, result, _launched(inventory, e="2M", n=2))
    assert not verdict and "node03: Test NCCL failure" in verdict.reason
    assert "exit status" in verdict.reason, verdict.reason


def test_validation_off_is_not_measured(lab):
    """Issue 23 (5): under `-c 0` the #wrong cells are N/A: correctness is not measured."""
    _, inventory, transport = lab
    parsed, result = _allreduce(inventory, transport, e="2M", n=2, c=0)
    launched = _launched(inventory, e="2M", n=2, c=0)
    assert result.ok and parsed.ok and judge_nccl_run(parsed, result, launched)
    assert parsed.wrong_na == parsed.wrong_cells > 0
    assert is_not_measured(judge_nccl_correct(parsed, result, launched))


def test_cpfs_is_a_tmpfs_mount_and_fio_slow_lowers_throughput(lab):
    state, inventory, transport = lab
    mount = parse_mount(transport.run("node02", mount_check_command("/mnt/cpfs")).stdout)
    assert mount.target == "/mnt/cpfs" and fstype_allowed(mount.fstype, ("tmpfs",))
    settings = inventory.benchmarks.fio.model_copy(update={"runtime_s": 2})
    nodes = ["node01", "node02"]
    healthy = run_fio(transport, nodes, "/mnt/cpfs", settings)
    assert all(r.error is None and r.write.ok and r.read.ok for r in healthy.values()), healthy
    faults.inject("fio-slow", "node02", "3", state.state_dir)
    assert cgroups.group_path("node02").exists()
    slowed = run_fio(transport, nodes, "/mnt/cpfs", settings)
    for rw in ("write", "read"):
        fast = getattr(healthy["node02"], rw)
        slow = getattr(slowed["node02"], rw)
        before, after = getattr(fast, f"{rw}_bw_mb_s"), getattr(slow, f"{rw}_bw_mb_s")
        assert after < before / 3, (rw, before, after)
    faults.heal("node02", state.state_dir)
    assert not cgroups.group_path("node02").exists()
    listing = transport.run("node02", "ls -A /mnt/cpfs").stdout.split()
    assert listing == []
