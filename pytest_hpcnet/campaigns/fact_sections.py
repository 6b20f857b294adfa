"""What the facts round trip gathers on each node: one `FactSection` per probe (its section's name,
declared beside the parser in the probe, + command builder), joined by `facts_command` into the
one script a node runs, so adding a check adds no round trip. `campaigns.facts` runs it and
reads the sections back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.erdma import (
    ERDMA_DRIVER_STATE,
    ERDMA_IDENTITY,
    erdma_driver_command,
    erdma_identity_command,
)
from pytest_hpcnet.probes.erdma_gdr import ERDMA_GDR, gdr_command
from pytest_hpcnet.probes.fio import CPFS_MOUNT, mount_check_command
from pytest_hpcnet.probes.firmware import (
    BIOS,
    GPU_FIRMWARE,
    GPU_FIRMWARE_COMMAND,
    NIC_INFO,
    bios_command,
    nic_info_command,
)
from pytest_hpcnet.probes.gpu import GPU_QUERY, query_gpu_command
from pytest_hpcnet.probes.gpu_fabric import FABRIC_COMMAND, GPU_FABRIC
from pytest_hpcnet.probes.gpu_host import (
    DRIVER_VERSION_COMMAND,
    GPU_DRIVER,
    GPU_MEMLOCK,
    GPU_MODULES,
    MODULES_COMMAND,
    memlock_command,
)
from pytest_hpcnet.probes.gpu_load import ENGINES_COMMAND, GPU_ENGINES
from pytest_hpcnet.probes.gpu_nvlink import ERRORS_COMMAND as NVLINK_ERRORS_COMMAND
from pytest_hpcnet.probes.gpu_nvlink import NVLINK_ERRORS, NVLINK_STATUS
from pytest_hpcnet.probes.gpu_nvlink import STATUS_COMMAND as NVLINK_STATUS_COMMAND
from pytest_hpcnet.probes.gpu_rdma import CUDA_COMMAND, GPU_CUDA, RDMA_SYSFS, RDMA_SYSFS_COMMAND
from pytest_hpcnet.probes.gpu_topo import GPU_TOPO, TOPO_COMMAND
from pytest_hpcnet.probes.gpu_xid import GPU_KLOG, KERNEL_LOG_COMMAND
from pytest_hpcnet.probes.host_hardware import HOST_HARDWARE, host_hardware_command
from pytest_hpcnet.probes.host_settings import HOST_SETTINGS, host_settings_command
from pytest_hpcnet.probes.identity import HOSTNAME, KERNEL
from pytest_hpcnet.probes.links import ADDR, LINKS, ip_addr_command, ip_link_command
from pytest_hpcnet.probes.metadata import METADATA, metadata_command
from pytest_hpcnet.probes.pcie_aer import PCIE_DEVICES, pcie_devices_command
from pytest_hpcnet.probes.rdma import (
    COMPAT_MODE,
    ERDMA_MODULE,
    compat_mode_command,
    erdma_module_command,
    ibv_devinfo_command,
    rdma_link_command,
)
from pytest_hpcnet.probes.rdma_parsers import IBV_DEVINFO, RDMA_LINK
from pytest_hpcnet.probes.sections import sections_script
from pytest_hpcnet.probes.sysctl import SYSCTL, sysctl_command
from pytest_hpcnet.probes.timesync import TIMESYNC, TIMESYNC_COMMAND
from pytest_hpcnet.probes.versions import VERSIONS, versions_command


@dataclass(frozen=True)
class FactSection:
    """One probe's share of the facts script; `build` returns a POSIX sh command."""

    name: str
    build: Callable[[Node, Expectations], str]


NOT_EXPECTED = "echo 'not expected'"
"""What a section runs where the profile expects nothing of it (its check is not applicable)."""

Expected = Callable[[Expectations], object]


def _when(expected: Expected, build: Callable[[Expectations], str]) -> Callable[..., str]:
    """`build(expect)` where `expected(expect)` holds, else nothing (`NOT_EXPECTED`)."""
    return lambda node, expect: build(expect) if expected(expect) else NOT_EXPECTED


def _always(command: str) -> Callable[..., str]:
    return lambda node, expect: command


def _gpu(expect: Expectations) -> object:
    """A GPU profile (a CPU-only one, `expect.gpu.count` unset, runs no GPU section)."""
    return expect.gpu.count


def _gpu_command(command: str) -> Callable[..., str]:
    return _when(_gpu, lambda expect: command)


