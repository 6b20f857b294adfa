"""Network rounds during the burn-in: the rotating disjoint pairing, the rounds' slots (missed,
never late), a resumed controller keeping earlier iterations, a round through the benchmark's
own perftest and NCCL code against an instant fake transport, and the judge."""

from __future__ import annotations

import json
import threading
from itertools import combinations
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_hpcnet.campaigns.burnin import BurninCampaign, BurninPlan
from pytest_hpcnet.campaigns.burnin_network import (
    RESULTS_FILE,
    NetworkRounds,
    pairing,
    planned_rounds,
    read_network,
)
from pytest_hpcnet.campaigns.schedule import _round_robin
from pytest_hpcnet.inventory.burnin_settings import BurninSettings
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.requirements.burnin_network import (
    BW_CODE,
    NCCL_CODE,
    BwRun,
    NcclRun,
    NetworkBurnin,
    Round,
    judge_burnin_network,
)
from pytest_hpcnet.requirements.registry import across_nodes_reason, fault
from pytest_hpcnet.transport.fanout import CommandResult

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
pytest_plugins = ["pytester"]

BW_OUTPUT = (FIXTURES / "perftest" / "bw-client-erdma-gbits-s65536.txt").read_text()

# -- pairing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9, 64])
def test_each_round_is_disjoint_and_over_n_minus_1_rounds_every_node_meets_every_other(n):
    nodes = [f"node{i:02d}" for i in range(1, n + 1)]
    rounds = n - 1 if n % 2 == 0 else n
    met = set()
    for k in range(rounds):
        pairs = pairing(nodes, k)
        ends = [x for p in pairs for x in (p.a, p.b)]
        assert len(ends) == len(set(ends)), pairs  # disjoint
        assert len(pairs) == n // 2  # every node but the odd one out
        met |= {p.key for p in pairs}
    assert met == {frozenset(c) for c in combinations(nodes, 2)}


def test_the_pairing_rotates_each_round_and_is_the_schedules_circle_method():
    nodes = [f"n{i}" for i in range(8)]
    tournament = _round_robin(nodes)
    for k in range(20):
        assert pairing(nodes, k) == tournament[k % 7]
        assert {p.key for p in pairing(nodes, k)} != {p.key for p in pairing(nodes, k + 1)}


def test_no_pairs_below_two_nodes():
    assert pairing([], 0) == [] and pairing(["a"], 3) == []


@pytest.mark.parametrize(
    ("seconds", "every", "planned"),
    [(86400, 600, 143), (14, 5, 2), (15, 5, 2), (5, 5, 0), (100, 0, 0), (4, 10, 0)],
)
def test_rounds_planned_before_the_end(seconds, every, planned):
    assert planned_rounds(seconds, every) == planned


def test_network_every_reads_durations_and_off():
    assert BurninSettings().network_every == 600
    assert BurninSettings(network_every="2m").network_every == 120
    for off in ("off", 0, False, None):
        assert BurninSettings(network_every=off).network_every == 0
    with pytest.raises(ValueError):
        BurninSettings(network_every="0.5s")


# -- the rounds' slots and a resumed controller -----------------------------------------------


