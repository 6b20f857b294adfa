"""hpcnet lab emulation of perftest `ib_write_lat`: not the real tool (TCP over the lab link).

Ping-pongs `-s`-byte messages `-n` times (default 1000) and reports one-way latency
(RTT/2): t_min, t_max, t_typical, t_avg, t_stdev, 99% and 99.9% percentiles.
See hpcnet_lab_perftest.py for the server/client protocol, errors and lab faults.
"""

from __future__ import annotations

import sys

import hpcnet_lab_perftest as perftest

if __name__ == "__main__":
    sys.exit(perftest.main("ib_write_lat", __doc__, False))
