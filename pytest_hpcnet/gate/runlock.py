"""One run at a time per cluster and reports folder: `<reports>/.hpcnet-<cluster>.lock`.

The lock is an `flock` on that file, held for the whole run, so the kernel drops it when the
holder dies however it dies; a clean release removes the file. The file names the holder
(PID, host, start time, UTC) for the message a second run refuses with. A file still naming
a holder whose lock is gone (killed, crashed) is a stale lock: it is taken over, and that is
said. `hpcnet gate run` holds the lock around pytest and `gate apply`; its pytest child
(`HPCNET_RUN_LOCK` naming the file, the holder its parent) runs under it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
from datetime import datetime, timezone
from pathlib import Path

import pytest

ENV = "HPCNET_RUN_LOCK"


class RunLocked(Exception):
    """Another run of the same cluster holds the lock (one line, names its PID and start)."""


def lock_path(reports_dir: Path, cluster: str) -> Path:
    """The lock file of a cluster in a reports folder."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", cluster) or "cluster"
    return reports_dir / f".hpcnet-{safe}.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(text: str) -> dict:
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _describe(holder: dict) -> str:
    return (
        f"PID {holder.get('pid', '?')} on {holder.get('host', '?')}, "
        f"started {holder.get('started_at', '?')}"
    )


class RunLock:
    """The held lock of one run; `release()` (or the holder's death) frees it."""

    def __init__(self, path: Path, handle=None, note: str = "") -> None:
        self.path = path
        self._handle = handle
        self.note = note  # said when a stale lock was taken over

    def release(self) -> None:
        """Remove the file (a clean release leaves nothing stale), then drop the lock."""
        if self._handle is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()
        self._handle = None

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        """As a pytest plugin: released after every other report is written."""
        self.release()


def _same_file(handle, path: Path) -> bool:
    try:
        return os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def take_run_lock(reports_dir: Path, cluster: str, now: datetime | None = None) -> RunLock:
    """Hold the cluster's run lock, or raise `RunLocked` naming the run that holds it."""
    reports_dir.mkdir(parents=True, exist_ok=True)
    path = lock_path(reports_dir, cluster)
    for _ in range(5):  # a holder may remove the file between our open and our flock
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the whole run
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = _holder(handle.read())
            handle.close()
            if os.environ.get(ENV) == str(path) and holder.get("pid") == os.getppid():
                return RunLock(path)  # our parent, `hpcnet gate run`, holds it for us
            raise RunLocked(
                f"another hpcnet run of cluster {cluster} is in progress ({_describe(holder)}; "
                f"lock {path}); not starting a second one"
            ) from None
        if _same_file(handle, path):
            break
        handle.close()
    else:
        raise RunLocked(f"cannot hold the run lock {path}: it keeps being replaced")
    handle.seek(0)
    stale = _holder(handle.read())
    note = ""
    if stale.get("pid"):
        gone = "gone" if not _alive(int(stale["pid"])) else "no longer holding it"
        note = f"took over a stale run lock of cluster {cluster} ({_describe(stale)}; {gone})"
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    mine = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started_at": f"{moment:%Y-%m-%d %H:%M:%S} UTC",
    }
    handle.seek(0)
    handle.truncate(0)
    handle.write(json.dumps(mine) + "\n")
    handle.flush()
    os.fsync(handle.fileno())
    return RunLock(path, handle, note)
