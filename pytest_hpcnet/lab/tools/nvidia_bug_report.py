"""hpcnet lab emulation of `nvidia-bug-report.sh`: not NVIDIA's script, and no GPU.

Prints what the real script prints (tests/fixtures/repair/nvidia-bug-report-stdout.txt) and
writes, as it does, `nvidia-bug-report.log.gz` in the current directory (or
`--output-file FILE`, `.gz` appended): the script's prologue, then the node's emulated
`nvidia-smi -q` and kernel log, a few kB instead of the real tens of MB. `--safe-mode` and
`--extra-system-data` are accepted and change nothing. Standard library only: it runs on
the node with the system python3.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time

import hpcnet_lab_gpu as gpu

COMMANDS = ("nvidia-bug-report.sh",)
"""The commands this file is installed as (`lab.emulation.lab_tools`)."""
RULE = "____________________________________________\n\n"
VERSION = "hpcnet-lab-emulation"


def banner(log: str) -> str:
    """The real script's message on stdout, naming the file it writes."""
    return f"""
nvidia-bug-report.sh will now collect information about your
system and create the file '{log}' in the current
directory.  It may take several seconds to run.  In some
cases, it may hang trying to capture data generated dynamically
by the Linux kernel and/or the NVIDIA kernel module.  While
the bug report log file will be incomplete if this happens, it
may still contain enough data to diagnose your problem.

If nvidia-bug-report.sh hangs, consider running with the --safe-mode
and --extra-system-data command line arguments.

Please include the '{log}' log file when reporting
your bug via the NVIDIA Linux forum (see forums.developer.nvidia.com)
or by sending email to 'linux-bugs@nvidia.com'.

By delivering '{log}' to NVIDIA, you acknowledge
and agree that personal information may inadvertently be included in
the output.  Notwithstanding the foregoing, NVIDIA will use the
output only for the purpose of investigating your reported issue.

"""


def report(flags: list[str]) -> str:
    """The log's text: the script's prologue, `nvidia-smi -q`, the kernel log."""
    smi = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True, check=False)
    klog = "".join(f"[{t:12.6f}] {m}\n" for t, m in gpu.kernel_log())
    return (
        RULE + "Start of NVIDIA bug report log file.  Please include this file, along\n"
        "with a detailed description of your problem, when reporting a graphics\n"
        "driver bug via the NVIDIA Linux forum (see forums.developer.nvidia.com)\n"
        "or by sending email to 'linux-bugs@nvidia.com'.\n\n"
        f"nvidia-bug-report.sh Version: {VERSION}\n\n"
        f"Date: {time.strftime('%a %b %d %H:%M:%S %Z %Y')}\n"
        f"uname: {' '.join(os.uname())}\n"
        f"command line flags: {' '.join(flags)}\n\n"
        + RULE
        + "nvidia-smi -q\n\n"
        + smi.stdout
        + "\n"
        + RULE
        + "dmesg\n\n"
        + klog
    )


def main(argv: list[str]) -> int:
    log = "nvidia-bug-report.log"
    if "--output-file" in argv:
        at = argv.index("--output-file")
        if at + 1 >= len(argv):
            sys.stdout.write("ERROR: --output-file needs a file name.\n")
            return 1
        log = argv[at + 1].removesuffix(".gz")
    target = f"{log}.gz"
    if os.path.exists(target):
        os.replace(target, f"{log}.old.gz")
    sys.stdout.write(banner(os.path.basename(target)))
    sys.stdout.write("Running nvidia-bug-report.sh...")
    sys.stdout.flush()
    with gzip.open(target, "wt") as out:
        out.write(report(argv))
    sys.stdout.write(" complete.\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
