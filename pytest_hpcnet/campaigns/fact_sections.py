"""What the facts round trip gathers on each node: one `FactSection` per probe (name +
command builder), joined by `facts_command` into the one script a node runs, so adding a
check adds no round trip. `campaigns.facts` runs it and reads the sections back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.erdma import (
    erdma_driver_command,
    erdma_identity_command,
)
from pytest_hpcnet.probes.erdma_gdr import gdr_command
from pytest_hpcnet.probes.fio import mount_check_command
from pytest_hpcnet.probes.gpu import GPU_QUERY, query_gpu_command
from pytest_hpcnet.probes.gpu_fabric import FABRIC_COMMAND
from pytest_hpcnet.probes.gpu_host import DRIVER_VERSION_COMMAND, MODULES_COMMAND, memlock_command
from pytest_hpcnet.probes.gpu_load import ENGINES_COMMAND
from pytest_hpcnet.probes.gpu_nvlink import ERRORS_COMMAND as NVLINK_ERRORS_COMMAND
from pytest_hpcnet.probes.gpu_nvlink import STATUS_COMMAND as NVLINK_STATUS_COMMAND
from pytest_hpcnet.probes.gpu_rdma import CUDA_COMMAND, RDMA_SYSFS_COMMAND
from pytest_hpcnet.probes.gpu_topo import TOPO_COMMAND
from pytest_hpcnet.probes.gpu_xid import KERNEL_LOG_COMMAND
from pytest_hpcnet.probes.links import ip_addr_command, ip_link_command
from pytest_hpcnet.probes.metadata import metadata_command
from pytest_hpcnet.probes.rdma import (
    compat_mode_command,
    erdma_module_command,
    ibv_devinfo_command,
    rdma_link_command,
)
from pytest_hpcnet.probes.sections import sections_script
from pytest_hpcnet.probes.sysctl import sysctl_command
from pytest_hpcnet.probes.versions import versions_command


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
    FactSection("hostname", _always("hostname")),
    FactSection("kernel", _always("uname -r")),
    # `-v` only: the devices and ports a plain call shows plus the GID table, in one call
    FactSection("ibv_devinfo_v", _always(ibv_devinfo_command(verbose=True))),
    FactSection("rdma_link", _always(rdma_link_command())),
    FactSection(
        "erdma_module",
        _when(
            lambda e: e.rdma.kernel_module,
            lambda e: erdma_module_command(e.rdma.kernel_module),
        ),
    ),
    FactSection(
        "compat_mode",
        _when(
            lambda e: e.rdma.compat_mode,
            lambda e: compat_mode_command(e.rdma.kernel_module or "erdma"),
        ),
    ),
    FactSection("links", _always(ip_link_command(stats=True))),
    # every interface: each ERI's address is its own netdev's (eth1 for erdma_1)
    FactSection("addr", _always(ip_addr_command())),
    FactSection("sysctl", lambda node, expect: sysctl_command(sorted(expect.sysctl))),
    FactSection(
        "metadata", lambda node, expect: metadata_command(base=expect.placement.metadata_url)
    ),
    FactSection("cpfs_mount", lambda node, expect: mount_check_command(expect.cpfs.mount)),
    FactSection("versions", _always(versions_command())),
    # eRDMA in depth: identity by driver/PCI id, GID tables, driver state
    FactSection("erdma_identity", _always(erdma_identity_command(None))),
    FactSection("erdma_driver", _always(erdma_driver_command(None, None))),
    FactSection("erdma_gdr", _when(lambda e: e.erdma.gdr, lambda e: gdr_command())),
]

# GPU node health: one block of sections, in the same round trip
GPU_SECTIONS: list[FactSection] = [
    FactSection(GPU_QUERY.name, _gpu_command(query_gpu_command())),
    FactSection("gpu_topo", _gpu_command(TOPO_COMMAND)),
    FactSection("gpu_cuda", _gpu_command(CUDA_COMMAND)),
    FactSection("gpu_driver", _gpu_command(DRIVER_VERSION_COMMAND)),
    FactSection("gpu_modules", _gpu_command(MODULES_COMMAND)),
    FactSection("gpu_memlock", _when(_gpu, lambda e: memlock_command(e.gpu.nccl_user))),
    FactSection("gpu_klog", _gpu_command(KERNEL_LOG_COMMAND)),
    FactSection(
        "rdma_sysfs", _when(lambda e: _gpu(e) and e.gpu.rdma_sysfs, lambda e: RDMA_SYSFS_COMMAND)
    ),
]
SECTIONS += GPU_SECTIONS

# GPUs under load: the engines each node has (found once, loaded in `campaigns/gpu_load`),
# NVLink where the profile expects it, the NVSwitch fabric where the SKU has one
_NVLINK: Expected = lambda e: _gpu(e) and e.gpu_load.nvlink_links  # noqa: E731
SECTIONS += [
    FactSection("gpu_engines", _gpu_command(ENGINES_COMMAND)),
    FactSection("gpu_nvlink_status", _when(_NVLINK, lambda e: NVLINK_STATUS_COMMAND)),
    FactSection("gpu_nvlink_errors", _when(_NVLINK, lambda e: NVLINK_ERRORS_COMMAND)),
    FactSection(
        "gpu_fabric", _when(lambda e: _gpu(e) and e.gpu_load.nvswitch, lambda e: FABRIC_COMMAND)
    ),
]


def facts_command(node: Node, expect: Expectations) -> str:
    """The one script that gathers every section on `node`."""
    return sections_script({s.name: s.build(node, expect) for s in SECTIONS})
