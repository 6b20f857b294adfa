"""hpcnet lab emulation of `ethtool -i IFACE`: not the real tool.

Prints what `ethtool -i` prints for an ECS ENI (the recorded virtio_net format: driver
virtio_net 1.0.0, an empty firmware-version, no expansion-rom line); fault `nic-firmware`
(a value) gives every netdev of the node that firmware-version instead. Anything else is
refused: the lab's nodes have no other use for ethtool.
"""

from __future__ import annotations

import sys

import hpcnet_lab_node as node

INFO = """driver: virtio_net
version: 1.0.0
firmware-version:{firmware}
bus-info: 0000:00:{slot:02x}.0
supports-statistics: no
supports-test: no
supports-eeprom-access: no
supports-register-dump: no
supports-priv-flags: no
"""


def main(argv: list[str]) -> int:
    """Run like `ethtool -i IFACE`; returns the exit status."""
    if len(argv) != 2 or argv[0] != "-i":
        sys.stderr.write("hpcnet lab ethtool: only `ethtool -i IFACE` is emulated\n")
        return 1
    firmware = node.faults().get("nic-firmware", "")
    digits = "".join(c for c in argv[1] if c.isdigit())
    slot = 5 + int(digits) if digits else 5
    sys.stdout.write(INFO.format(firmware=f" {firmware}" if firmware else "", slot=slot))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
