"""Waiting for a channel to have data: poll(2), which takes any descriptor. select(2) refuses
descriptors past FD_SETSIZE (1,024), and a controller of 1,024 nodes holds a socket and a
channel pipe per node."""

from __future__ import annotations

import select


def wait_readable(fd: int, timeout_s: float) -> bool:
    """Whether `fd` has data (or its end) within `timeout_s`."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0.0, timeout_s) * 1000))
