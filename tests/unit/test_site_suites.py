"""The site-check examples of `suites/` collect and run with the plugin's fixtures: against a
fake cluster (kernels and mounts per node) they pass a healthy cluster and name the node
and the problem otherwise."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SITE = Path(__file__).resolve().parents[2] / "suites"
INVENTORY = """\
cluster: {name: site, region: cn-test}
nodes:
  - {name: "n[1-3]", host: "198.18.0.[201-203]"}
"""
FAKE = """\
import pytest

from pytest_hpcnet.transport.fanout import CommandResult

KERNELS = {"n1": "5.10.134-16", "n2": "5.10.134-16", "n3": "%(n3_kernel)s"}
MOUNTS = "/dev/vda1 / ext4 rw 0 0\\nproc /proc proc rw 0 0\\n%(extra)s"


class Facts:
    def __init__(self, node):
        self.node = node

    def text(self, section):
        assert section == "kernel"
        return KERNELS[self.node] + "\\n"


class FakeCluster:
    def gather_facts(self):
        return {name: Facts(name) for name in KERNELS}

    def facts(self, node, recorder=None):
        return Facts(node.name)

    def run(self, node, command, timeout_s=None, recorder=None):
        assert command == "cat /proc/mounts"
        result = CommandResult(node.name, command, 0, MOUNTS, "", 0.01, 0.0)
        if recorder is not None:
            recorder.command(result)
        return result


@pytest.fixture(scope="session")
def cluster():
    return FakeCluster()
"""


def run_site(pytester: pytest.Pytester, n3_kernel: str = "5.10.134-16", extra: str = ""):
    pytester.makefile(".yaml", inv=INVENTORY)
    shutil.copytree(SITE, pytester.path / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    pytester.makeconftest(FAKE % {"n3_kernel": n3_kernel, "extra": extra})
    return pytester.runpytest_subprocess(
        "--hpcnet-inventory", "inv.yaml", "suites", "-p", "no:cacheprovider", "-rf"
    )


def test_the_examples_pass_a_healthy_cluster(pytester):
    result = run_site(pytester)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*checks: 6 passed, 0 failed*"])


def test_a_node_on_another_kernel_fails_by_name(pytester):
    result = run_site(pytester, n3_kernel="5.10.112-11")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["*n3: kernel 5.10.112-11, expected 5.10.134-16*"])


def test_a_pinned_kernel_and_a_listed_mount(pytester, monkeypatch):
    monkeypatch.setenv("HPCNET_SITE_KERNEL", "5.10.134-16")
    monkeypatch.setenv("HPCNET_SITE_MOUNTS", "/mnt/cpfs=nfs /proc=proc")
    result = run_site(pytester, extra="cpfs:/share /mnt/cpfs xfs rw 0 0\\n")
    result.assert_outcomes(passed=3, failed=3)
    result.stdout.fnmatch_lines(["*n1: /mnt/cpfs is xfs, expected nfs*"])
