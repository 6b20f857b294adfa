"""The inventory's `burnin:` section: how long every GPU is loaded, how often it is sampled,
and how long a node's burn-in outlives a silent controller.

```yaml
burnin: {duration: 24h, interval: 30s, heartbeat: 10m, network_every: 10m}
```

A duration is seconds (`90`) or `1d`, `24h`, `90m`, `30s` and their sums (`1h30m`).
`--hpcnet-burnin DURATION` asks for a burn-in and overrides `duration`.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator

from pytest_hpcnet.inventory.expectations import Strict

UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)([dhms]))")
MAX_DURATION_S = 14 * 86400.0
"""The longest burn-in one run may ask for (commissioning guides ask 72 to 168 hours)."""


def parse_duration(text: str | float | int) -> float:
    """Seconds of `90`, `24h`, `1h30m`, `45s`; ValueError names what was wrong."""
    if isinstance(text, bool):
        raise ValueError(f"not a duration: {text!r}")
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        value = text.strip().lower()
        if re.fullmatch(r"\d+(?:\.\d+)?", value):
            seconds = float(value)
        elif value and DURATION.sub("", value) == "":
            seconds = sum(float(n) * UNITS[u] for n, u in DURATION.findall(value))
        else:
            raise ValueError(f"not a duration: {text!r} (write 24h, 90m, 30s or 1h30m)")
    if not 0 < seconds <= MAX_DURATION_S:
        most = f"{MAX_DURATION_S / 86400:g} days"
        raise ValueError(f"duration {text!r} is not between 1 s and {most}")
    return seconds


class BurninSettings(Strict):
    """`burnin:`: the duration a `-m burnin` run loads for (null: only with
    `--hpcnet-burnin DURATION`), the sample interval, and the heartbeat bound: a node stops
    its burn-in by itself when the controller has not collected for this long."""

    duration: float | None = None
    interval: Annotated[float, Field(ge=1, le=3600)] = 30.0
    heartbeat: Annotated[float, Field(ge=10, le=86400)] = 600.0
    size: Annotated[int, Field(ge=256, le=32768)] = 8192
    """GEMM size of the load's windows (n x n x n, bf16)."""
    network_every: Annotated[float, Field(ge=0, le=86400)] = 600.0
    """How often a network round (rotating ib_write_bw pairs on every ERI, then a
    cluster-wide NCCL all-reduce) runs during the burn-in; 0 or `off`: none."""

    @field_validator("network_every", mode="before")
    @classmethod
    def _every(cls, value: object) -> object:
        if value is False or value == 0 or str(value).strip().lower() in ("off", "0", "none"):
            return 0.0
        seconds = parse_duration(value)  # type: ignore[arg-type]
        if seconds < 1:
            raise ValueError(f"network_every {value!r} is under 1 s (write off to disable)")
        return seconds

    @field_validator("duration", "interval", "heartbeat", mode="before")
    @classmethod
    def _seconds(cls, value: object) -> object:
        return None if value is None else parse_duration(value)  # type: ignore[arg-type]