SECTIONS: list[FactSection] = [
    FactSection(HOSTNAME.name, _always("hostname")),
    FactSection(KERNEL.name, _always("uname -r")),
    # `-v` only: the devices and ports a plain call shows plus the GID table, in one call
    FactSection(IBV_DEVINFO.name, _always(ibv_devinfo_command(verbose=True))),
    FactSection(RDMA_LINK.name, _always(rdma_link_command())),
    FactSection(
        ERDMA_MODULE.name,
        _when(
            lambda e: e.rdma.kernel_module,
            lambda e: erdma_module_command(e.rdma.kernel_module),
        ),
    ),
    FactSection(
        COMPAT_MODE.name,
        _when(
            lambda e: e.rdma.compat_mode,
            lambda e: compat_mode_command(e.rdma.kernel_module or "erdma"),
        ),
    ),
    FactSection(LINKS.name, _always(ip_link_command(stats=True))),
    # every interface: each ERI's address is its own netdev's (eth1 for erdma_1)
    FactSection(ADDR.name, _always(ip_addr_command())),
    FactSection(SYSCTL.name, lambda node, expect: sysctl_command(sorted(expect.sysctl))),
    FactSection(
        METADATA.name, lambda node, expect: metadata_command(base=expect.placement.metadata_url)
    ),
    FactSection(CPFS_MOUNT.name, lambda node, expect: mount_check_command(expect.cpfs.mount)),
    FactSection(VERSIONS.name, _always(versions_command())),
    # firmware: each ERI netdev's driver and firmware, the host's BIOS (GPUs' below)
    FactSection(NIC_INFO.name, _always(nic_info_command())),
    FactSection(BIOS.name, _always(bios_command())),
    # eRDMA in depth: identity by driver/PCI id, GID tables, driver state
    FactSection(ERDMA_IDENTITY.name, _always(erdma_identity_command(None))),
    FactSection(ERDMA_DRIVER_STATE.name, _always(erdma_driver_command(None, None))),
    FactSection(ERDMA_GDR.name, _when(lambda e: e.erdma.gdr, lambda e: gdr_command())),
]

# GPU node health: one block of sections, in the same round trip
GPU_SECTIONS: list[FactSection] = [
    FactSection(GPU_QUERY.name, _gpu_command(query_gpu_command())),
    FactSection(GPU_TOPO.name, _gpu_command(TOPO_COMMAND)),
    FactSection(GPU_CUDA.name, _gpu_command(CUDA_COMMAND)),
    FactSection(GPU_FIRMWARE.name, _gpu_command(GPU_FIRMWARE_COMMAND)),
    FactSection(GPU_DRIVER.name, _gpu_command(DRIVER_VERSION_COMMAND)),
    FactSection(GPU_MODULES.name, _gpu_command(MODULES_COMMAND)),
    FactSection(GPU_MEMLOCK.name, _when(_gpu, lambda e: memlock_command(e.gpu.nccl_user))),
    FactSection(GPU_KLOG.name, _gpu_command(KERNEL_LOG_COMMAND)),
    FactSection(
        RDMA_SYSFS.name, _when(lambda e: _gpu(e) and e.gpu.rdma_sysfs, lambda e: RDMA_SYSFS_COMMAND)
    ),
]
SECTIONS += GPU_SECTIONS

# GPUs under load: the engines each node has (found once, loaded in `campaigns/gpu_load`),
# NVLink where the profile expects it, the NVSwitch fabric where the SKU has one
_NVLINK: Expected = lambda e: _gpu(e) and e.gpu_load.nvlink_links  # noqa: E731
SECTIONS += [
    FactSection(GPU_ENGINES.name, _gpu_command(ENGINES_COMMAND)),
    FactSection(NVLINK_STATUS.name, _when(_NVLINK, lambda e: NVLINK_STATUS_COMMAND)),
    FactSection(NVLINK_ERRORS.name, _when(_NVLINK, lambda e: NVLINK_ERRORS_COMMAND)),
    FactSection(
        GPU_FABRIC.name, _when(lambda e: _gpu(e) and e.gpu_load.nvswitch, lambda e: FABRIC_COMMAND)
    ),
]


# The host itself: its hardware, the PCIe devices' AER counters and links, the settings that
# change results and the clock's offset (every node, GPU or not)
SECTIONS += [
    FactSection(HOST_HARDWARE.name, _always(host_hardware_command())),
    FactSection(PCIE_DEVICES.name, _always(pcie_devices_command())),
    FactSection(HOST_SETTINGS.name, _always(host_settings_command())),
    FactSection(TIMESYNC.name, _always(TIMESYNC_COMMAND)),
]


def facts_command(node: Node, expect: Expectations) -> str:
    """The one script that gathers every section on `node`."""
    return sections_script({s.name: s.build(node, expect) for s in SECTIONS})
