"""Network rounds during the burn-in: while the GPUs are loaded, every `burnin.network_every`
the controller runs `ib_write_bw` between disjoint pairs on every ERI, then one NCCL
all-reduce across the burning nodes, and appends each iteration to `<run>/burnin/network.jsonl`.

The rounds run in their own thread beside the burn-in's collections (`NetworkRounds` is the
context the collection loop runs in), so a round never delays a sample. Round k is due
`k x network_every` after the burn-in started, for every k before its end (`planned`); it
must start within its slot (before round k+1 is due): a round whose slot passed (the round
before still running, no controller running it) is recorded as missed, never run late, so a
resumed controller (`--hpcnet-burnin-resume`) neither repeats nor piles up rounds. Every loop
is bounded: at most `planned` rounds, each bounded by the perftest and NCCL timeouts, none
started after the end or once the collections stopped.

The pairs of round k are the circle method's round k (`pairing`): disjoint, a different
pairing each round, every node meeting every other over n-1 rounds (one node sits out each
round of an odd count). A node that stopped answering is left out of the round and recorded.
The runs are the benchmark's own: `EriRounds.measure` (perftest launch, parse and each ERI
index in turn) and `NcclCampaign.run_launch` (the `nccl_busbw` launch and parse); they are
judged by `requirements/burnin_network.py`.

Evidence: `network.json` (interval, rounds planned, nodes; kept by a resume) and
`network.jsonl`, one compact line per round, per ERI run, per all-reduce, per missed round
(about 110 bytes an ERI run).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from pytest_hpcnet.campaigns.nccl.campaign import NcclCampaign
from pytest_hpcnet.campaigns.nccl.launch import expected_run
from pytest_hpcnet.campaigns.perftest.campaign import EriRounds
from pytest_hpcnet.campaigns.progress import LOG, silent
from pytest_hpcnet.campaigns.schedule import Pair
from pytest_hpcnet.requirements.burnin_network import (
    OFF,
    BwRun,
    NcclRun,
    NetworkBurnin,
    Round,
)
from pytest_hpcnet.requirements.judges import judge_nccl_correct, judge_nccl_run, judge_perftest
from pytest_hpcnet.requirements.verdict import FAIL, NOT_MEASURED, PASS

TOOL = "ib_write_bw"
PLAN_FILE = "network.json"
RESULTS_FILE = "network.jsonl"
MAX_ROUNDS = 20_000
"""The most rounds one burn-in plans (14 days at a 60 s interval)."""


class Plan(Protocol):
    """What the network rounds read of the burn-in's plan (`campaigns.burnin.BurninPlan`)."""

    seconds: float
    started_at: float
    gpus: dict[str, int]


def planned_rounds(seconds: float, every: float) -> int:
    """Rounds due at every, 2 x every, ... strictly before the end (0 when off)."""
    if every <= 0 or seconds <= 0:
        return 0
    return max(0, min(MAX_ROUNDS, math.ceil(seconds / every) - 1))


