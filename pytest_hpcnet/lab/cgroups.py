"""The `fio-slow` fault: a real CPU cap on a node's sshd and everything it starts.

The node's sshd and its live sessions move into their own cpu cgroup (`hpcnet-lab/<node>`:
cgroup v1 `cpu` controller with a CFS quota, or cgroup v2 `cpu.max` where the root
delegates `cpu`); every command they start, and so fio, inherits it. fio on the lab's
tmpfs is memory copies, so a CPU cap is a throughput cap for real. Healing moves the
processes back and removes the group.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from pytest_hpcnet.lab.system import LabError

V1_CPU = Path("/sys/fs/cgroup/cpu")
V2_ROOT = Path("/sys/fs/cgroup")
GROUP = "hpcnet-lab"
PERIOD_US = 100_000
DEFAULT_PERCENT = 3


def _base() -> tuple[Path, bool]:
    """(hierarchy root, is v2)."""
    if (V1_CPU / "cpu.cfs_quota_us").exists():
        return V1_CPU, False
    control = V2_ROOT / "cgroup.subtree_control"
    if control.exists() and "cpu" in control.read_text().split():
        return V2_ROOT, True
    raise LabError("no cpu cgroup controller on this host (cgroup v1 cpu or v2 cpu.max)")


def group_path(node: str) -> Path:
    """The node's lab cgroup."""
    return _base()[0] / GROUP / node


def _current(pid: int, v2: bool) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (v2 and controllers == "") or (not v2 and "cpu" in controllers.split(",")):
            return path
    return "/"


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (from /proc), parents first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rpartition(")")[2].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out, queue = [], [pid]
    while queue and len(out) < 100_000:
        current = queue.pop(0)
        out.append(current)
        queue.extend(children.get(current, []))
    return out


def limit(node: str, pid: int, percent: int) -> str:
    """Cap `pid` (the node's sshd), its sessions and its future children to `percent` of a CPU.

    Returns the cgroup path (relative to the hierarchy) the process came from.
    """
    base, v2 = _base()
    was = _current(pid, v2)
    group = base / GROUP / node
    if v2:
        group.parent.mkdir(exist_ok=True)
        (group.parent / "cgroup.subtree_control").write_text("+cpu")
    group.mkdir(parents=True, exist_ok=True)
    quota = max(1000, PERIOD_US * percent // 100)
    if v2:
        (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
    else:
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(quota))
    for member in descendants(pid):
        with contextlib.suppress(OSError):  # a process may exit meanwhile
            (group / "cgroup.procs").write_text(str(member))
    return was


def unlimit(node: str, was: str) -> None:
    """Move every process of the node's group back to `was`; remove the group."""
    with contextlib.suppress(LabError):
        base, _ = _base()
        group = base / GROUP / node
        if not group.exists():
            return
        target = base / was.lstrip("/") if was and was != "/" else base
        if not target.exists():
            target = base
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (target / "cgroup.procs").write_text(pid)
        remove(group)


def remove(group: Path) -> None:
    """rmdir a group once its (killed) processes are gone; bounded."""
    deadline = time.monotonic() + 3.0
    while group.exists() and time.monotonic() < deadline:
        try:
            group.rmdir()
        except OSError:
            time.sleep(0.05)


def remove_all() -> None:
    """Remove every lab group (for `down`, after the lab's processes were killed)."""
    with contextlib.suppress(LabError):
        parent = _base()[0] / GROUP
        if parent.exists():
            for group in parent.iterdir():
                if group.is_dir():
                    remove(group)
            remove(parent)
