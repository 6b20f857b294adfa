"""Finding the node behind a slow collective by halving: NCCL on subsets of the cluster.

When the whole-cluster all-reduce misses its bound and the pair benchmarks blame nobody
(a slow rank, a bad GPU-NIC path, a misconfigured NCCL environment on one node), the
failing set is split in two and each half is run on its own; the half that fails holds the
culprit. Down to two nodes, each is paired with a node already seen to pass. Every subset
has at least two nodes, so each run still crosses the network.

Pure: `bisect` takes a `trial(nodes) -> passed` callable and a run budget, and returns the
suspects with every trial it made. Stops without a suspect when both halves pass (the
failure needs nodes from both) or both fail (more than one slow node, or a bound above
what the fabric does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

Trial = Callable[[list[str]], bool]


@dataclass
class Bisection:
    """What the halving found: suspects (maybe none), why it stopped, every trial made."""

    suspects: tuple[str, ...] = ()
    reason: str = ""
    trials: list[tuple[tuple[str, ...], bool]] = field(default_factory=list)


def runs_needed(nodes: int) -> int:
    """The budget a single slow node needs: two runs per halving, two to split the last pair."""
    halvings = max(0, (nodes - 1).bit_length() - 1)
    return 2 * halvings + 2


def bisect(nodes: list[str], trial: Trial, max_runs: int) -> Bisection:
    """Halve `nodes` (which fail together) until the failing node is found or the budget ends."""
    found = Bisection()

    def run(subset: list[str]) -> bool:
        passed = trial(subset)
        found.trials.append((tuple(subset), passed))
        return passed

    failing, good = list(nodes), []
    while len(failing) > 3:
        if len(found.trials) + 2 > max_runs:
            found.reason = f"run budget ({max_runs}) spent with {len(failing)} nodes left"
            return found
        half = len(failing) // 2
        first, second = failing[:half], failing[half:]
        first_ok, second_ok = run(first), run(second)
        if first_ok and second_ok:
            found.reason = "both halves pass on their own: the failure needs nodes from both"
            return found
        if not first_ok and not second_ok:
            found.reason = "both halves fail: more than one slow node, or the bound is too high"
            return found
        failing, passed = (first, second) if second_ok else (second, first)
        good.extend(passed)
    return _last_nodes(failing, good, run, max_runs, found)


def _last_nodes(
    failing: list[str], good: list[str], run: Trial, max_runs: int, found: Bisection
) -> Bisection:
    """Two or three failing nodes: each beside a known-good node, else each pair of them."""
    if good:
        probes = [[node, good[0]] for node in failing]
    else:
        probes = [[a, b] for i, a in enumerate(failing) for b in failing[i + 1 :]]
    if len(probes) < 2:
        found.reason = "only two nodes and none known good: the run cannot be split further"
        return found
    if len(found.trials) + len(probes) > max_runs:
        found.reason = f"run budget ({max_runs}) spent with {len(failing)} nodes left"
        return found
    failed = [probe for probe in probes if not run(probe)]
    if good:
        suspects = [probe[0] for probe in failed]
    else:
        suspects = [n for n in failing if failed and all(n in probe for probe in failed)]
    if len(suspects) == 1:
        found.suspects = tuple(suspects)
        found.reason = "the only node whose runs fail"
    elif not failed:
        found.reason = "every smaller run passes: the failure needs more nodes together"
    else:
        found.reason = f"{len(failed)} of {len(probes)} small runs fail: no single node"
    return found
