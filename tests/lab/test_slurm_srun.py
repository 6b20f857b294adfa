"""The NCCL check launched by the real Slurm's `srun` (`benchmarks.nccl.launcher: srun`):
one task per lab node through slurmctld and each node's slurmd, the emulated all_reduce_perf
ranks finding each other from SLURM_PROCID/SLURM_NTASKS; a healthy run passes, a slow rank
(`nccl-slow` on node03) fails the check, and NCCL on halves (each an srun too) names node03.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pytest_hpcnet.campaigns.nccl.launch import launch_command
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.lab import faults
from pytest_hpcnet.lab import slurm as lab_slurm
from pytest_hpcnet.probes.nccl import parse_nccl
from pytest_hpcnet.transport.fanout import Transport
from tests.lab.test_lab_bench_support import leftovers
from tests.lab.test_static_suite import failing, run_static

pytestmark = pytest.mark.lab
MISSING = lab_slurm.missing()


@pytest.fixture(scope="module")
def slurm_lab(lab4):
    """The lab with munged, slurmctld and a slurmd per node; all stopped at the end."""
    if MISSING:
        pytest.skip(MISSING)
    lab_slurm.start(lab4)
    try:
        yield lab4
    finally:
        lab_slurm.stop(lab4.root)


def srun_inventory(lab, path: Path, expect_nccl: dict | None = None) -> Path:
    """The lab inventory with the NCCL campaign launched by srun against the lab's Slurm."""
    data = yaml.safe_load(Path(lab.inventory).read_text())
    nccl = data["benchmarks"]["nccl"]
    nccl["launcher"] = "srun"
    nccl["srun_mpi"] = "none"  # the emulated ranks use Slurm's own variables, not PMIx
    # slurmd runs in the node's network namespace only: the tools' /usr/local/sbin bind mount
    # lives in sshd's mount namespace, so the tasks run the binary by its host path
    nccl["binary"] = str(lab.bin_dir / "all_reduce_perf")
    nccl["srun_args"] = ["--time=5", "--kill-on-bad-exit=1"]
    nccl["launch_env"] = {"SLURM_CONF": str(lab_slurm.config_path(lab.root))}
    nccl["args"]["e"] = "4M"  # 1M..4M: each run is short
    if expect_nccl is not None:
        data["expect"]["nccl"] = expect_nccl
    path.write_text(yaml.safe_dump(data))
    return path


def allreduce(inventory_path: Path):
    inventory = load_inventory(inventory_path)
    settings = inventory.benchmarks.nccl
    command = launch_command(
        settings, [n.host for n in inventory.nodes], [n.name for n in inventory.nodes]
    )
    transport = Transport(inventory)
    try:
        result = transport.run("node01", command, settings.timeout_s)
    finally:
        transport.close()
    return command, parse_nccl(result.stdout + "\n" + result.stderr), result


def test_srun_runs_one_rank_on_every_node(slurm_lab, tmp_path):
    command, parsed, result = allreduce(srun_inventory(slurm_lab, tmp_path / "inv.yaml"))
    assert command.startswith("env SLURM_CONF=") and " srun --nodelist=node01,node02," in command
    assert result.ok and parsed.ok, result.stdout + result.stderr
    assert parsed.hosts == ("node01", "node02", "node03", "node04")  # placed by slurmd
    assert parsed.avg_busbw_gbs > 0 and parsed.total_wrong == 0
    assert leftovers(slurm_lab) == []


def test_nccl_check_via_srun_passes_then_fails_on_a_slow_rank_naming_it(slurm_lab, tmp_path):
    _, healthy, _ = allreduce(srun_inventory(slurm_lab, tmp_path / "probe.yaml"))
    assert healthy.ok, healthy.reason
    # Bounds at a third of a healthy run here and now hold whatever the load (see
    # test_benchmark_suite.test_slow_nccl_rank_is_found_by_halving)
    bounds = {
        "min_avg_busbw_gbs": round(healthy.avg_busbw_gbs / 3, 6),
        "min_busbw_largest_gbs": round(healthy.busbw_at_max_size_gbs / 3, 6),
    }
    inventory = str(srun_inventory(slurm_lab, tmp_path / "inv.yaml", bounds))
    code, records = run_static(
        inventory, tmp_path / "ok", "-k", "bus_bandwidth", marker="benchmark"
    )
    assert code == 0, [r["message"] for r in failing(records)]
    assert {r["check_id"] for r in records if r["verdict"] == "pass"} == {"nccl_busbw"}
    assert any(" srun " in c["command"] for r in records for c in r["commands"])

    # x25, not x10: a 2-node half runs several times faster than the 4-node run the bounds
    # come from (fewer ranks on the 2 shared cores), and must still fall below them
    faults.inject("nccl-slow", "node03", "25", Path(slurm_lab.state_dir))
    try:
        printed: list[str] = []
        code, records = run_static(
            inventory, tmp_path / "slow", "-k", "bus_bandwidth", marker="benchmark", output=printed
        )
    finally:
        faults.heal("node03", Path(slurm_lab.state_dir))
    bad = failing(records)
    assert code == 1
    assert {r["check_id"] for r in bad} == {"nccl_busbw"}, [r["message"] for r in bad]
    trials = [ln for ln in printed[0].splitlines() if "NCCL" in ln]
    for record in bad:
        assert "suspect node: node03 (NCCL on halves" in record["message"], (record, trials)
        assert record["suspect_nodes"] == ["node03"]
    assert "hpcnet: NCCL bisection on 2 nodes (node03 .. node01): fails" in printed[0]
    assert leftovers(slurm_lab) == []
