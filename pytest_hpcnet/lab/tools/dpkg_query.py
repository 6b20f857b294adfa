"""hpcnet lab emulation of `dpkg-query -W -f=FORMAT PACKAGE...`: not the real tool.

The host's own `dpkg-query` answers (the lab's nodes share its packages), then fault
`software NODE nccl|rdma-core VERSION` gives that node the other version of `libnccl2` or
`rdma-core`, printed in the versions probe's `${Package}=${Version}` format (added where the
host has no such package). Any other use is the real tool's, unchanged.
"""

from __future__ import annotations

import os
import subprocess
import sys

import hpcnet_lab_node as node

COMMANDS = ("dpkg-query",)
"""The commands this file is installed as (`lab.emulation.lab_tools`)."""

REAL = ("/usr/bin/dpkg-query", "/bin/dpkg-query")
PACKAGES = {"nccl": "libnccl2", "rdma-core": "rdma-core"}
"""The software fault's items this tool changes, as Debian packages."""


def main(argv: list[str]) -> int:
    """Run the real dpkg-query, then apply the node's software fault; the exit status."""
    real = next((p for p in REAL if os.access(p, os.X_OK)), None)
    out, status = "", 1
    if real is not None:
        done = subprocess.run([real, *argv], capture_output=True, text=True, check=False)
        out, status = done.stdout, done.returncode
        sys.stderr.write(done.stderr)
    item, _, version = node.faults().get("software", "").partition(" ")
    package = PACKAGES.get(item)
    if package is None or "-W" not in argv or package not in argv:
        sys.stdout.write(out)
        return status
    lines = [ln for ln in out.splitlines() if not ln.startswith(f"{package}=")]
    sys.stdout.write("".join(f"{ln}\n" for ln in [*lines, f"{package}={version}"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
