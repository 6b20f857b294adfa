"""Every ERI the expectations and the listings plan is measured or named not measured
(the MTU and path-MTU checks): an ERI whose netdev is unknown, whose listings came back
cut, or that the pair partner lacks is never silently left out, so eth1 at MTU 1500 behind
a cut listing cannot pass."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_hpcnet.campaigns.cluster import ReadFacts
from pytest_hpcnet.campaigns.eri_paths import EriPathCampaign, eri_paths
from pytest_hpcnet.campaigns.facts import FactsCampaign, NodeFacts
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.probes.ping import PingResult
from pytest_hpcnet.probes.sections import SectionOutput
from pytest_hpcnet.requirements.verdict import NotMeasured
from pytest_hpcnet.suites import test_mtu as suite
from pytest_hpcnet.transport.fanout import CommandResult
from tests.recorded import Recorded
from tests.unit.test_eri_address import Recording

FIXTURES = Path(__file__).parent.parent / "fixtures" / "erdma"
ADDR = (FIXTURES / "derived-two-eni-ip-j-addr.json").read_text()
LINK = (FIXTURES / "derived-two-eni-rdma-link.txt").read_text()
IDENT = (FIXTURES / "derived-two-eni-identity.txt").read_text()
DEVINFO = (FIXTURES / "derived-two-eni-ibv_devinfo-v.txt").read_text()
INVENTORY = """\
cluster: {name: c1, region: cn-lab}
ssh: {user: root}
nodes:
  - {name: n1, host: 192.168.10.21}
  - {name: n2, host: 192.168.10.22}
