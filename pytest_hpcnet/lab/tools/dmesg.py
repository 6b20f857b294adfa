"""hpcnet lab emulation of `dmesg`: not the real tool (the lab nodes share the host kernel).

Prints the node's emulated kernel log (see hpcnet_lab_gpu.py) as `dmesg` does:
`[ seconds.micros] message`, oldest first. Options are accepted and ignored.
"""

from __future__ import annotations

import sys

import hpcnet_lab_gpu as gpu

if __name__ == "__main__":
    for seconds, message in gpu.kernel_log():
        sys.stdout.write(f"[{seconds:12.6f}] {message}\n")
