"""The host itself: its hardware, the PCIe devices' AER counters and NVMe links, and the
settings that change results (docs/checks.md, "The host").

Each test hands one judge's verdict (`requirements/host_hardware.py`, `pcie_aer.py`,
`host_settings.py`) to its check; every section rides the facts round trip. CPUs and memory
the profile leaves unset are judged against the instance type's figures in the session's one
control-plane read (`cloud_plane`, the cloud audit's DescribeInstanceTypes answer)."""

import pytest

from pytest_hpcnet.cloud.audit import type_figures
from pytest_hpcnet.probes.host_hardware import HOST_HARDWARE
from pytest_hpcnet.probes.host_settings import HOST_SETTINGS
from pytest_hpcnet.probes.pcie_aer import PCIE_DEVICES
from pytest_hpcnet.probes.timesync import TIMESYNC
from pytest_hpcnet.requirements.host_hardware import judge_host_hardware
from pytest_hpcnet.requirements.host_settings import judge_host_settings, judge_time_offset
from pytest_hpcnet.requirements.pcie_aer import judge_nvme_pcie, judge_pcie_aer
from pytest_hpcnet.requirements.registry import mark, not_applicable_when

pytestmark = [pytest.mark.static]


@mark("host_hardware")
def test_host_hardware(cluster, node, check, cloud_plane):
    hardware = cluster.facts(node, check).get(HOST_HARDWARE)
    described = type_figures(cloud_plane.plane, node.name)  # None without a cloud read
    check.judge(judge_host_hardware(node.name, hardware, cluster.expect, described))


@mark("pcie_aer")
def test_pcie_aer_counters(cluster, node, check):
    devices = cluster.facts(node, check).get(PCIE_DEVICES)
    check.judge(judge_pcie_aer(node.name, devices, cluster.expect))


@mark("pcie_links")
@not_applicable_when(
    lambda expect: not expect.host.nvme_count,
    "not applicable: the profile expects no local NVMe (expect.host.nvme_count)",
)
def test_nvme_pcie_links(cluster, node, check):
    devices = cluster.facts(node, check).get(PCIE_DEVICES)
    check.judge(judge_nvme_pcie(node.name, devices))


@mark("host_settings")
def test_host_settings(cluster, node, check):
    settings = cluster.facts(node, check).get(HOST_SETTINGS)
    check.judge(judge_host_settings(node.name, settings, cluster.expect))


@mark("host_settings")
def test_time_offset(cluster, node, check):
    sync = cluster.facts(node, check).get(TIMESYNC)
    check.judge(judge_time_offset(node.name, sync, cluster.expect))
