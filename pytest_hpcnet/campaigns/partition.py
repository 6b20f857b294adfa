"""The nodes split between pytest-xdist workers: contiguous ranges, who owns which test, and
the spool through which the workers of one host share the facts each range gathered.

Every rule here is a pure function of the inventory's node order and the number of ranges,
so every worker (and the controller) computes the same owners without talking to the others.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GROUP_PREFIX = "hpcnet-"
CLUSTER_GROUP = f"{GROUP_PREFIX}cluster"
SPOOL_TOKEN = "token"
SPOOL_POLL_S = 0.05


@dataclass(frozen=True)
class Collected:
    """What the workers collected: each check's group (by test id) and the planned subjects
    per requirement (every worker collects the same tests)."""

    groups: dict[str, str]
    planned: dict[str, list[str]]


class Partition:
    """`parts` contiguous ranges of `names` (sizes differ by at most one)."""

    def __init__(self, names: Sequence[str], parts: int):
        self.names = list(names)
        self.parts = max(1, min(parts, len(self.names) or 1))
        count = len(self.names)
        self.ranges = [
            self.names[k * count // self.parts : (k + 1) * count // self.parts]
            for k in range(self.parts)
        ]
        self._range = {name: k for k, part in enumerate(self.ranges) for name in part}
        self._position = {name: i for i, name in enumerate(self.names)}

    def range_of(self, name: str) -> int | None:
        """The range `name` belongs to (None: not a node of the inventory)."""
        return self._range.get(name)

    def predecessor(self, name: str) -> str | None:
        """The node whose ring pair ends at `name` (the ring of `schedule.ring_pairs`)."""
        i = self._position.get(name)
        if i is None or len(self.names) < 2:
            return None
        return self.names[i - 1]

    def pair_owner(self, source: str) -> int | None:
        """The range that probes and judges the ring pair `source->next`: its source's."""
        return self.range_of(source)

    def flow_owner(self, target: str) -> int | None:
        """The range that probes an ACL flow: the one listening on its target, which is the
        range of the target's ring predecessor (one listener per node, whoever probes it)."""
        before = self.predecessor(target)
        return self.range_of(before) if before is not None else self.range_of(target)

    @staticmethod
    def group(owner: int | None) -> str:
        """The `xdist_group` of a range (None: the cluster-wide group)."""
        return CLUSTER_GROUP if owner is None else f"{GROUP_PREFIX}{owner}"


class FactsSpool:
    """A folder the controller creates and its workers share: the first process that needs
    a range's facts claims it (an exclusive create), gathers it and leaves the result; the
    others wait (bounded) for that file instead of gathering the range again."""

    def __init__(self, path: Path, token: str):
        self.path = path
        self.token = token

    @classmethod
    def create(cls, path: Path, token: str) -> FactsSpool:
        """Make the spool (mode 0700) and its token file (proof a worker sees this folder)."""
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        (path / SPOOL_TOKEN).write_text(token)
        return cls(path, token)

    @classmethod
    def open(cls, path: str | None, token: str | None) -> FactsSpool | None:
        """The controller's spool, or None where this process cannot see it (another host)."""
        if not path or not token:
            return None
        with contextlib.suppress(OSError):
            if (Path(path) / SPOOL_TOKEN).read_text() == token:
                return cls(Path(path), token)
        return None

    def put(self, key: str, value: Any) -> None:
        """Leave `value` (JSON) under `key`, whole or not at all."""
        partial = self.path / f"{key}.json.partial"
        partial.write_text(json.dumps(value, sort_keys=True))
        os.replace(partial, self.path / f"{key}.json")

    def collected(self) -> Collected:
        """The groups and plans the workers left (`collected-<worker>`), merged."""
        groups: dict[str, str] = {}
        planned: dict[str, list[str]] = {}
        for path in sorted(self.path.glob("collected-*.json")):
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(path.read_text())
                groups.update(data.get("groups", {}))
                for check_id, subjects in data.get("planned", {}).items():
                    known = planned.setdefault(check_id, [])
                    known.extend(s for s in subjects if s not in known)
        return Collected(groups, planned)

    def claim_or_wait(
        self,
        key: str,
        produce: Callable[[], Any],
        timeout_s: float,
        poll_s: float = SPOOL_POLL_S,
    ) -> tuple[Any, bool]:
        """(value, produced here): `produce()` if this process claims `key` first, else the
        value the claimer left; `(None, False)` when it is not left within `timeout_s` or
        the claimer failed."""
        claim, data = self.path / f"{key}.claim", self.path / f"{key}.pickle"
        try:
            os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            return self._wait(data, timeout_s, poll_s), False
        value: Any = None
        try:
            value = produce()
        finally:
            partial = data.with_suffix(".partial")
            partial.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
            os.replace(partial, data)
        return value, True

    @staticmethod
    def _wait(data: Path, timeout_s: float, poll_s: float) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return pickle.loads(data.read_bytes())
            except FileNotFoundError:
                if time.monotonic() >= deadline:
                    return None
                time.sleep(poll_s)
