"""Judge: the CPFS mount point is a mount of a CPFS client, as real clients show it."""

from __future__ import annotations

import re

from pytest_hpcnet.inventory.expectations import CpfsExpect
from pytest_hpcnet.probes.fio import CPFS_MOUNT, MountInfo, fstype_allowed, normalize_fstype
from pytest_hpcnet.requirements.verdict import Measurement, Verdict

PROXY = re.compile(r"127\.0\.\d{1,3}\.\d{1,3}")
"""The local proxy `mount.cpfs-nfs` puts between NFS and CPFS (default 127.0.1.255)."""
CLIENT_FSTYPES = {"cpfs-nfs": "nfs", "efc": "aliyun-alinas-efc", "lustre": "lustre"}
"""The fstype (normalized) each client shows in /proc/mounts (docs/sources.md)."""


def proxy_address(mount: MountInfo) -> str | None:
    """The 127.0.x.y proxy an NFS mount goes through (`addr=` option or source host)."""
    for option in mount.options:
        key, _, value = option.partition("=")
        if key == "addr" and PROXY.fullmatch(value):
            return value
    host = (mount.source or "").split(":", 1)[0]
    return host if PROXY.fullmatch(host) else None


def judge_cpfs_mount(node: str, mount: MountInfo, cpfs: CpfsExpect) -> Verdict:
    """Pass when `cpfs.mount` is itself a mount point of an allowed fstype (and of the
    client `cpfs.client` names); fails closed with one line naming the node and the cause.
    Carries the fstype seen as its measurement and reads the `cpfs_mount` section."""
    fstype = Measurement(
        "fstype", mount.fstype, "", list(cpfs.fstypes), "in", "expect.cpfs.fstypes"
    )
    return _judge_mount(node, mount, cpfs).with_measurements(fstype).with_sections(CPFS_MOUNT.name)


def _judge_mount(node: str, mount: MountInfo, cpfs: CpfsExpect) -> Verdict:
    where = mount.error or f"inside {mount.target}"
    if mount.error is not None or mount.target != cpfs.mount:
        return Verdict(False, reason=f"{node}: {cpfs.mount} is not a mount point ({where})")
    shown = f"{mount.fstype} ({mount.source})"
    if not fstype_allowed(mount.fstype, tuple(cpfs.fstypes)):
        return Verdict(False, reason=f"{node}: {cpfs.mount} is {shown}, allowed: {cpfs.fstypes}")
    if cpfs.client is None:
        return Verdict(True)
    wanted = CLIENT_FSTYPES[cpfs.client]
    if normalize_fstype(mount.fstype or "") != wanted:
        return Verdict(
            False, reason=f"{node}: {cpfs.mount} is {shown}, a {cpfs.client} mount shows {wanted}"
        )
    if cpfs.client == "cpfs-nfs" and proxy_address(mount) is None:
        return Verdict(
            False,
            reason=(
                f"{node}: {cpfs.mount} is {shown} without the cpfs-nfs proxy on 127.0.x.y "
                "(addr=): a plain NFS mount, not mount -t cpfs-nfs"
            ),
        )
    return Verdict(True)
