"""Port specs (`22`, `"22,80"`, `"29500-29510"`, or a list of those): expanded once here for
the pair probes and checked with the same code when the inventory loads (`expect.ports`),
so a bad one is refused up front instead of failing every pair at run time."""

from __future__ import annotations

import re
from collections.abc import Iterable

PORT_ITEM = re.compile(r"(\d+)(?:-(\d+))?")
MAX_PORTS = 1024
"""At most this many ports per protocol: the pair probes open a listener per port."""


def expand_ports(spec: int | str | Iterable[int | str], cap: int = MAX_PORTS) -> tuple[int, ...]:
    """`22`, `"22,80"`, `"50000-50010"` or a list of those -> ports, deduplicated, in order.

    Raises ValueError, saying which part is wrong, on an invalid port or range, or when more
    than `cap` ports result.
    """
    items: list[int | str] = [spec] if isinstance(spec, int | str) else list(spec)
    ports: dict[int, None] = {}
    for item in items:
        parts = [item] if isinstance(item, int) else [p for p in re.split(r"[,\s]+", item) if p]
        for part in parts:
            m = None if isinstance(part, int) else PORT_ITEM.fullmatch(part)
            if not isinstance(part, int) and m is None:
                raise ValueError(
                    f"not a port or port range: {part!r} (write 22, '22,80' or '29500-29510')"
                )
            lo = part if isinstance(part, int) else int(m.group(1))  # type: ignore[union-attr]
            hi = lo if m is None or not m.group(2) else int(m.group(2))
            if not (1 <= lo <= hi <= 65535):
                raise ValueError(f"invalid port range {part!r} (ports are 1-65535, low-high)")
            if hi - lo + 1 > cap or len(ports.keys() | range(lo, hi + 1)) > cap:
                raise ValueError(f"more than {cap} ports (one listener each on every node)")
            ports.update(dict.fromkeys(range(lo, hi + 1)))
    return tuple(ports)


def port_spec_problem(specs: list[str]) -> str | None:
    """Why `specs` is no list of ports (`expand_ports`' message), or None."""
    try:
        expand_ports(specs)
    except ValueError as exc:
        return str(exc)
    return None
