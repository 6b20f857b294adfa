"""The pair probes overlapped with the facts give the same facts as the three fan-outs after
them, start before the last node's facts are in, and fail closed when they cannot finish."""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from pytest_hpcnet.campaigns.facts import FactsCampaign
from pytest_hpcnet.campaigns.pairs.campaign import PairCampaign, gather_pair_facts
from pytest_hpcnet.campaigns.pairs.pipeline import PairPipeline
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.probes.sections import MARK
from pytest_hpcnet.transport.fanout import CommandResult

INVENTORY = """\
cluster: {name: pipe, region: cn-test}
nodes:
  - {name: "n[1-12]", host: "{name}.cluster.invalid"}
expect:
  flows:
    allow: [{source: n1, target: n3, protocol: tcp, port: 18515}]
    deny: [{source: n5, target: n2, protocol: udp, port: 4791}]
"""
DOWN = "n4"


class FakeTransport:
    """Canned answers by command kind; logs (kind, node) in the order commands start."""

    concurrency = 2

    def __init__(self, last_waits_for_a_probe: bool = False):
        self.log: list[tuple[str, str]] = []
        self.probe_started = threading.Event()
        self.last_waits = last_waits_for_a_probe
        self.overlapped: bool | None = None
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(self.concurrency)

    @staticmethod
    def kind(command: str) -> str:
        if f"{MARK} begin addr" in command and "mktemp -d" not in command:
            return "facts"
        if "hpcnet-listener" in command and command.startswith("f=$(mktemp"):
            return "listen"
        if command.startswith("kill "):
            return "stop"
        return "probe"

    def run(self, name: str, command: str, timeout_s: float | None = None) -> CommandResult:
        kind = self.kind(command)
        with self._lock:
            self.log.append((kind, name))
        if kind == "probe":
            self.probe_started.set()
        if kind == "facts" and name == "n12" and self.last_waits:
            self.overlapped = self.probe_started.wait(10)  # the other worker must probe
        if name == DOWN:
            return CommandResult(name, command, None, "", "", 0.0, 0.0, unreachable="refused")
        number = name.removeprefix("n")
        out = {
            "facts": f"{MARK} begin addr\n"
            + json.dumps(
                [
                    {
                        "ifname": "eth0",
                        "mtu": 8500,
                        "addr_info": [{"family": "inet", "local": f"10.0.0.{number}"}],
                    }
                ]
            )
            + f"\n{MARK} end addr 0\n",
            "listen": f"PID 10{number}\nFILE /tmp/hpcnet-listener.x{number}\nREADY tcp:22 udp:\n",
            "probe": f"{MARK} begin ports\ntcp 22 open from {name}\nDONE\n{MARK} end ports 0\n",
            "stop": f"READY tcp:22 udp:\nEXIT signal served={number}\n",
        }[kind]
        return CommandResult(name, command, 0, out, "", 0.0, 0.0)

    def submit(self, name: str, command: str, timeout_s: float | None = None) -> Future:
        return self._pool.submit(self.run, name, command, timeout_s)

    def run_on_all(self, command, nodes=None, timeout_s=None, together=False):
        names = list(nodes) if nodes is not None else [n.name for n in INV.nodes]
        node = {n.name: n for n in INV.nodes}
        cmd = {n: command(node[n]) if callable(command) else command for n in names}
        return dict(zip(names, self._pool.map(lambda n: self.run(n, cmd[n]), names), strict=True))


INV = None


@pytest.fixture
def inventory(tmp_path):
    global INV
    path = tmp_path / "pipe.yaml"
    path.write_text(INVENTORY)
    INV = load_inventory(path)
    return INV


def sequential(inventory):
    """The reference: the facts, then the three fan-outs."""
    transport = FakeTransport()
    facts = FactsCampaign(inventory, transport)
    facts.gather()
    addresses = {n.name: a for n in inventory.nodes if (a := facts.data_address(n.name))}
    pairs = PairCampaign(facts).ring()
    nodes = {n.name: n for n in inventory.nodes}
    return gather_pair_facts(transport, nodes, addresses, pairs, inventory.expect)


def overlapped(inventory, last_waits_for_a_probe: bool = False):
    transport = FakeTransport(last_waits_for_a_probe)
    campaign = PairCampaign(FactsCampaign(inventory, transport))
    campaign.prefetch()
    campaign.gather()
    return campaign, transport