def pairing(nodes: list[str], k: int) -> list[Pair]:
    """Round k's disjoint pairs: the circle method's round k mod (n-1) over `nodes` (a bye
    added for an odd count), the same pairs as `schedule._round_robin(nodes)[k mod (n-1)]`."""
    players: list[str | None] = list(nodes)
    if len(players) % 2:
        players.append(None)
    n = len(players)
    if n < 2 or len(nodes) < 2:
        return []
    rest = players[1:]
    shift = (k % (n - 1)) % len(rest)
    circle = [players[0], *rest[len(rest) - shift :], *rest[: len(rest) - shift]]
    pairs = ((circle[i], circle[n - 1 - i]) for i in range(n // 2))
    return [Pair(a, b) for a, b in pairs if a is not None and b is not None]


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"))


class NetworkRounds:
    """The burn-in's network rounds, in a thread of their own while collections go on."""

    def __init__(
        self,
        facts: Any,
        folder: Path,
        plan: Plan,
        every: float,
        lost: Mapping[str, str],
        clock: Callable[[], float] = time.time,
        progress: Callable[[str], None] = silent,
    ):
        self.facts, self.folder, self.plan = facts, folder, plan
        self.lost = lost
        """The burn-in's nodes that stopped answering (live: the collections update it)."""
        self.clock, self.progress = clock, progress
        self.nodes = sorted(plan.gpus)
        self.every = every
        self.planned = planned_rounds(plan.seconds, every) if len(self.nodes) > 1 else 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nccl: NcclCampaign | None = None
        self.last_start: float | None = None
        self.last_end: float | None = None
        self.started = clock()

    # -- the thread ----------------------------------------------------------------------

    @classmethod
    def of(cls, campaign: Any, plan: Plan) -> NetworkRounds:
        """The rounds of a burn-in campaign (`campaigns.burnin.BurninCampaign`); a resume keeps
        the interval and plan the first controller wrote."""
        earlier = read_plan(campaign.folder)
        every = earlier.get("every", campaign.settings.network_every)
        rounds = cls(
            campaign.facts,
            campaign.folder,
            plan,
            float(every),
            campaign.lost,
            clock=campaign.clock,
            progress=campaign.progress,
        )
        if not earlier:
            rounds.write_plan()
        return rounds

    def __enter__(self) -> NetworkRounds:
        if self.planned and self._thread is None:
            thread = threading.Thread(target=self._guarded, name="burnin-network", daemon=True)
            self._thread = thread
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        """No round starts from now on; wait for the one running (bounded by its timeouts)."""
        self._stop.set()
        if self._thread is not None:
            bound = self.round_bound_s()
            self._thread.join(bound)
            if self._thread.is_alive():
                LOG.warning("burn-in network round still running after %.0f s", bound)

    def round_bound_s(self) -> float:
        """The longest one round can take: each ERI index's perftest round and the all-reduce."""
        bench = self.facts.inventory.benchmarks
        width = max(1, self.facts.inventory.expect.erdma.eris or 1)
        return width * (bench.perftest.timeout_s + 90) + bench.nccl.timeout_s + 120

    def _guarded(self) -> None:
        try:
            self.loop(self._stop.wait)
        except Exception:  # a round's failure must not end the burn-in; its lines say what ran
            LOG.exception("burn-in network rounds stopped")

    def loop(self, wait: Callable[[float], bool]) -> None:
        """Every planned round not yet recorded, each in its slot (`wait(s)` true: stop)."""
        done = {r.round for r in read_network(self.folder).rounds}
        for k in range(1, self.planned + 1):
            if k in done:
                continue
            due = self.plan.started_at + k * self.every
            now = self.clock()
            if now >= due + self.every or now >= self.plan.started_at + self.plan.seconds:
                self.missed(k, due)
                continue
            if wait(max(0.0, due - now)) or self._stop.is_set():
                return
            self.round(k)

    def missed(self, k: int, due: float) -> None:
        if self.last_end is not None and self.last_end > due:
            took = self.last_end - (self.last_start or self.last_end)
            why = f"round {k - 1} still running: it took {took:.0f} s"
            why += f", network_every {self.every:g} s"
        else:
            began = self.since(self.started)
            why = f"no controller ran it (this one started at t={began:g} s)"
        self.append([{"r": k, "t": round(due - self.plan.started_at, 1), "missed": why}])

    # -- one round -----------------------------------------------------------------------

    def since(self, epoch: float) -> float:
        return round(epoch - self.plan.started_at, 1)

    def round(self, k: int) -> None:
        """Round k: its pairs on every ERI, then the all-reduce, each line as it finishes."""
        self.last_start = start = self.clock()
        unreachable = self.facts.transport.unreachable()
        lost = {n: self.lost.get(n) or unreachable[n] for n in self.nodes
                if n in self.lost or n in unreachable}  # fmt: skip
        for n in self.nodes:
            if n not in lost and not self.facts.data_address(n):
                lost[n] = "no data-plane address"
        up = [n for n in self.nodes if n not in lost]
        pairs = pairing(up, k - 1)
        self.append([{"r": k, "t": self.since(start), "lost": lost, "pairs": len(pairs)}])
        if len(up) < 2:
            return
        self.append(self.bw_lines(k, pairs, start))
        self.append([self.nccl_line(k, up)])
        self.last_end = self.clock()

    def bw_lines(self, k: int, pairs: list[Pair], start: float) -> list[dict[str, Any]]:
        """ib_write_bw on each pair's ERI indexes in turn (`EriRounds.measure`)."""
        settings = self.facts.inventory.benchmarks.perftest
        expect = self.facts.inventory.expect
        eris = EriRounds.of(self.facts, TOOL, settings, [n for p in pairs for n in (p.a, p.b)])

        def passes(run: Any) -> bool:
            return judge_perftest(TOOL, run, expect).passed

        label = f"burn-in network round {k}/{self.planned}"
        measured = eris.measure(pairs, k, label, passes, self.progress)
        out = []
        for pair, runs in measured.items():
            for i, (device, run) in enumerate(runs.items()):
                found = eris.devices.get(pair.b, [])
                server = found[i] if i < len(found) else f"ERI {i}"
                began = min((c.started_at for c in run.commands), default=start)
                error, unread = run.error, run.not_measured
                gone = next((c for c in run.commands if c.unreachable), None)
                if error and gone is not None:  # a node lost mid-round: not measured
                    error, unread = None, f"{gone.node} stopped answering: {gone.unreachable}"
                out.append(
                    {
                        "r": k,
                        "t": self.since(max(began, start)),
                        "bw": [pair.a, device, pair.b, server],
                        "gbps": run.value,
                        "error": error,
                        "unread": unread,
                    }
                )
        return out

    def nccl_line(self, k: int, up: list[str]) -> dict[str, Any]:
        """The all-reduce across the nodes up (the `nccl_busbw` launch), as judged to run."""
        if self._nccl is None:
            self._nccl = NcclCampaign(self.facts)
        by_name = {n.name: n for n in self.facts.inventory.nodes}
        nodes = [by_name[n] for n in up if n in by_name]
        start = self.clock()
        with_progress = f"burn-in network round {k}/{self.planned}: NCCL on {len(nodes)} nodes"
        self.progress(with_progress)
        done = self._nccl.run_launch(nodes)
        settings = self.facts.inventory.benchmarks.nccl
        launched = expected_run(settings, len(nodes), self._nccl.names_of(nodes))
        ran = judge_nccl_run(done.result, done.run, launched)
        if ran.outcome == PASS:
            correct = judge_nccl_correct(done.result, done.run, launched)
            ran = correct if correct.outcome == FAIL else ran
        result = done.result
        return {
            "r": k,
            "t": self.since(done.run.started_at or start),
            "nccl": len(nodes),
            "ran": ran.outcome if ran.outcome in (PASS, FAIL) else NOT_MEASURED,
            "why": ran.reason,
            "avg": result.avg_busbw_gbs,
            "largest": result.busbw_at_max_size_gbs,
            "size": result.max_size_bytes,
        }

    # -- evidence ------------------------------------------------------------------------

    def write_plan(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        plan = {"every": self.every, "planned": self.planned, "nodes": self.nodes}
        (self.folder / PLAN_FILE).write_text(json.dumps(plan))

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        lines = [_line(r) for r in records]
        if lines:
            with open(self.folder / RESULTS_FILE, "a") as out:
                out.write("\n".join(lines) + "\n")


def read_plan(folder: Path) -> dict[str, Any]:
    try:
        found = json.loads((folder / PLAN_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def read_network(folder: Path) -> NetworkBurnin:
    """The network rounds of a burn-in's evidence folder, typed for the judge (an unreadable
    line is counted, never judged)."""
    plan = read_plan(folder)
    every, planned = float(plan.get("every") or 0.0), int(plan.get("planned") or 0)
    why_none = ""
    if every <= 0 and plan:
        why_none = OFF
    elif planned == 0:
        why_none = (
            f"no network round asked: the burn-in is not longer than burnin.network_every "
            f"({every:g} s), or fewer than two nodes burn in"
        )
    rounds: list[Round] = []
    bw: list[BwRun] = []
    nccl: list[NcclRun] = []
    unreadable = 0
    path = folder / RESULTS_FILE
    text = path.read_text() if path.exists() else ""
    for line in text.splitlines():
        try:
            r = json.loads(line)
            k, t = int(r["r"]), float(r["t"])
            if "bw" in r:
                a, ea, b, eb = (str(x) for x in r["bw"])
                gbps = None if r.get("gbps") is None else float(r["gbps"])
                bw.append(BwRun(k, t, a, ea, b, eb, gbps, r.get("error"), r.get("unread")))
            elif "nccl" in r:
                nccl.append(
                    NcclRun(
                        k, t, int(r["nccl"]), str(r["ran"]), str(r.get("why") or ""),
                        r.get("avg"), r.get("largest"), r.get("size"),
                    )
                )  # fmt: skip
            elif "missed" in r:
                rounds.append(Round(k, t, missed=str(r["missed"])))
            else:
                lost = {str(n): str(w) for n, w in r["lost"].items()}
                rounds.append(Round(k, t, lost=lost, pairs=int(r.get("pairs") or 0)))
        except (ValueError, KeyError, TypeError, AttributeError):
            unreadable += 1
    missing = "" if plan else "no burn-in ran (no burnin/network.json)"
    return NetworkBurnin(
        every, planned, tuple(rounds), tuple(bw), tuple(nccl), unreadable, why_none, missing
    )