benchmarks: {perftest: {schedule: ring, duration_s: 1}}
"""
CUT = object()
"""A section value: the section came back cut short (no end line)."""
PARTIAL = DEVINFO
"""What a cut section holds: its first 40 characters of this."""


def eth1_at(mtu: int) -> str:
    """The two-ENI `ip -j addr` (also read as `ip -j link`) with eth1 at `mtu`."""
    found = json.loads(ADDR)
    for iface in found:
        if iface["ifname"] == "eth1":
            iface["mtu"] = mtu
    return json.dumps(found)


def healthy(last: str = "21") -> dict:
    sections = {
        "links": eth1_at(8500),
        "addr": ADDR,
        "rdma_link": LINK,
        "erdma_identity": IDENT,
        "ibv_devinfo_v": DEVINFO,
    }
    for old, new in (("10.21", f"10.{last}"), ("11.37", f"11.{last}")):
        sections = {k: v.replace(f"192.168.{old}", f"192.168.{new}") for k, v in sections.items()}
    return sections


def campaign(tmp_path, nodes: dict[str, dict], expect: str = "", transport=None) -> FactsCampaign:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY + (f"expect: {expect}\n" if expect else ""))
    inventory = load_inventory(path)
    if transport is not None:
        transport.inventory = inventory
    c = FactsCampaign(inventory, transport)
    for name, sections in nodes.items():
        result = CommandResult(name, "facts", 0, "", "", 0.1, 0.0)
        found = {
            k: SectionOutput(PARTIAL[:40], None) if v is CUT else SectionOutput(v, 0)
            for k, v in sections.items()
        }
        c._facts[name] = NodeFacts(name, result, found)
    return c


def cluster(c: FactsCampaign) -> SimpleNamespace:
    return SimpleNamespace(
        expect=c.inventory.expect,
        facts_campaign=c,
        facts=lambda node, check: ReadFacts(c._facts[node.name], check),
    )


def mtu_check(c: FactsCampaign, name: str = "n1") -> tuple[str, str, Recorded]:
    """(outcome, reason, recorder) of the MTU check on `name`."""
    check = Recorded("mtu", name)
    try:
        suite.test_interface_mtu_is_expected(cluster(c), c.inventory.node(name), check)
    except NotMeasured as exc:
        return "not_measured", str(exc), check
    except AssertionError as exc:
        return "fail", str(exc), check
    return "pass", "", check


# -- the MTU check: every planned ERI measured or named ---------------------------------


def test_healthy_node_passes_with_eth1_measured(tmp_path):
    outcome, reason, check = mtu_check(campaign(tmp_path, {"n1": healthy()}))
    assert outcome == "pass", reason
    assert check.measured == {"mtu": 8500, "eth1 (erdma_1) mtu": 8500}


def test_netdev_unknown_behind_a_cut_rdma_link_is_not_measured_not_a_pass(tmp_path):
    """sysfs names no netdev and `rdma link` came back cut: eth1 at 1500 used to pass."""
    c = campaign(tmp_path, {"n1": healthy() | {"links": eth1_at(1500), "rdma_link": CUT}})
    outcome, reason, _ = mtu_check(c)
    assert outcome == "not_measured", reason
    assert reason.startswith("n1: erdma_0: netdev unknown (")
    assert "erdma_1: netdev unknown (" in reason and "'rdma_link' cut short" in reason


def test_the_ll128_rule_names_the_unknown_eri_too(tmp_path):
    c = campaign(tmp_path, {"n1": healthy() | {"links": eth1_at(1500), "rdma_link": CUT}})
    node = c.inventory.node("n1")
    with pytest.raises(NotMeasured, match="n1: erdma_0: netdev unknown"):
        suite.test_erdma_mtu_rule_for_nccl_ll128(cluster(c), node, Recorded("mtu", "n1"))


def test_eri_listing_cut_plans_the_expected_count_and_names_each(tmp_path):
    """Neither sysfs nor `ibv_devinfo -v` nor `rdma link` whole: the profile's two ERIs
    are each named not measured."""
    sections = {"links": eth1_at(1500), "erdma_identity": CUT, "ibv_devinfo_v": CUT}
    c = campaign(tmp_path, {"n1": sections | {"rdma_link": CUT}}, "{erdma: {eris: 2}}")
    outcome, reason, check = mtu_check(c)
    assert outcome == "not_measured", reason
    assert "erdma_0: netdev unknown (" in reason and "erdma_1: netdev unknown (" in reason
    assert "listed the node's ERIs whole" in reason
    assert check.measured["mtu"] == 8500  # the data-plane interface is still measured


def test_eri_listing_cut_still_measures_what_rdma_link_names(tmp_path):
    sections = {"links": eth1_at(1500), "erdma_identity": CUT, "ibv_devinfo_v": CUT}
    c = campaign(tmp_path, {"n1": sections | {"rdma_link": LINK}})
    outcome, reason, _ = mtu_check(c)
    assert outcome == "fail", reason
    assert reason == "n1: eth1 (erdma_1): MTU 1500, expected 8500"


def test_a_measured_failure_beside_an_unmeasured_eri_fails_and_names_both(tmp_path):
    c = campaign(tmp_path, {"n1": healthy() | {"links": eth1_at(1500)}}, "{erdma: {eris: 3}}")
    outcome, reason, _ = mtu_check(c)
    assert outcome == "fail", reason
    assert reason.startswith("n1: eth1 (erdma_1): MTU 1500, expected 8500; ")
    assert "erdma_2: not listed (2 ERIs listed, 3 expected by expect.erdma.eris)" in reason


def test_an_expected_eri_a_whole_listing_lacks_is_not_measured(tmp_path):
    c = campaign(tmp_path, {"n1": healthy()}, "{erdma: {eris: 3}}")
    outcome, reason, _ = mtu_check(c)
    assert outcome == "not_measured", reason
    assert reason == "n1: erdma_2: not listed (2 ERIs listed, 3 expected by expect.erdma.eris)"


# -- path MTU: every planned ERI pair measured or named ---------------------------------


ONE_ERI = {
    "erdma_identity": IDENT.splitlines()[0] + "\n",
    "rdma_link": LINK.splitlines()[0] + "\n",
    "ibv_devinfo_v": DEVINFO.split("hca_id:\terdma_1")[0],
}


def test_a_partner_lacking_the_eri_is_named_not_skipped(tmp_path):
    assert "erdma_1" not in ONE_ERI["ibv_devinfo_v"] and "erdma_0" in ONE_ERI["ibv_devinfo_v"]
    transport = Recording()
    c = campaign(tmp_path, {"n1": healthy(), "n2": healthy("22") | ONE_ERI}, transport=transport)
    (path,) = eri_paths(c, "n1", "n2")
    assert path.device == "erdma_1" and path.unmeasured
    assert "n2 lacks erdma_1's partner" in path.unmeasured
    found = EriPathCampaign(c, lambda: [("n1", "n2")]).pair("n1", "n2")
    assert [f.path.unmeasured for f in found] == [path.unmeasured]
    assert transport.commands == []  # nothing to ping: named, never a pass


def test_an_unknown_netdev_on_either_side_is_named(tmp_path):
    transport = Recording()
    nodes = {"n1": healthy(), "n2": healthy("22") | {"rdma_link": CUT}}
    c = campaign(tmp_path, nodes, transport=transport)
    paths = eri_paths(c, "n1", "n2")
    assert [p.device for p in paths] == ["erdma_0", "erdma_1"]
    assert all(p.unmeasured.startswith("n2 erdma_") for p in paths)
    assert all("netdev unknown" in p.unmeasured for p in paths)
    back = eri_paths(c, "n2", "n1")
    assert [p.unmeasured.split(":")[0] for p in back] == ["n2 erdma_0", "n2 erdma_1"]


def test_a_path_measured_beside_one_named_pings_only_the_measurable(tmp_path):
    transport = Recording()
    nodes = {"n1": healthy(), "n2": healthy("22")}
    c = campaign(tmp_path, nodes, "{erdma: {eris: 3}}", transport)
    found = EriPathCampaign(c, lambda: [("n1", "n2")]).pair("n1", "n2")
    assert [(f.path.device, bool(f.path.unmeasured)) for f in found] == [
        ("erdma_1", False),
        ("erdma_2", True),
    ]
    (sent,) = [cmd for _, cmd in transport.commands]
    assert "-I eth1 192.168.11.22" in sent and "erdma_2" not in sent


def pair_cluster(data: PingResult, eris: list) -> SimpleNamespace:
    return SimpleNamespace(
        expect=SimpleNamespace(mtu=8500),
        pair_facts=lambda s, t, check: SimpleNamespace(path_mtu=data),
        eri_path_mtu=lambda s, t, check: eris,
    )


WHOLE = PingResult(target="x", packet_size=8500, transmitted=3, received=3, errors=0)


def path_check(eris: list) -> tuple[str, str]:
    nodes = (SimpleNamespace(name="n1"), SimpleNamespace(name="n2"))
    try:
        suite.test_full_mtu_crosses_the_path(pair_cluster(WHOLE, eris), nodes, Recorded())
    except NotMeasured as exc:
        return "not_measured", str(exc)
    except AssertionError as exc:
        return "fail", str(exc)
    return "pass", ""


def test_the_path_check_is_not_measured_for_a_named_eri_path(tmp_path):
    c = campaign(tmp_path, {"n1": healthy(), "n2": healthy("22") | ONE_ERI}, transport=Recording())
    found = EriPathCampaign(c, lambda: [("n1", "n2")]).pair("n1", "n2")
    outcome, reason = path_check(found)
    assert outcome == "not_measured", reason
    assert reason == f"n1->n2: erdma_1: {found[0].path.unmeasured}"


@pytest.mark.parametrize("status", [None, 124], ids=["cut short", "timed out"])
def test_a_cut_ping_section_is_not_measured_never_a_failure(tmp_path, status):
    class Cut(Recording):
        def run_on_all(self, command, nodes=None, timeout_s=None, together=False):
            out = super().run_on_all(command, nodes, timeout_s, together)
            name = "n2/erdma_1"
            head = "PING 192.168.11.22 (192.168.11.22) from 192.168.11.21 eth1: 8472(8500) bytes"
            end = "" if status is None else f"\n@@hpcnet end {name} {status}"
            body = f"@@hpcnet begin {name}\n{head}\n{end}\n"
            return {n: CommandResult(n, r.command, 0, body, "", 0.1, 0.0) for n, r in out.items()}

    c = campaign(tmp_path, {"n1": healthy(), "n2": healthy("22")}, transport=Cut())
    found = EriPathCampaign(c, lambda: [("n1", "n2")]).pair("n1", "n2")
    outcome, reason = path_check(found)
    assert outcome == "not_measured", reason
    assert reason.startswith("n1->n2: erdma_1 (eth1) to 192.168.11.22: ")
    assert ("cut short" if status is None else "timed out (exit status 124)") in reason