def test_overlapped_probes_equal_the_three_fan_outs(inventory):
    pairs, flows = sequential(inventory)
    campaign, _ = overlapped(inventory)
    assert campaign._pairs == pairs
    assert campaign._flows == flows
    assert ("n3", DOWN) in pairs and ("n3", DOWN) in campaign._pairs  # probed, no address
    assert (DOWN, "n5") not in campaign._pairs  # a node without facts probes nothing
    assert len(campaign._pairs) == 11
    assert set(flows) == {"allow:tcp/18515:n1->n3", "deny:udp/4791:n5->n2"}


def test_probes_run_while_the_last_node_facts_are_still_out(inventory):
    # n12's facts do not return until a probe has started (at most 10 s): with the facts
    # first and the probes after, no probe could start before
    _, transport = overlapped(inventory, last_waits_for_a_probe=True)
    assert transport.overlapped is True


def test_each_stage_waits_for_what_it_needs(inventory):
    _, transport = overlapped(inventory)
    at = {entry: i for i, entry in enumerate(transport.log)}
    # a ring-only target listens once it and its ring source have their facts
    assert at[("listen", "n9")] > max(at[("facts", "n8")], at[("facts", "n9")])
    # a listener a flow node takes part in waits for every node's facts: its sources probe
    # far-away targets too, and it must not expire before they do (LISTENER_LIFETIME_S)
    last_facts = max(i for (kind, _), i in at.items() if kind == "facts")
    for target in ("n1", "n2", "n3", "n4", "n5", "n6"):  # flow nodes, or their ring targets
        assert at.get(("listen", target), last_facts + 1) > last_facts, target
    assert at[("probe", "n1")] > max(at[("listen", t)] for t in ("n2", "n3"))
    assert at[("stop", "n2")] > max(at[("probe", s)] for s in ("n1", "n5"))
    assert ("listen", DOWN) not in at and ("probe", DOWN) not in at


def test_unfinished_pipeline_leaves_pairs_unmeasured(inventory):
    nodes = {n.name: n for n in inventory.nodes}
    pipeline = PairPipeline(FakeTransport(), nodes, [], inventory.expect)
    pipeline.arrived("n1", "10.0.0.1")  # the others never arrive: nothing can finish
    pairs, flows, why = pipeline.result(0.05)
    assert why == "pair probes not done within 0 s"
    assert pairs == {} and flows == {}


def test_a_failed_pipeline_falls_back_to_the_three_fan_outs(inventory):
    pairs, flows = sequential(inventory)
    transport = FakeTransport()
    campaign = PairCampaign(FactsCampaign(inventory, transport))
    campaign.prefetch()
    campaign._pipeline.abandon("simulated")
    campaign.gather()
    assert campaign._pairs == pairs and campaign._flows == flows


def listener_lifetimes(commands: list[str]) -> list[float]:
    """The `--lifetime` each listener was started with (the last one: the listener's own
    source, embedded before its arguments, names the option too)."""
    import re

    return [float(re.findall(r"--lifetime ([\d.]+)", c)[-1]) for c in commands]


@pytest.mark.parametrize("mode", ["three fan-outs", "overlapped"])
def test_a_listener_outlives_the_rounds_queued_before_its_sources(inventory, mode, monkeypatch):
    """A listener started in the first round of the pool must still listen when its source
    probes in the last one: at 1,024 nodes under `-n 2` (512 listeners, 32 connections per
    worker) a fixed 60 s lifetime ran out and 706 pairs read 'refused'."""
    from pytest_hpcnet.campaigns.pairs import probes as pair_probes

    commands: list[str] = []
    real = pair_probes.listener_command
    monkeypatch.setattr(
        pair_probes,
        "listener_command",
        lambda *a, **k: (commands.append(real(*a, **k)), commands[-1])[1],
    )
    if mode == "overlapped":
        overlapped(inventory)
    else:
        sequential(inventory)
    # 11 listeners and 11 sources (n4 has no address) on 2 connections: 6 + 6 rounds
    rounds = 6 + 6
    expected = pair_probes.LISTENER_LIFETIME_S + rounds * pair_probes.LISTENER_ROUND_S
    assert commands and set(listener_lifetimes(commands)) == {expected}
