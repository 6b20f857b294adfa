"""The controller's open-files limit against what one connection per node holds.

Each node's session keeps its socket and its shell channel's pipe pair open for the whole
run, and a command's channel adds a pair while it runs; a jump host doubles that. A soft
limit of 1,024 (the usual default) runs out near 250 nodes, so the run raises it to what
the inventory needs, up to the hard limit, and says in one line when the hard limit is short.
"""

from __future__ import annotations

import resource

from pytest_hpcnet.inventory.models import Inventory

FILES_PER_NODE = 5
FILES_PER_JUMP = 5
FILES_SPARE = 256
"""The interpreter's own files, logs, reports, the local commands' pipes."""


def open_files_needed(inventory: Inventory) -> int:
    """The descriptors a run of `inventory` may hold at once."""
    per_node = [
        FILES_PER_NODE + (FILES_PER_JUMP if (n.ssh.jump_host or inventory.ssh.jump_host) else 0)
        for n in inventory.nodes
    ]
    return sum(per_node) + FILES_SPARE


def raise_open_files_limit(needed: int) -> str | None:
    """Raise the soft limit to `needed` where it is lower; why not, where the hard limit is."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    if hard != resource.RLIM_INFINITY and hard < needed:
        return (
            f"the open-files limit is {hard} (hard; `ulimit -Hn`) and this inventory needs "
            f"about {needed} (a connection per node): raise it (`ulimit -n {needed}` as root, "
            "`LimitNOFILE=` in a systemd unit, or nofile in /etc/security/limits.conf)"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return None