class Clock:
    def __init__(self, now: float = 1_800_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.now += seconds
        return False


def plan(seconds: float = 20.0, nodes: int = 4, started: float = 1_800_000_000.0):
    gpus = {f"node{i:02d}": 8 for i in range(1, nodes + 1)}
    return BurninPlan("run-1", seconds, 1.0, 600.0, 8192, started, gpus)


def rounds_of(folder: Path, clock: Clock, p, every=4.0, took=1.0, die_after=None):
    """NetworkRounds whose rounds take `took` seconds and record one line each."""
    rounds = NetworkRounds(SimpleNamespace(), folder, p, every, {}, clock=clock)
    rounds.write_plan()
    ran = []

    def one(k):
        if die_after is not None and len(ran) >= die_after:
            raise SystemExit  # the controller dies here
        rounds.last_start = clock.now
        ran.append(k)
        rounds.append([{"r": k, "t": rounds.since(clock.now), "lost": {}, "pairs": 2}])
        clock.now += took
        rounds.last_end = clock.now

    rounds.round = one
    return rounds, ran


def test_rounds_run_in_their_slots_and_a_slow_round_makes_the_next_missed(tmp_path):
    clock = Clock()
    rounds, ran = rounds_of(tmp_path, clock, plan(20.0), every=4.0, took=1.0)
    rounds.loop(clock.wait)
    assert ran == [1, 2, 3, 4]  # due at 4, 8, 12, 16 (20 is the end)
    assert [r.t for r in read_network(tmp_path).rounds] == [4.0, 8.0, 12.0, 16.0]

    slow = tmp_path / "slow"
    clock = Clock()
    rounds, ran = rounds_of(slow, clock, plan(20.0), every=4.0, took=7.0)
    rounds.loop(clock.wait)
    assert ran == [1, 2, 4]  # 2 starts late in its slot (11 s < 12 s); 3's slot passed by 18 s
    missed = {r.round: r.missed for r in read_network(slow).rounds if r.missed}
    assert set(missed) == {3} and "round 2 still running: it took 7 s" in missed[3]


def test_a_resumed_controller_keeps_earlier_iterations_and_misses_those_due_while_down(
    tmp_path,
):
    clock, p = Clock(), plan(40.0)
    first, ran = rounds_of(tmp_path / "a", clock, p, every=4.0, die_after=2)
    with pytest.raises(SystemExit):
        first.loop(clock.wait)
    assert ran == [1, 2]
    clock.now = p.started_at + 21.0  # the controller was down for rounds 3 and 4 (12, 16)
    (tmp_path / "a" / "run.json").write_text(p.to_json())
    resumed_folder = tmp_path / "b"
    campaign = BurninCampaign(
        SimpleNamespace(),
        resumed_folder,
        "run-2",
        None,
        BurninSettings(network_every=9),  # a resume keeps the first controller's interval
        resume_from=tmp_path / "a",
        clock=clock,
    )
    campaign._resume()  # copies the evidence folder
    again = NetworkRounds.of(campaign, p)
    assert again.every == 4.0 and again.planned == 9
    ran_again = []

    def one(k):
        ran_again.append(k)
        again.append([{"r": k, "t": again.since(clock.now), "lost": {}, "pairs": 2}])

    again.round = one
    again.loop(clock.wait)
    assert ran_again == [5, 6, 7, 8, 9]  # round 5 was due at 20 s and starts within its slot
    found = read_network(resumed_folder)
    assert [r.round for r in found.rounds if not r.missed] == [1, 2, 5, 6, 7, 8, 9]
    missed = {r.round: r.missed for r in found.rounds if r.missed}
    assert set(missed) == {3, 4} and "no controller ran it" in missed[3]
    rounds_listed = [r.round for r in found.rounds]
    assert len(rounds_listed) == len(set(rounds_listed)) == 9  # none repeated


def test_the_thread_stops_with_the_collections_and_starts_no_round_after(tmp_path):
    p = plan(3600.0)
    rounds = NetworkRounds(SimpleNamespace(), tmp_path, p, 600.0, {})
    rounds.round_bound_s = lambda: 5.0
    started = threading.Event()
    rounds.round = lambda k: started.set()
    with rounds:  # round 1 is due in 600 s: the burn-in's collections end first
        assert rounds._thread is not None and rounds._thread.is_alive()
    assert not rounds._thread.is_alive() and not started.is_set()


def test_off_or_one_node_plans_no_round_and_starts_no_thread(tmp_path):
    for every, nodes in ((0.0, 4), (4.0, 1)):
        rounds = NetworkRounds(SimpleNamespace(), tmp_path, plan(40.0, nodes), every, {})
        with rounds:
            assert rounds.planned == 0 and rounds._thread is None


# -- one round through the benchmark's perftest and NCCL code ---------------------------------

INVENTORY = """cluster: {name: c, region: r}
nodes:
%s
expect:
  erdma: {eris: 2}
  ib_write_bw: {min_gbps: 150}
  nccl: {min_avg_busbw_gbs: 10, min_busbw_largest_gbs: 20}
benchmarks:
  perftest: {size: 65536, qps: 4, duration_s: null}
  nccl: {gpus_per_node: 1, args: {b: 1M, e: 1G, f: 4, n: 20, w: 5}}
"""


class InstantTransport:
    """Every node answers at once: perftest servers start, clients print `BW_OUTPUT` (slow
    on `slow`'s ERI: 90 Gbit/s), mpirun prints an all-reduce table of `nodes` ranks."""

    def __init__(
        self, names: list[str], slow: tuple[str, str] | None = None, ranks: int = 0, gone=""
    ):
        self.names = names
        self.gone = gone
        self.ranks = ranks or len(names)
        self.slow = slow
        self.commands = 0

    def unreachable(self) -> dict[str, str]:
        return {}

    def result(self, node: str, stdout: str) -> CommandResult:
        self.commands += 1
        return CommandResult(node, "cmd", 0, stdout, "", 0.01, 1_800_000_010.0)

    def run_on_all(self, command, nodes=None, timeout_s=None, together=False):
        out = {}
        for name in nodes:
            text = command if isinstance(command, str) else command(SimpleNamespace(name=name))
            body = ""
            if "ib_write_bw" in text and "echo $!" not in text and "hpcnet-perftest" not in text:
                device = text.split(" -d ")[1].split()[0]
                body = BW_OUTPUT.replace("erdma_0", device)
                if self.slow == (name, device):
                    body = body.replace("180.77", "90.10")
            out[name] = self.result(name, body)
            if name == self.gone:
                out[name] = CommandResult(name, "c", None, "", "", 5.0, 0.0, unreachable="gone")
        return out

    def run(self, node, command, timeout_s=None):
        if "all_reduce_perf" in command and " -h" in command:
            return self.result(node, "usage: all_reduce_perf -b -e")
        return self.result(node, nccl_table(self.ranks))


def nccl_table(nodes: int) -> str:
    head = [
        "# nccl-tests version 2.13.8 nccl-headers=21903 nccl-library=21903",
        "# Collective test starting: all_reduce_perf",
        "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 4(factor) "
        "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
        *(
            f"#  Rank {r:2d} Group  0 Pid  {4000 + r} on node{r + 1:02d} device  0 [0x00] H800"
            for r in range(nodes)
        ),
        "#",
        "#                                                              out-of-place"
        "                       in-place",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "            (us)  (GB/s)  (GB/s)",
    ]
    rows, busbws = [], []
    for size, algbw in ((1048576, 10.0), (4194304, 13.0), (16777216, 16.0),
                        (67108864, 16.5), (268435456, 17.0), (1073741824, 17.2)):  # fmt: skip
        busbw = round(algbw * 2 * (nodes - 1) / nodes, 2)
        busbws += [busbw, busbw]
        cell = f"{size / algbw / 1e3:8.1f}  {algbw:6.2f}  {busbw:6.2f}"
        rows.append(f"  {size:>10d}  {size // 4:>12d}     float     sum      -1  {cell}      0"
                    f"  {cell}      0")  # fmt: skip
    tail = [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {sum(busbws) / len(busbws):.4f}",
        "#",
        "# Collective test concluded: all_reduce_perf",
    ]
    return "\n".join(head + rows + tail) + "\n"


class InstantFacts:
    """The facts a round reads: two ERIs a node, each with its own address and GID 1."""

    def __init__(self, inventory, transport):
        self.inventory, self.transport, self.progress = inventory, transport, lambda line: None

    def data_address(self, name):
        return f"10.0.0.{int(name[-2:])}"

    def listed_eris(self, name):
        return ["erdma_0", "erdma_1"]

    def gid_index(self, name, device):
        return 1

    def eri_address(self, name, device):
        return SimpleNamespace(address=f"10.{device[-1]}.0.{int(name[-2:])}")

    def gather(self):
        return {}


def instant_round(tmp_path: Path, nodes: int, slow=None, k: int = 1, gone=""):
    names = [f"node{i:02d}" for i in range(1, nodes + 1)]
    path = tmp_path / "inv.yaml"
    listed = "".join(f"  - {{name: {n}, host: 10.0.0.{i + 1}}}\n" for i, n in enumerate(names))
    path.write_text(INVENTORY % listed.rstrip("\n"))
    inventory = load_inventory(path)
    transport = InstantTransport(names, slow, ranks=nodes - 1, gone=gone)  # node04 lost
    facts = InstantFacts(inventory, transport)
    p = plan(3600.0, nodes)
    rounds = NetworkRounds(facts, tmp_path, p, 600.0, {"node04": "no answer"}, clock=Clock())
    rounds.write_plan()
    rounds.round(k)
    return read_network(tmp_path), inventory, transport


def test_a_round_runs_every_eri_of_each_disjoint_pair_and_the_all_reduce(tmp_path):
    found, inventory, _ = instant_round(tmp_path, 5, slow=("node01", "erdma_1"))
    assert found.rounds[0].lost == {"node04": "no answer"}
    pairs = {(r.client, r.server) for r in found.bw}
    assert len(pairs) == 2 and not {n for p in pairs for n in p} & {"node04"}
    assert {(r.client_eri, r.server_eri) for r in found.bw} == {
        ("erdma_0", "erdma_0"),
        ("erdma_1", "erdma_1"),
    }
    assert len(found.bw) == 4 and all(r.error is None and r.unread is None for r in found.bw)
    assert found.nccl[0].nodes == 4 and found.nccl[0].ran == "pass", found.nccl[0].why
    assert found.nccl[0].avg == pytest.approx(22.43, abs=0.01)
    verdict = judge_burnin_network(found, inventory.expect)
    slow = [r for r in found.bw if r.gbps == pytest.approx(90.10)]
    assert [(r.client, r.client_eri) for r in slow] == [("node01", "erdma_1")]
    failed = [m.subject for m in verdict.measurements if m.outcome == "fail"]
    assert failed == [slow[0].subject] and "erdma_1" in verdict.reason
    lines = (tmp_path / RESULTS_FILE).read_text().splitlines()
    assert all(len(line) < 200 for line in lines)


def test_a_node_lost_mid_round_is_not_measured_never_a_failure(tmp_path):
    found, inventory, _ = instant_round(tmp_path, 5, gone="node02")
    gone = [r for r in found.bw if "node02" in (r.client, r.server)]
    assert len(gone) == 2 and all(r.error is None for r in gone)
    assert all(r.unread == "node02 stopped answering: gone" for r in gone)
    verdict = judge_burnin_network(found, inventory.expect)
    assert verdict.outcome == "not_measured"
    assert {m.outcome for m in verdict.measurements if "node02" in m.subject} == {"not_measured"}


# -- the judge --------------------------------------------------------------------------------


def expect(min_gbps=100.0):
    nccl = SimpleNamespace(min_avg_busbw_gbs=10.0, min_busbw_largest_gbs=20.0, max_busbw_gbs=None)
    return SimpleNamespace(
        ib_write_bw=SimpleNamespace(bound_gbps=min_gbps, max_gbps=800.0), nccl=nccl
    )


def bw(k, t, gbps, a="node01", b="node02", eri="erdma_0", **kw):
    return BwRun(k, t, a, eri, b, eri, gbps, **kw)


def network(**kw):
    base = dict(
        every=600.0,
        planned=2,
        rounds=(Round(1, 600.0), Round(2, 1200.0)),
        bw=(bw(1, 600.2, 180.0), bw(2, 1200.1, 175.0, "node01", "node03")),
        nccl=(NcclRun(1, 605.0, 4, "pass", avg=22.0, largest=25.0),
              NcclRun(2, 1205.0, 4, "pass", avg=21.0, largest=24.0)),
    )  # fmt: skip
    return NetworkBurnin(**{**base, **kw})


def test_every_iteration_within_bounds_passes_with_one_measurement_each():
    verdict = judge_burnin_network(network(), expect())
    assert verdict.outcome == "pass", verdict.reason
    assert len(verdict.measurements) == 2 + 2 * 2
    first = verdict.measurements[0]
    assert first.subject == "node01/erdma_0-node02/erdma_0 round 1"
    assert first.value == "180 at t=600.2 s (0h10m00s)" and first.bound == 100.0
    assert first.source == "expect.ib_write_bw" and first.comparison == ">="


def test_an_iteration_below_its_bound_fails_naming_pair_eri_and_time():
    slow = bw(2, 1200.1, 42.5, "node03", "node04", "erdma_1")
    verdict = judge_burnin_network(network(bw=(*network().bw, slow)), expect())
    assert verdict.outcome == "fail" and verdict.code == BW_CODE
    assert verdict.reason.startswith("node03/erdma_1-node04/erdma_1 round 2: BW average 42.50")
    assert "at t=1200.1 s (0h20m00s)" in verdict.reason
    assert [m.subject for m in verdict.measurements if m.outcome == "fail"] == [slow.subject]


def test_a_failed_run_and_a_slow_all_reduce_fail_the_earliest_first():
    broken = bw(2, 1200.0, None, error="server on node02 did not start: timed out")
    nccl = NcclRun(1, 605.0, 4, "pass", avg=3.0, largest=25.0)
    verdict = judge_burnin_network(network(bw=(*network().bw, broken), nccl=(nccl,)), expect())
    assert verdict.outcome == "fail" and verdict.code == NCCL_CODE
    assert verdict.reason.startswith("all_reduce 4 nodes round 1: avg_busbw 3.0 GB/s < 10.0")
    assert "(and 1 more)" in verdict.reason


def test_rounds_not_run_and_nodes_lost_are_not_measured_never_a_pass():
    found = network(
        planned=4,
        rounds=(Round(1, 600.0, lost={"node04": "no answer"}), Round(2, 1200.0),
                Round(3, 1800.0, missed="round 2 still running: it took 700 s")),
    )  # fmt: skip
    verdict = judge_burnin_network(found, expect())
    assert verdict.outcome == "not_measured"
    unread = {m.subject: m.value for m in verdict.measurements if m.outcome == "not_measured"}
    assert set(unread) == {"node04 round 1", "round 3", "round 4"}
    assert "still running" in unread["round 3"] and "no controller ran it" in unread["round 4"]


def test_a_round_that_stopped_before_its_all_reduce_is_not_measured():
    started = network(rounds=(Round(1, 600.0, pairs=1), Round(2, 1200.0, pairs=1)))
    assert judge_burnin_network(started, expect()).outcome == "pass"
    cut = network(rounds=started.rounds, nccl=network().nccl[:1])  # round 2: no all-reduce
    verdict = judge_burnin_network(cut, expect())
    assert verdict.outcome == "not_measured"
    assert verdict.reason.startswith("round 2: incomplete: no all-reduce recorded")


def test_unread_outputs_and_unreadable_lines_are_not_measured():
    unread = bw(1, 600.0, None, unread="not measured: the client output was truncated")
    assert judge_burnin_network(network(bw=(unread,)), expect()).outcome == "not_measured"
    assert judge_burnin_network(network(unreadable=1), expect()).outcome == "not_measured"


def test_off_is_not_applicable_and_no_burnin_is_not_measured(tmp_path):
    (tmp_path / "network.json").write_text(json.dumps({"every": 0, "planned": 0, "nodes": []}))
    assert judge_burnin_network(read_network(tmp_path), expect()).outcome == "not_applicable"
    missing = judge_burnin_network(read_network(tmp_path / "none"), expect())
    assert missing.outcome == "not_measured" and "no burn-in ran" in missing.reason


def test_registered_across_nodes_with_its_codes():
    assert across_nodes_reason("burnin_network", 1) is not None
    assert fault(BW_CODE) is not None and fault(NCCL_CODE) is not None


BURNIN_SUITE = """\
import pytest

pytestmark = pytest.mark.burnin

@pytest.mark.check("burnin_network", "network rounds")
def test_cluster_rounds(check):
    pass

@pytest.mark.check("burnin", "burn-in")
def test_per_node(node, check):
    pass
"""


def test_a_plain_run_lists_the_cluster_burnin_test_as_not_applicable(pytester, tmp_path):
    """A plain handover run asks no burn-in: the network rounds' cluster test, which takes no
    `node`, was judged (not measured: INCOMPLETE) instead of not applicable."""
    pytester.makepyfile(test_suite=BURNIN_SUITE)
    path = tmp_path / "inv.yaml"
    nodes = "".join(f"  - {{name: n{i}, host: 127.0.0.{i}, connection: local}}\n" for i in (1, 2))
    path.write_text("cluster: {name: c, region: r}\nnodes:\n" + nodes)
    plain = pytester.runpytest(".", "--hpcnet-inventory", str(path), "-rs", "-q")
    plain.stdout.fnmatch_lines(["*not applicable: no burn-in asked*"])
    plain.assert_outcomes(skipped=2)
    asked = pytester.runpytest(".", "--hpcnet-inventory", str(path), "-q", "--hpcnet-burnin", "1h")
    asked.assert_outcomes(passed=3)
