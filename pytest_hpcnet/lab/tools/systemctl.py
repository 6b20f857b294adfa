"""hpcnet lab emulation of `systemctl is-active nvidia-fabricmanager`: not systemd.

Lab nodes are HGX-like boards whose Fabric Manager is emulated: `is-active
nvidia-fabricmanager` prints `active` (exit 0), or with fault `fabricmanager-down` the
fault's word (`inactive`, `failed`; exit 3, as systemctl exits for a unit not active). A
lab node is a network namespace of the host, not a machine: any other call is refused as
systemctl refuses where systemd is not PID 1, never handed to the host's systemd.
"""

from __future__ import annotations

import sys

import hpcnet_lab_node as node

UNIT = "nvidia-fabricmanager"


def main(argv: list[str]) -> int:
    units = [a.removesuffix(".service") for a in argv[1:] if not a.startswith("-")]
    if argv[:1] == ["is-active"] and units == [UNIT]:
        word = node.faults().get("fabricmanager-down")
        sys.stdout.write(f"{word or 'active'}\n")
        return 3 if word else 0
    sys.stdout.write("System has not been booted with systemd as init system (PID 1).\n")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
