"""Each ERI's own interface and IPv4 address.

On Alibaba Cloud an ERI is an ENI with eRDMA enabled (source S6): an
instance with two ERIs has two ENIs, `eth0` and `eth1`, each with its own primary private
address, and `erdma_1`'s netdev is `eth1`. So the GID an ERI must carry, the `-x` index
perftest and NCCL get on it and the address a perftest client connects to for it all come
from that ERI's own netdev.

The netdev comes from sysfs (`/sys/class/infiniband/<dev>/device/net/`), else from
`rdma link` (`netdev eth1`: the erdma driver binds its netdev by MAC, so sysfs may list
none). Only where neither names one is the node's data-plane interface used, and the
result says so. Pure: nothing here runs a command or raises.

`plan_eris` lists the ERIs a node's checks must cover: those its listing shows and, up to
the count the expectations give, those it does not, each with its netdev or why that is
unknown (the checks then name it not measured, never leave it out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from pytest_hpcnet.probes.erdma import EriIdentities
from pytest_hpcnet.probes.links import Interfaces
from pytest_hpcnet.probes.rdma import RdmaDevices

SYSFS = "sysfs device/net"
RDMA_LINK = "rdma link"
FALLBACK = "data-plane interface"


@dataclass(frozen=True)
class EriAddress:
    """One ERI's netdev and that netdev's first IPv4 address, with where they came from."""

    device: str
    netdev: str | None
    address: str | None
    source: str
    """`sysfs device/net`, `rdma link`, or `data-plane interface` (the netdev is unknown)."""
    unread: str = ""
    """Why the address is unknown when the `ip addr` listing was not read whole (missing,
    cut short, timed out, unreadable): not measured. Empty when it was read whole: a None
    address is then a netdev without an IPv4 address."""

    @property
    def fallback(self) -> bool:
        """The ERI's own netdev is unknown: the node's data-plane interface stood in."""
        return self.source == FALLBACK

    @property
    def note(self) -> str:
        """One line: which interface and address the ERI uses, and why."""
        held = self.address or (
            f"address unknown ({self.unread})" if self.unread else "no IPv4 address"
        )
        if self.fallback:
            return (
                f"{self.device}: netdev unknown (neither sysfs nor rdma link names one): "
                f"the data-plane interface {self.netdev} ({held}) stands in"
            )
        return f"{self.device}: netdev {self.netdev} ({self.source}), {held}"


def eri_netdevs(
    identities: EriIdentities | None, links: RdmaDevices | None
) -> dict[str, tuple[str, str]]:
    """Device -> (netdev, source): sysfs `device/net` first, else `rdma link` port 1."""
    out: dict[str, tuple[str, str]] = {}
    for dev in identities.devices if identities is not None else ():
        if dev.netdevs:
            out[dev.name] = (dev.netdevs[0], SYSFS)
    for dev in links.devices if links is not None else ():
        port = dev.port(1)
        if dev.name not in out and port is not None and port.netdev:
            out[dev.name] = (port.netdev, RDMA_LINK)
    return out


def eri_address(
    device: str,
    netdevs: dict[str, tuple[str, str]],
    interfaces: Interfaces | None,
    data_interface: str,
    unread: str = "ip addr listing not read whole",
) -> EriAddress:
    """`device`'s netdev and its first IPv4 address (`ip -j addr`); the data-plane
    interface's address only when the device's netdev is unknown. Where there is no whole
    listing (`interfaces` None: `unread` says why; `ip` missing; nothing parsed) the
    address is unknown and the result says why, which is not "no IPv4 address"."""
    netdev, source = netdevs.get(device, (data_interface, FALLBACK))
    why = unreadable(interfaces, unread)
    iface = interfaces.get(netdev) if interfaces is not None and not why else None
    addresses = iface.ipv4() if iface is not None else ()
    return EriAddress(device, netdev, addresses[0] if addresses else None, source, why)


def unreadable(interfaces: Interfaces | None, unread: str) -> str:
    """Why `interfaces` is no whole `ip addr` listing, or "" when it is one."""
    if interfaces is None:
        return unread
    if interfaces.tool_missing:
        return "ip (iproute2) not installed"
    if not interfaces.interfaces:
        return f"ip addr unreadable: {(interfaces.problems or ('no interface',))[0]}"
    return ""


@dataclass(frozen=True)
class PlannedEri:
    """One ERI a node's checks must cover (its listing shows it, or the expectations count
    it), with its own netdev, or why that is unknown."""

    index: int
    """Its place among the node's ERIs (name order): a pair's ERIs meet by index."""
    device: str
    netdev: str | None = None
    source: str = ""
    """Where the netdev came from: `sysfs device/net` or `rdma link`."""
    unknown: str = ""
    """Why its netdev is unknown (`netdev unknown (...)`, `not listed (...)`): whatever
    needed it is not measured for this ERI. Empty when the netdev is known."""


def plan_eris(
    listed: Sequence[str] | None,
    listing_unread: str,
    expected: int,
    expected_source: str,
    netdevs: dict[str, tuple[str, str]],
    netdev_unread: str,
    glob: str | None = None,
) -> tuple[PlannedEri, ...]:
    """The node's ERIs to cover: `listed` (None: the ERI listing was not read whole,
    `listing_unread` says why; then the devices `netdevs` names matching `glob` stand in),
    then as many more as `expected` asks (named `<stem>_<n>` from the glob, `not listed`),
    each with its netdev from `netdevs` or why that is unknown (`netdev_unread`)."""
    names = list(listed) if listed is not None else sorted(n for n in netdevs if _in(n, glob))
    known = len(names)
    stem = _stem(glob)
    n = 0
    while len(names) < expected:
        if f"{stem}_{n}" not in names:
            names.append(f"{stem}_{n}")
        n += 1
    out = []
    for i, device in enumerate(names):
        if device in netdevs:
            netdev, source = netdevs[device]
            out.append(PlannedEri(i, device, netdev, source))
        elif i < known:
            out.append(PlannedEri(i, device, unknown=f"netdev unknown ({netdev_unread})"))
        elif listed is None:
            why = f"netdev unknown (the ERI listing: {listing_unread})"
            out.append(PlannedEri(i, device, unknown=why))
        else:
            shown = f"{known} ERI{'' if known == 1 else 's'} listed"
            why = f"not listed ({shown}, {expected} expected by {expected_source})"
            out.append(PlannedEri(i, device, unknown=why))
    return tuple(out)


def _in(name: str, glob: str | None) -> bool:
    return fnmatchcase(name, glob) if glob else True


def _stem(glob: str | None) -> str:
    """`erdma*` -> `erdma`: the stem an ERI the listing does not show is named by."""
    head = (glob or "")[:-1] if (glob or "").endswith("*") else ""
    if not head or any(c in head for c in "*?[]"):
        return "eri"
    return head.rstrip("_")
