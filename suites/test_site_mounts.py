"""A site's own check: the filesystems every node must have mounted, with their types.

List them as `HPCNET_SITE_MOUNTS="/mnt/cpfs=nfs /data=xfs /scratch"` (a path alone: mounted,
any type). The default checks what every Linux node has, `/` and `/proc=proc`, so the
example passes as it stands; replace it with your own mounts.
"""

from __future__ import annotations

import os

import pytest

DEFAULT = "/ /proc=proc"


def wanted_mounts(text: str) -> dict[str, str]:
    """`/data=xfs /scratch` -> {"/data": "xfs", "/scratch": ""} ("" means any type)."""
    pairs = (item.partition("=") for item in text.split())
    return {path.rstrip("/") or "/": fstype for path, _, fstype in pairs}


def mounted(proc_mounts: str) -> dict[str, str]:
    """Mount point -> filesystem type, from /proc/mounts (the last mount on a path wins)."""
    found: dict[str, str] = {}
    for line in proc_mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            found[fields[1].replace("\\040", " ")] = fields[2]
    return found


MOUNTS = wanted_mounts(os.environ.get("HPCNET_SITE_MOUNTS", DEFAULT))


@pytest.mark.static
@pytest.mark.check("site_mounts", "Site filesystems mounted")
def test_site_filesystems_are_mounted(cluster, node, check):
    result = cluster.run(node, "cat /proc/mounts", recorder=check)
    assert result.ok, f"{node.name}: cannot read /proc/mounts: {result.failure}"
    have = mounted(result.stdout)
    problems = []
    for path, fstype in MOUNTS.items():
        check.measure(f"mount {path}", have.get(path), "", fstype or "mounted", "==", "site")
        if path not in have:
            problems.append(f"{path} is not mounted")
        elif fstype and have[path] != fstype:
            problems.append(f"{path} is {have[path]}, expected {fstype}")
    assert not problems, f"{node.name}: " + "; ".join(problems)
