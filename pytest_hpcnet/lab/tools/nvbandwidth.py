"""hpcnet lab emulation of NVIDIA `nvbandwidth -t TEST`: not the real tool, and no GPU.

Prints nvbandwidth v0.10.0's text format as published (tests/fixtures/gpu_load/
nvbandwidth-v0.10.0-h100-x8-d2d-read-ce-...): the version header, `Running TEST.`, the
`memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)` matrix (`<-` for the write test) with
`N/A` on the diagonal, `SUM`, `COEFFICIENT_OF_VARIATION` and the closing NOTE, for the node's
emulated GPUs (hpcnet_lab_gpu.py). Every NVLink pair (the emulated `topo -m` shows NV18)
reads at about 395 GB/s, as the recorded 8 x H100 did. Fault `p2p-slow` (PAIR `a-b`,
default 2-5): that pair, both ways, at 0.45x. Only the two device-to-device CE tests exist.
"""

from __future__ import annotations

import sys

import hpcnet_lab_gpu as gpu

VERSION = "v0.10.0"
CUDA = "13.0 (13000)"
TESTS = {
    "device_to_device_memcpy_read_ce": "->",
    "device_to_device_memcpy_write_ce": "<-",
}
NVLINK_GBS = 395.08
SLOW_FACTOR = 0.45
NOTE = (
    "NOTE: The reported results may not reflect the full capabilities of the platform.\n"
    "Performance can vary with software drivers, hardware clocks, and system topology.\n"
)


def _slow_pair(faults: dict[str, str]) -> set[int]:
    value = faults.get("p2p-slow")
    if value is None:
        return set()
    a, _, b = value.partition("-")
    return {int(a), int(b)} if a.isdigit() and b.isdigit() else {2, 5}


def matrix(test: str) -> str:
    rows = gpu.gpus()
    slots = [gpu.BUS_IDS.index(r["pci.bus_id"][9:11]) for r in rows]
    slow = _slow_pair(gpu.node.faults())
    n = len(rows)
    out = [f"Running {test}.", f"memcpy CE GPU(row) {TESTS[test]} GPU(column) bandwidth (GB/s)"]
    out.append("   " + "".join(f"{i:>10}" for i in range(n)))
    total = 0.0
    for i in range(n):
        cells = []
        for j in range(n):
            if i == j:
                cells.append(f"{'N/A':>10}")
                continue
            value = NVLINK_GBS + ((slots[i] * 7 + slots[j] * 3) % 5) * 0.04
            if {slots[i], slots[j]} == slow:
                value *= SLOW_FACTOR
            total += round(value, 2)
            cells.append(f"{value:>10.2f}")
        out.append(f"{i:>2} " + "".join(cells))
    out += ["", f"SUM {test} {total:.2f}", f"COEFFICIENT_OF_VARIATION {test} 0.00", ""]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    version = f"nvbandwidth Version: {VERSION}\nBuilt from Git version: {VERSION}\n\n"
    if argv[:1] in (["-h"], ["--help"]):  # the real tool prints its version, then the options
        sys.stdout.write(version + "nvbandwidth CLI:\n  -h [ --help ]  Produce help message\n")
        return 0
    test = argv[argv.index("-t") + 1] if "-t" in argv[:-1] else None
    if test not in TESTS:
        sys.stdout.write(f"ERROR: Testcase {test} not found!\n")
        return 1
    head = version + (
        f"CUDA Runtime Version: {CUDA}\nCUDA Driver Version (API): {CUDA}\n"
        f"Driver Version: {gpu.DRIVER}\n\n"
    )
    if not gpu.gpus():
        sys.stdout.write(head + "No CUDA devices found\n")
        return 1
    sys.stdout.write(head + matrix(test) + "\n" + NOTE)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
