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
from pytest_hpcnet.probes.gpu import query_gpu_command
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


def _module_command(expect: Expectations) -> str:
    module = expect.rdma.kernel_module
    return erdma_module_command(module) if module else "echo 'not expected'"


def _compat_command(expect: Expectations) -> str:
    module = expect.rdma.kernel_module or "erdma"
    return compat_mode_command(module) if expect.rdma.compat_mode else "echo 'not expected'"


SECTIONS: list[FactSection] = [
    FactSection("hostname", lambda node, expect: "hostname"),
    FactSection("kernel", lambda node, expect: "uname -r"),
    # `-v` only: the devices and ports a plain call shows plus the GID table, in one call
    FactSection("ibv_devinfo_v", lambda node, expect: ibv_devinfo_command(verbose=True)),
    FactSection("rdma_link", lambda node, expect: rdma_link_command()),
    FactSection("erdma_module", lambda node, expect: _module_command(expect)),
    FactSection("compat_mode", lambda node, expect: _compat_command(expect)),
    FactSection("links", lambda node, expect: ip_link_command(stats=True)),
    # every interface: each ERI's address is its own netdev's (eth1 for erdma_1)
    FactSection("addr", lambda node, expect: ip_addr_command()),
    FactSection("sysctl", lambda node, expect: sysctl_command(sorted(expect.sysctl))),
    FactSection(
        "metadata", lambda node, expect: metadata_command(base=expect.placement.metadata_url)
    ),
    FactSection("cpfs_mount", lambda node, expect: mount_check_command(expect.cpfs.mount)),
    FactSection("versions", lambda node, expect: versions_command()),
]

# -- eRDMA in depth: identity by driver/PCI id, GID tables, driver state --------
SECTIONS += [
    FactSection("erdma_identity", lambda node, expect: erdma_identity_command(None)),
    FactSection("erdma_driver", lambda node, expect: erdma_driver_command(None, None)),
    FactSection(
        "erdma_gdr",
        lambda node, expect: gdr_command() if expect.erdma.gdr else "echo 'not expected'",
    ),
]


# -- GPU node health: one block of sections, in the same round trip -------------


def _gpu_command(command: str) -> Callable[[Node, Expectations], str]:
    """`command` on a GPU profile; a CPU-only profile (`expect.gpu.count` unset) runs nothing."""
    return lambda node, expect: command if expect.gpu.count else "echo 'not expected'"


GPU_SECTIONS: list[FactSection] = [
    FactSection("gpu_query", _gpu_command(query_gpu_command())),
    FactSection("gpu_topo", _gpu_command(TOPO_COMMAND)),
    FactSection("gpu_cuda", _gpu_command(CUDA_COMMAND)),
    FactSection("gpu_driver", _gpu_command(DRIVER_VERSION_COMMAND)),
    FactSection("gpu_modules", _gpu_command(MODULES_COMMAND)),
    FactSection(
        "gpu_memlock",
        lambda node, expect: (
            memlock_command(expect.gpu.nccl_user) if expect.gpu.count else "echo 'not expected'"
        ),
    ),
    FactSection("gpu_klog", _gpu_command(KERNEL_LOG_COMMAND)),
    FactSection(
        "rdma_sysfs",
        lambda node, expect: (
            RDMA_SYSFS_COMMAND
            if expect.gpu.count and expect.gpu.rdma_sysfs
            else "echo 'not expected'"
        ),
    ),
]
SECTIONS += GPU_SECTIONS


# -- GPUs under load: the engines each node has (found once, loaded in `campaigns/gpu_load`) --
SECTIONS += [FactSection("gpu_engines", _gpu_command(ENGINES_COMMAND))]


def _nvlink_command(command: str) -> Callable[[Node, Expectations], str]:
    """`command` where the profile expects NVLink (`expect.gpu_load.nvlink_links`)."""
    return lambda node, expect: (
        command if expect.gpu.count and expect.gpu_load.nvlink_links else "echo 'not expected'"
    )


SECTIONS += [
    FactSection("gpu_nvlink_status", _nvlink_command(NVLINK_STATUS_COMMAND)),
    FactSection("gpu_nvlink_errors", _nvlink_command(NVLINK_ERRORS_COMMAND)),
]
SECTIONS += [
    FactSection(
        "gpu_fabric",
        lambda node, expect: (
            FABRIC_COMMAND
            if expect.gpu.count and expect.gpu_load.nvswitch
            else "echo 'not expected'"
        ),
    )
]


def facts_command(node: Node, expect: Expectations) -> str:
    """The one script that gathers every section on `node`."""
    return sections_script({s.name: s.build(node, expect) for s in SECTIONS})
