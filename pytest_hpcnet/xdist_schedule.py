"""pytest-xdist scheduling by range of nodes: each worker runs every check of the ranges it
is given, so a node's facts and pair probes stay in one worker.

xdist's `--dist loadgroup` would do this from `xdist_group` marks, but it names a group by
appending `@group` to the test id (changing the ids users select and waive, and on pytest 9
not taking effect at all). This scheduler is xdist's `loadscope` with the scope of a test
read from what the workers left in the facts spool at collection (`Partition.group`).
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

from pytest_hpcnet.campaigns.partition import FactsSpool


class RangeScheduling(LoadScopeScheduling):
    """`loadscope` whose scopes are the hpcnet groups: one per range of nodes, one for the
    cluster-wide checks; a test that is no hpcnet check is a scope of its own."""

    def __init__(self, config: pytest.Config, spool: FactsSpool, log=None):
        super().__init__(config, log)
        self.spool = spool
        self._groups: dict[str, str] | None = None

    def schedule(self) -> None:
        if self._groups is None:  # every worker has collected (and written) by now
            self._groups = self.spool.collected().groups
        super().schedule()

    def _split_scope(self, nodeid: str) -> str:
        groups = self._groups if self._groups is not None else {}
        return groups.get(nodeid, nodeid)
