"""The lab's CPFS stand-in: a size-limited tmpfs at /mnt/cpfs in each node's mount namespace.

Mounted by the node's sshd start command (like the tools' bind mount), so it exists only
for that node's SSH sessions and goes away with the namespace. Real `fio` runs against it;
tmpfs has no O_DIRECT and no libaio, so the lab inventory runs fio buffered with psync.
When the host has no /mnt/cpfs, a 1 MiB tmpfs is put over the node's own /mnt first, so
nothing is ever created on the host filesystem.
"""

from __future__ import annotations

import shlex
from pathlib import Path

MOUNT = "/mnt/cpfs"
FSTYPE = "tmpfs"
SOURCE = "hpcnet-lab-cpfs"
SIZE = "512m"
"""Per-node cap (tmpfs takes memory only for what fio writes)."""


def mount_command(state_root: Path) -> str:
    """Shell fragment mounting the node's /mnt/cpfs (run inside its mount namespace)."""
    cpfs = f"mount -t {FSTYPE} -o size={SIZE},mode=0755 {SOURCE} {MOUNT}"
    if Path(MOUNT).is_dir() or Path(state_root).resolve().is_relative_to("/mnt"):
        return f"mkdir -p {MOUNT} && {cpfs}"
    return (
        f"mount -t tmpfs -o size=1m,mode=0755 hpcnet-lab-mnt /mnt && mkdir {shlex.quote(MOUNT)}"
        f" && {cpfs}"
    )
