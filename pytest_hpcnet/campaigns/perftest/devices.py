"""perftest per device: which device a run is, a missing device's failed run, the run that
speaks for a pair, the nodes' devices to blame, and the all-at-once rounds' pairs."""

from __future__ import annotations

from collections.abc import Callable

from pytest_hpcnet.campaigns.localization import localize
from pytest_hpcnet.campaigns.perftest.rounds import PairRun
from pytest_hpcnet.campaigns.schedule import Pair


def instance_rounds(rounds: list[list[Pair]]) -> list[list[Pair]]:
    """The all-at-once rounds: the first schedule round, then (odd node counts) one more
    round of later pairs that cover the nodes the first round left out."""
    if not rounds:
        return []
    covered = {n for p in rounds[0] for n in (p.a, p.b)}
    extra: list[Pair] = []
    busy: set[str] = set()
    for pairs in rounds[1:]:
        for p in pairs:
            if (p.a not in covered or p.b not in covered) and not {p.a, p.b} & busy:
                extra.append(p)
                busy |= {p.a, p.b}
                covered |= {p.a, p.b}
    return [rounds[0], extra] if extra else [rounds[0]]


def device_label(devices: dict[str, list[str]], pair: Pair, i: int) -> str:
    """The name of device index `i` on the client side, or `ERI i` when it has none."""
    found = devices.get(pair.a, [])
    return found[i] if i < len(found) else f"ERI {i}"


def missing_device(pair: Pair, index: int, i: int, devices: dict[str, list[str]]) -> PairRun:
    """The failed run of a device index one side of the pair does not have."""
    lacking = [n for n in (pair.a, pair.b) if i >= len(devices.get(n, []))]
    why = "; ".join(
        f"{n} has no ERI {i} ({', '.join(devices.get(n, [])) or 'no eRDMA device'})"
        for n in lacking
    )
    return PairRun(pair, index, error=why, device=device_label(devices, pair, i))


def worst(runs: dict[str, PairRun], passes: Callable[[PairRun], bool]) -> PairRun:
    """The pair's run that speaks for it: its first failing device (a measured failure
    before a run that is not measured), else its first."""
    ordered = list(runs.values())
    failing = [r for r in ordered if not passes(r)]
    return next((r for r in failing if not r.not_measured), failing[0] if failing else ordered[0])


def localize_devices(
    device_runs: list[tuple[Pair, dict[str, PairRun]]],
    names: list[str],
    devices: dict[str, list[str]],
    passes: Callable[[PairRun], bool],
) -> list[str]:
    """`node07 erdma_1` for each node the schedule blames on one device index (a node
    failing on device i with every partner, while other nodes pass on it)."""
    width = max((len(r) for _, r in device_runs), default=0)
    out: list[str] = []
    for i in range(width):
        verdicts: dict[Pair, bool] = {}
        for pair, runs in device_runs:
            if len(runs) > i and not (run := list(runs.values())[i]).not_measured:
                ok = passes(run)
                verdicts[pair] = verdicts.get(pair, True) and ok if pair in verdicts else ok
        for node in localize(verdicts, nodes=names).suspects:
            found = devices.get(node, [])
            out.append(f"{node} {found[i] if i < len(found) else f'ERI {i}'}")
    return sorted(set(out))


def left_out(
    rounds: list[list[Pair]], addresses: dict[str, str], unreachable: dict[str, str]
) -> dict[str, str]:
    """Why each node of an all-at-once pair that did not run is in no such round: its
    partner, named, stopped answering (or has no data-plane address)."""
    out: dict[str, str] = {}
    for pairs in rounds:
        for p in pairs:
            for node, other in ((p.a, p.b), (p.b, p.a)):
                if other in addresses or node in out:
                    continue
                if other in unreachable:
                    why = f"stopped answering: {unreachable[other]}"
                else:
                    why = "has no data-plane address"
                out[node] = f"its partner {other} {why}"
    return out
