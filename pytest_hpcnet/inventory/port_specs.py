"""`expect.ports`: the port specs the pair probes open between nodes, checked when the
inventory loads (the probes expand them at run time, where a bad one failed every pair)."""

from __future__ import annotations

import re

PORT_ITEM = re.compile(r"(\d+)(?:-(\d+))?")
MAX_PORTS = 1024
"""At most this many ports per protocol, as `probes/ports.MAX_PORTS`: a listener per port."""


def port_spec_problem(specs: list[str]) -> str | None:
    """Why `specs` (`"22"`, `"22,80"`, `"29500-29510"` each) is no list of ports, or None."""
    ports: set[int] = set()
    for spec in specs:
        for part in (p for p in re.split(r"[,\s]+", spec) if p):
            m = PORT_ITEM.fullmatch(part)
            if m is None:
                return f"not a port or port range: {part!r} (write 22, '22,80' or '29500-29510')"
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            if not (1 <= lo <= hi <= 65535):
                return f"invalid port range {part!r} (ports are 1-65535, low-high)"
            ports.update(range(lo, hi + 1))
            if len(ports) > MAX_PORTS:
                return f"more than {MAX_PORTS} ports (one listener each on every node)"
    return None
