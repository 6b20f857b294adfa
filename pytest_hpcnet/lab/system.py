"""Running host commands for the lab, with one-line errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys


class LabError(Exception):
    """A lab operation that could not be done; the message is one line."""


def require_root_linux() -> None:
    """The lab needs Linux and root; say so in one line otherwise."""
    if not sys.platform.startswith("linux"):
        raise LabError("the lab needs Linux (network namespaces); this is " + sys.platform)
    if os.geteuid() != 0:
        raise LabError("the lab needs root (it creates network namespaces): run it with sudo")
    for tool in ("ip", "ssh-keygen"):
        if shutil.which(tool) is None:
            raise LabError(f"the lab needs '{tool}' (apt-get install iproute2 openssh-client)")


def sh(*argv: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    """Run argv; on failure with `check`, raise LabError naming the command and its error."""
    proc = subprocess.run(argv, capture_output=True, text=True, input=input, check=False)
    if check and proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        raise LabError(f"`{' '.join(argv)}` failed: {err[-1] if err else proc.returncode}")
    return proc


def in_ns(namespace: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run argv inside a lab node's network namespace."""
    return sh("ip", "netns", "exec", namespace, *argv, check=check)
