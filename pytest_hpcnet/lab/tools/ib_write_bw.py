"""hpcnet lab emulation of perftest `ib_write_bw`: not the real tool (TCP over the lab link).

Streams `-s`-byte messages over `-q` TCP connections for `-D` seconds (or `-n`
iterations, or a short run per size with `-a`) and reports the measured bandwidth.
See hpcnet_lab_perftest.py for the server/client protocol, errors and lab faults.
"""

from __future__ import annotations

import sys

import hpcnet_lab_perftest as perftest

if __name__ == "__main__":
    sys.exit(perftest.main("ib_write_bw", __doc__, True))
