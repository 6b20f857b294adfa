"""hpcnet lab emulation of `lscpu`: the CPUs of an emulated 8-GPU node (not real).

Prints util-linux's single-column layout as recorded on a 2 x Xeon Platinum 8468 node with 8
GPUs (tests/fixtures/host/real-lscpu-xeon-8468-2s-96c.txt): 96 CPUs, one thread per core,
two NUMA nodes. Every lab node shows the same CPUs (lab nodes share the host's).
"""

from __future__ import annotations

import sys

EVEN = ",".join(str(c) for c in range(0, 96, 2))
ODD = ",".join(str(c) for c in range(1, 96, 2))
FIELDS = (
    ("Architecture", "x86_64"),
    ("CPU op-mode(s)", "32-bit, 64-bit"),
    ("Byte Order", "Little Endian"),
    ("CPU(s)", "96"),
    ("On-line CPU(s) list", "0-95"),
    ("Thread(s) per core", "1"),
    ("Core(s) per socket", "48"),
    ("Socket(s)", "2"),
    ("NUMA node(s)", "2"),
    ("Vendor ID", "GenuineIntel"),
    ("CPU family", "6"),
    ("Model", "143"),
    ("Model name", "Intel(R) Xeon(R) Platinum 8468"),
    ("Stepping", "8"),
    ("CPU MHz", "3645.945"),
    ("CPU max MHz", "3800.0000"),
    ("CPU min MHz", "800.0000"),
    ("BogoMIPS", "4200.00"),
    ("L1d cache", "48K"),
    ("L1i cache", "32K"),
    ("L2 cache", "2048K"),
    ("L3 cache", "107520K"),
    ("NUMA node0 CPU(s)", EVEN),
    ("NUMA node1 CPU(s)", ODD),
)


def main(argv: list[str]) -> int:
    if argv:
        sys.stderr.write(f"lscpu: the lab emulation takes no options ({' '.join(argv)})\n")
        return 1
    sys.stdout.write("".join(f"{k + ':':<21}{v}\n" for k, v in FIELDS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
