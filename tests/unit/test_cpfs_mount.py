"""The CPFS mount check knows what real CPFS clients put in /proc/mounts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpcnet.inventory.expectations import CpfsExpect
from pytest_hpcnet.probes.fio import parse_mount
from pytest_hpcnet.requirements.cpfs_mount import judge_cpfs_mount

MOUNTS = (Path(__file__).parents[1] / "fixtures/fio/proc-mounts-cpfs-clients.txt").read_text()


def judged(mount: str, **cpfs):
    return judge_cpfs_mount("gpu-1", parse_mount(MOUNTS, mount), CpfsExpect(mount=mount, **cpfs))


@pytest.mark.parametrize(
    ("mount", "client"),
    [
        ("/mnt/cpfs-nfs", "cpfs-nfs"),
        ("/mnt/cpfs-efc", "efc"),
        ("/mnt/cpfs-lustre", "lustre"),
    ],
)
def test_each_real_client_is_accepted_by_default_and_as_its_client(mount, client):
    assert judged(mount)
    assert judged(mount, client=client)


def test_cpfs_nfs_requires_the_local_proxy():
    verdict = judged("/mnt/cpfs-plain-nfs", client="cpfs-nfs")
    assert not verdict
    assert verdict.reason.startswith("gpu-1: /mnt/cpfs-plain-nfs is nfs (")
    assert "without the cpfs-nfs proxy on 127.0.x.y" in verdict.reason


def test_a_client_other_than_the_one_named_fails():
    verdict = judged("/mnt/cpfs-efc", client="cpfs-nfs")
    assert not verdict and "a cpfs-nfs mount shows nfs" in verdict.reason


def test_a_directory_on_the_root_disk_is_not_a_mount():
    verdict = judged("/mnt/cpfs")
    assert not verdict
    assert verdict.reason == "gpu-1: /mnt/cpfs is not a mount point (inside /)"
