"""hpcnet lab emulation of `chronyc tracking` (`-n` accepted): the node's clock offset.

Prints chrony's tracking report in its real layout (samples/timesync): synced to the lab
bridge at stratum 3, 0.000012345 seconds fast; with fault `clock-skew SECONDS` the system
time is that many seconds fast (a negative value: slow). Any other command is refused as
`chronyc` refuses an unknown one. Not real: lab nodes share the host's clock.
"""

from __future__ import annotations

import sys

import hpcnet_lab_node as node

OFFSET_S = 0.000012345
REPORT = """Reference ID    : A9FE1201 (169.254.18.1)
Stratum         : 3
Ref time (UTC)  : Thu Dec 03 16:00:00 2026
System time     : {offset:.9f} seconds {way} of NTP time
Last offset     : -0.000004211 seconds
RMS offset      : 0.000020118 seconds
Frequency       : 6.725 ppm fast
Residual freq   : -0.012 ppm
Skew            : 0.307 ppm
Root delay      : 0.000404325 seconds
Root dispersion : 0.000522824 seconds
Update interval : 64.2 seconds
Leap status     : Normal
"""


def main(argv: list[str]) -> int:
    words = [a for a in argv if not a.startswith("-")]
    if words != ["tracking"]:
        sys.stdout.write(f"Unrecognized command: {' '.join(words)}\n")
        return 1
    offset = float(node.faults().get("clock-skew", OFFSET_S))
    way = "fast" if offset >= 0 else "slow"
    sys.stdout.write(REPORT.format(offset=abs(offset), way=way))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
