"""A node whose partner stopped answering during the benchmarks is not measured in the
all-at-once round, and its record names that partner (review finding 5)."""

from __future__ import annotations

from pytest_hpcnet.campaigns.facts import FactsCampaign, NodeFacts
from pytest_hpcnet.campaigns.perftest.campaign import PerftestCampaign, PerftestCampaigns
from pytest_hpcnet.campaigns.perftest.devices import left_out
from pytest_hpcnet.campaigns.schedule import Pair
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.probes.sections import SectionOutput
from pytest_hpcnet.transport.fanout import CommandResult
from tests.unit.test_eri_address import ADDR, DEVINFO, IDENT, LINK, TWO_NODES, Recording


def test_left_out_names_the_partner_that_stopped_answering():
    rounds = [[Pair("n1", "n2"), Pair("n3", "n4")]]
    addresses = {"n1": "10.0.0.1", "n3": "10.0.0.3", "n4": "10.0.0.4"}
    found = left_out(rounds, addresses, {"n2": "ssh: connection timed out"})
    assert found == {"n1": "its partner n2 stopped answering: ssh: connection timed out"}
    assert left_out(rounds, {"n2": "a", "n3": "b", "n4": "c"}, {}) == {
        "n2": "its partner n1 has no data-plane address"
    }


def test_not_in_round_line_names_the_partner():
    campaign = PerftestCampaign(
        "ib_write_bw", left_out={"n1": "its partner n2 stopped answering: x"}
    )
    line = campaign.not_in_round("n1", "all-ERIs-at-once")
    assert line == "n1: not in the all-ERIs-at-once round (its partner n2 stopped answering: x)"
    assert "no partner reached" in campaign.not_in_round("n9")


class Silent(Recording):
    """n2 stopped answering: every command there is unreachable."""

    def unreachable(self) -> dict[str, str]:
        return {"n2": "ssh: connection timed out"}

    def run_on_all(self, command, nodes=None, timeout_s=None, together=False):
        out = super().run_on_all(command, [n for n in nodes or [] if n != "n2"], timeout_s)
        for name in nodes or []:
            if name == "n2":
                out[name] = CommandResult(
                    name, "cmd", None, "", "", 0.0, 0.0, unreachable="ssh: connection timed out"
                )
        return out


def test_the_campaign_names_the_node_that_stopped_answering(tmp_path):
    path = tmp_path / "inv.yaml"
    path.write_text(TWO_NODES)
    inventory = load_inventory(path)
    transport = Silent()
    transport.inventory = inventory
    facts = FactsCampaign(inventory, transport)
    sections = {"addr": ADDR, "rdma_link": LINK, "erdma_identity": IDENT, "ibv_devinfo_v": DEVINFO}
    result = CommandResult("n1", "facts", 0, "", "", 0.1, 0.0)
    facts._facts["n1"] = NodeFacts(
        "n1", result, {k: SectionOutput(v, 0) for k, v in sections.items()}
    )
    gone = CommandResult("n2", "facts", None, "", "", 0.0, 0.0, unreachable="ssh: timed out")
    facts._facts["n2"] = NodeFacts("n2", gone, {})
    campaign = PerftestCampaigns(facts).campaign("ib_write_bw")
    assert campaign.left_out["n1"] == "its partner n2 stopped answering: ssh: connection timed out"
    assert "n2 stopped answering" in campaign.not_in_round("n1")


def test_a_node_whose_runs_are_not_measured_is_never_the_suspect():
    """n4's two pairs are not measured (their outputs are another run than asked): the
    schedule has no evidence on n4, so it blames nothing; n4 stays to be confirmed."""
    from pytest_hpcnet.campaigns.perftest.rounds import PairRun

    names = ["n1", "n2", "n3", "n4"]
    ring = [Pair("n1", "n2"), Pair("n2", "n3"), Pair("n3", "n4"), Pair("n4", "n1")]
    campaign = PerftestCampaign("ib_write_bw")
    for pair in ring:
        cut = "n4" in pair.key
        run = PairRun(pair, 1, not_measured="not measured: two runs" if cut else None)
        campaign.device_runs[pair] = {"erdma_0": run}

    def passes(run) -> bool:
        return not run.not_measured

    PerftestCampaigns._settle(campaign, names, passes)
    assert campaign.localization.suspects == ()
    assert "n4" in campaign.localization.unknown
    assert campaign.suspect_devices == []
    assert set(campaign.passed) == {Pair("n1", "n2"), Pair("n2", "n3")}
