"""The emulated `nvidia-smi`, `dmesg` and `journalctl -k` on lab nodes, read over SSH by the
real commands and the pure parsers; each GPU fault fails exactly its judge on exactly the
faulted node (and GPU), and heal restores a clean pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpcnet.lab import faults
from pytest_hpcnet.probes.gpu import GpuQuery, parse_query_gpu, query_gpu_command
from pytest_hpcnet.probes.gpu_judges import (
    Verdict,
    judge_count_model,
    judge_ecc,
    judge_mig,
    judge_pcie,
    judge_persistence,
    judge_throttle,
    judge_xid,
)
from pytest_hpcnet.probes.gpu_node_judges import judge_nccl_ib_hca, judge_versions
from pytest_hpcnet.probes.gpu_topo import TOPO_COMMAND, parse_topo
from pytest_hpcnet.probes.gpu_xid import KERNEL_LOG_COMMAND, XidLog, parse_kernel_log
from pytest_hpcnet.transport.fanout import Transport

pytestmark = pytest.mark.lab

NODES = ("node01", "node02", "node03", "node04")
MODEL = "NVIDIA H200"


@pytest.fixture
def lab(lab4):
    """(state dir, fault injector); heals all nodes afterwards."""
    state_dir = Path(lab4.state_dir)

    def inject(kind: str, node: str, arg: str | None = None) -> str:
        return faults.inject(kind, node, arg, state_dir)

    yield state_dir, inject
    faults.heal("all", state_dir)


@pytest.fixture
def ssh(lab_inventory):
    transport = Transport(lab_inventory)
    yield lambda node, command: transport.run(node, command, timeout_s=30)
    transport.close()


def gather(ssh) -> dict[str, tuple[GpuQuery, XidLog]]:
    """Each node's parsed `--query-gpu` and kernel-log XIDs, read over SSH."""
    found = {}
    for node in NODES:
        query = ssh(node, query_gpu_command())
        klog = ssh(node, KERNEL_LOG_COMMAND)
        assert query.ok and klog.ok, (query.failure, klog.failure)
        found[node] = (parse_query_gpu(query.stdout), parse_kernel_log(klog.stdout))
    return found


def failures(found: dict[str, tuple[GpuQuery, XidLog]]) -> dict[tuple[str, str], Verdict]:
    """(node, judge) -> the failed verdict, over every node and every GPU judge."""
    out: dict[tuple[str, str], Verdict] = {}
    for node, (query, log) in found.items():
        verdicts = {
            "count": judge_count_model(node, query, 8, MODEL),
            "ecc": judge_ecc(node, query),
            "xid": judge_xid(node, log, allowed=(), query=query),
            "throttle": judge_throttle(node, query),
            "persistence": judge_persistence(node, query, True),
            "mig": judge_mig(node, query, False),
            "pcie": judge_pcie(node, query),
        }
        out.update({(node, name): v for name, v in verdicts.items() if not v})
    drivers = {
        n: {"driver": ",".join(sorted({g.driver_version for g in q.gpus}))}
        for n, (q, _) in found.items()
    }
    versions = judge_versions(drivers)
    if not versions:
        for node in NODES:
            if f" on {node} " in versions.reason:
                out[(node, "versions")] = versions
    return out


def test_healthy_lab_passes_every_gpu_judge(lab4, ssh):
    found = gather(ssh)
    assert failures(found) == {}
    for node, (query, log) in found.items():
        assert [g.index for g in query.gpus] == list(range(8)), node
        assert log.source == "journalctl" and log.events == (), node
    topo = parse_topo(ssh("node02", TOPO_COMMAND).stdout)
    assert topo.error is None and len(topo.gpus) == 8 and topo.nic_name("NIC0") == "erdma_0"
    assert topo.nearest_nics("GPU0") == ("erdma_0",)
    assert judge_nccl_ib_hca("node02", topo, "erdma")
    assert "leaves out erdma_0" in judge_nccl_ib_hca("node02", topo, "mlx5").reason


@pytest.mark.parametrize(
    ("kind", "node", "judge", "gpus", "text"),
    [
        ("gpu-missing", "node02", "count", (), "node02: 7 GPUs (index 0,1,2,3,4,5,6), expected 8"),
        ("gpu-ecc", "node03", "ecc", (3,), "GPU 3 (00000000:5D:00.0) 4 volatile uncorrected"),
        ("gpu-xid", "node04", "xid", (3,), "Xid 94 (Contained ECC error"),
        ("gpu-throttle", "node01", "throttle", (3,), "GPU 3 (00000000:5D:00.0) slowdown active"),
        ("gpu-pcie-downgrade", "node02", "pcie", (3,), "PCIe link gen4 of gen5, x8 of x16"),
        ("driver-mismatch", "node03", "versions", (), "driver 570.172.08 on node03 (others 580"),
    ],
)
def test_gpu_fault_fails_exactly_its_node(lab, ssh, kind, node, judge, gpus, text):
    state_dir, inject = lab
    inject(kind, node)
    failed = failures(gather(ssh))
    assert set(failed) == {(node, judge)}, {k: v.reason for k, v in failed.items()}
    verdict = failed[(node, judge)]
    assert verdict.gpus == gpus and text in verdict.reason and verdict.fix
    assert faults.heal(node, state_dir) == [f"{node}: {kind}"]
    assert failures(gather(ssh)) == {}
