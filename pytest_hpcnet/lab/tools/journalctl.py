"""hpcnet lab emulation of `journalctl`: only the kernel log (`-k`/`--dmesg`), not the real tool.

With `-k` prints the node's emulated kernel log (see hpcnet_lab_gpu.py) in journalctl's
short format (`Nov 30 15:40:02 node03 kernel: message`), boot time taken as an hour ago;
without it `-- No entries --`. Other options are accepted and ignored.
"""

from __future__ import annotations

import os
import sys
import time

import hpcnet_lab_gpu as gpu

if __name__ == "__main__":
    if not {"-k", "--dmesg"} & set(sys.argv[1:]):
        sys.stdout.write("-- No entries --\n")
        sys.exit(0)
    boot = time.time() - 3600
    host = os.uname().nodename
    for seconds, message in gpu.kernel_log():
        stamp = time.strftime("%b %d %H:%M:%S", time.localtime(boot + seconds))
        sys.stdout.write(f"{stamp} {host} kernel: {message}\n")
