"""Judges of the `erdma` requirement: the expected RDMA devices, their ports active, the two
tools agreeing, the kernel module loaded, the driver's compat mode."""

from __future__ import annotations

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.rdma import (
    COMPAT_MODE,
    ERDMA_MODULE,
    CompatMode,
    ErdmaModule,
    RdmaDevices,
    compare_sources,
    match_devices,
)
from pytest_hpcnet.probes.rdma_parsers import IBV_DEVINFO, RDMA_LINK
from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)


def unreadable_devinfo(node: str, found: RdmaDevices) -> Verdict | None:
    """Not measured when `ibv_devinfo` is missing or its output is cut; else None."""
    if found.tool_missing:
        return not_measured(
            f"{node}: ibv_devinfo is not installed", fix="install rdma-core (ibverbs-utils)"
        )
    if found.incomplete:
        return not_measured(f"{node}: ibv_devinfo output: {found.incomplete}")
    return None


def expected_devices(expect: Expectations, node: Node) -> tuple[str, int, str]:
    """(glob, minimum count, where it came from) for this node."""
    rdma = expect.rdma
    glob = node.rdma.device_glob or rdma.device_glob
    minimum = node.rdma.min_devices if node.rdma.min_devices is not None else rdma.min_devices
    source = "inventory nodes[].rdma" if node.rdma.min_devices is not None else "expect.rdma"
    return glob, minimum, source


def judge_node_devices(node: Node, found: RdmaDevices, expect: Expectations) -> Verdict:
    """`judge_devices_present` with the node's own glob and minimum (else the profile's)."""
    glob, minimum, source = expected_devices(expect, node)
    return judge_devices_present(node.name, found, glob, minimum, source)


def judge_node_ports(node: Node, found: RdmaDevices, expect: Expectations) -> Verdict:
    """`judge_ports_active` on the devices matching the node's glob (else the profile's)."""
    glob, _, _ = expected_devices(expect, node)
    return judge_ports_active(node.name, found, glob)


def judge_devices_present(
    node: str, found: RdmaDevices, glob: str, minimum: int, source: str
) -> Verdict:
    """At least `minimum` devices match `glob` (`ibv_devinfo -v`)."""
    unreadable = unreadable_devinfo(node, found)
    if unreadable is not None:
        return unreadable.with_sections(IBV_DEVINFO.name)
    matching = match_devices(found, glob)
    measured = Measurement("devices", len(matching), "devices", minimum, ">=", source)
    seen = ", ".join(found.names()) or ("none: No IB devices found" if found.no_devices else "none")
    if len(matching) >= minimum:
        return passing(measurements=(measured,), sections=(IBV_DEVINFO.name,))
    count = f"{len(matching)} RDMA device{'' if len(matching) == 1 else 's'}"
    return failing(
        f"{node}: {count} match {glob!r}, expected at least {minimum} (ibv_devinfo shows {seen})",
        measurements=(measured,),
        sections=(IBV_DEVINFO.name,),
    )


def judge_ports_active(node: str, found: RdmaDevices, glob: str) -> Verdict:
    """Every port of every matching device is ACTIVE and reports its MTU and link layer."""
    unreadable = unreadable_devinfo(node, found)
    if unreadable is not None:
        return unreadable.with_sections(IBV_DEVINFO.name)
    matching = match_devices(found, glob)
    if not matching:
        return failing(
            f"{node}: no RDMA device matches {glob!r}, so no port can be active",
            code="HPCNET-ERI-DEVICES",
        )
    inactive = [
        f"{dev.name} port {port.number} is {port.reported_state or 'in an unknown state'}"
        for dev in matching
        for port in dev.ports
        if port.state != "ACTIVE"
    ]
    measured = (
        Measurement(
            "inactive_ports", len(inactive), "ports", 0, "==", "eRDMA ports must be active"
        ),
    )
    if inactive:
        return failing(
            f"{node}: {'; '.join(inactive)}", measurements=measured, code="HPCNET-ERI-PORT-DOWN"
        )
    unreported = [
        f"{dev.name} port {port.number}"
        for dev in matching
        for port in dev.ports
        if port.active_mtu is None or port.link_layer is None
    ]
    if unreported:
        return not_measured(
            f"{node}: no active MTU or link layer reported for {', '.join(unreported)}",
            measurements=measured,
        )
    return passing(measurements=measured, sections=(IBV_DEVINFO.name,))


def judge_tools_agree(node: str, verbs: RdmaDevices, links: RdmaDevices) -> Verdict:
    """`ibv_devinfo -v` and `rdma link` show the same devices, ports and states."""
    if verbs.tool_missing or links.tool_missing:
        return not_measured(
            f"{node}: ibv_devinfo or rdma (iproute2) not installed",
            fix="install rdma-core and iproute2",
        )
    disagreements = compare_sources(verbs, links)
    sections = (IBV_DEVINFO.name, RDMA_LINK.name)
    counted = (
        Measurement("disagreements", len(disagreements), "", 0, "==", "ibv_devinfo vs rdma link"),
        Measurement("devices", len(verbs.devices), "devices", None, None, "ibv_devinfo -v"),
    )
    if disagreements:
        return failing(
            f"{node}: {'; '.join(disagreements)}",
            sections=sections,
            measurements=counted,
            code="HPCNET-ERI-TOOLS-DISAGREE",
        )
    return passing(sections=sections, measurements=counted)


def judge_kernel_module(node: str, state: ErdmaModule, module: str) -> Verdict:
    """The expected kernel module is loaded."""
    measured = (
        Measurement(
            "module_loaded", str(state.loaded), "", "True", "==", "expect.rdma.kernel_module"
        ),
    )
    if state.loaded is None:
        return not_measured(
            f"{node}: whether {module} is loaded was not said", measurements=measured
        )
    if state.loaded:
        return passing(measurements=measured, sections=(ERDMA_MODULE.name,))
    return failing(
        f"{node}: kernel module {module} is not loaded",
        fix=f"modprobe {module}",
        measurements=measured,
        sections=(ERDMA_MODULE.name,),
        code="HPCNET-ERI-MODULE",
    )


def judge_compat_mode(node: str, mode: CompatMode, wanted: str) -> Verdict:
    """The driver's `compat_mode` is the expected one; unreadable is not measured."""
    measured = (Measurement("compat_mode", mode.raw, "", wanted, "==", "expect.rdma.compat_mode"),)
    if mode.raw is None:
        return not_measured(f"{node}: compat_mode not readable", measurements=measured)
    if mode.raw == wanted:
        return passing(measurements=measured, sections=(COMPAT_MODE.name,))
    return failing(
        f"{node}: compat_mode is {mode.raw!r}, expected {wanted!r}",
        measurements=measured,
        sections=(COMPAT_MODE.name,),
        code="HPCNET-ERI-COMPAT-MODE",
    )


def no_eri(node: str) -> Verdict:
    """A node where neither sysfs nor `ibv_devinfo -v` shows an eRDMA device."""
    return failing(f"{node}: no eRDMA device found (sysfs driver/PCI id or ibv_devinfo)")
