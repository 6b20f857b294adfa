"""Each ERI's own interface and address (issue 27): an ERI is an ENI, so erdma_1 of a
two-ERI instance sits on eth1 with eth1's own address; GID, `-x` and perftest follow it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.facts import FactsCampaign, NodeFacts
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.probes.erdma import parse_erdma_identity, parse_gid_tables
from pytest_hpcnet.probes.eri_address import EriAddress, eri_address, eri_netdevs
from pytest_hpcnet.probes.links import parse_interfaces
from pytest_hpcnet.probes.rdma_parsers import parse_rdma_link
from pytest_hpcnet.probes.sections import SectionOutput
from pytest_hpcnet.requirements.erdma import judge_erdma_gid
from pytest_hpcnet.transport.fanout import CommandResult

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
"""


def test_netdev_from_rdma_link_when_sysfs_lists_none():
    netdevs = eri_netdevs(parse_erdma_identity(IDENT), parse_rdma_link(LINK))
    assert netdevs == {"erdma_0": ("eth0", "rdma link"), "erdma_1": ("eth1", "rdma link")}


def test_sysfs_netdev_comes_first():
    ident = parse_erdma_identity(
        "dev=erdma_1 driver=erdma vendor=0x1ded device=0x107f numa=1 netdev=eth1\n"
    )
    links = parse_rdma_link("link erdma_1/1 state ACTIVE physical_state LINK_UP netdev eth9 \n")
    assert eri_netdevs(ident, links) == {"erdma_1": ("eth1", "sysfs device/net")}


def test_each_eri_gets_its_own_interface_address():
    netdevs = eri_netdevs(parse_erdma_identity(IDENT), parse_rdma_link(LINK))
    interfaces = parse_interfaces(ADDR)
    first = eri_address("erdma_0", netdevs, interfaces, "eth0")
    second = eri_address("erdma_1", netdevs, interfaces, "eth0")
    assert (first.netdev, first.address) == ("eth0", "192.168.10.21")
    assert (second.netdev, second.address, second.fallback) == ("eth1", "192.168.11.37", False)
    assert second.note == "erdma_1: netdev eth1 (rdma link), 192.168.11.37"


def test_unknown_netdev_falls_back_to_the_data_interface_and_says_so():
    found = eri_address("erdma_1", {}, parse_interfaces(ADDR), "eth0")
    assert (found.netdev, found.address, found.fallback) == ("eth0", "192.168.10.21", True)
    assert "netdev unknown" in found.note and "data-plane interface eth0" in found.note


def test_a_netdev_without_ipv4_has_no_address():
    found = eri_address("erdma_1", {"erdma_1": ("eth2", "rdma link")}, parse_interfaces(ADDR), "x")
    assert (
        found.address is None and found.note == "erdma_1: netdev eth2 (rdma link), no IPv4 address"
    )


def campaign(tmp_path, sections: dict[str, str]) -> FactsCampaign:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY)
    c = FactsCampaign(load_inventory(path), transport=None)
    result = CommandResult("n1", "facts", 0, "", "", 0.1, 0.0)
    c._facts["n1"] = NodeFacts("n1", result, {k: SectionOutput(v, 0) for k, v in sections.items()})
    return c


def test_facts_accessor_and_gid_index_per_device(tmp_path):
    c = campaign(
        tmp_path,
        {"addr": ADDR, "rdma_link": LINK, "erdma_identity": IDENT, "ibv_devinfo_v": DEVINFO},
    )
    assert c.eri_address("n1", "erdma_1").address == "192.168.11.37"
    assert c.eri_address("n1", "erdma_0").address == "192.168.10.21"
    assert c.data_address("n1") == "192.168.10.21"
    assert c.gid_index("n1", "erdma_0") == 1
    assert c.gid_index("n1", "erdma_1") == 1  # eth1's GID, not an absent eth0 one


def test_gid_check_passes_a_healthy_two_eni_node():
    tables = parse_gid_tables(DEVINFO)
    netdevs = eri_netdevs(parse_erdma_identity(IDENT), parse_rdma_link(LINK))
    interfaces = parse_interfaces(ADDR)
    addresses = {d: eri_address(d, netdevs, interfaces, "eth0") for d in ("erdma_0", "erdma_1")}
    verdict = judge_erdma_gid("n1", tables, ["erdma_0", "erdma_1"], {}, addresses)
    assert verdict, verdict.reason
    assert verdict.reason.endswith("at index 1") and "n1 erdma_1: IPv4 GID" in verdict.reason


def test_gid_check_names_the_eri_whose_interface_address_is_missing():
    tables = parse_gid_tables(DEVINFO)
    interfaces = parse_interfaces(ADDR)
    netdevs = {"erdma_0": ("eth0", "rdma link"), "erdma_1": ("eth1", "rdma link")}
    addresses = {d: eri_address(d, netdevs, interfaces, "eth0") for d in ("erdma_0", "erdma_1")}
    wrong = parse_gid_tables(DEVINFO.replace("192.168.11.37", "192.168.11.99"))
    verdict = judge_erdma_gid("n1", wrong, ["erdma_0", "erdma_1"], {}, addresses)
    assert not verdict
    assert verdict.reason.startswith("n1 erdma_1: no IPv4 GID for 192.168.11.37 among")
    assert "erdma_0" not in verdict.reason
    assert judge_erdma_gid("n1", tables, ["erdma_0", "erdma_1"], {}, addresses)


TWO_NODES = """\
cluster: {name: c1, region: cn-lab}
ssh: {user: root}
nodes:
  - {name: n1, host: 192.168.10.21}
  - {name: n2, host: 192.168.10.22}
benchmarks: {perftest: {schedule: ring, duration_s: 1}}
"""


class Recording:
    """A transport that records every command and answers each with exit status 0."""

    concurrency = 4

    def __init__(self) -> None:
        self.commands: list[tuple[str, str]] = []

    def unreachable(self) -> dict[str, str]:
        return {}

    def run_on_all(self, command, nodes=None, timeout_s=None, together=False):
        out = {}
        for name in nodes or []:
            node = next(n for n in self.inventory.nodes if n.name == name)
            text = command(node)
            self.commands.append((name, text))
            out[name] = CommandResult(name, text, 0, "", "", 0.1, 0.0)
        return out


def test_perftest_client_of_each_eri_targets_that_eris_server_address(tmp_path):
    path = tmp_path / "inv.yaml"
    path.write_text(TWO_NODES)
    inventory = load_inventory(path)
    transport = Recording()
    transport.inventory = inventory
    facts = FactsCampaign(inventory, transport)
    for name, last in (("n1", "21"), ("n2", "22")):
        own = {"10.21": f"10.{last}", "11.37": f"11.{last}"}
        sections = {"addr": ADDR, "rdma_link": LINK, "erdma_identity": IDENT}
        sections["ibv_devinfo_v"] = DEVINFO
        for old, new in own.items():
            sections = {
                k: v.replace(f"192.168.{old}", f"192.168.{new}") for k, v in sections.items()
            }
        result = CommandResult(name, "facts", 0, "", "", 0.1, 0.0)
        facts._facts[name] = NodeFacts(
            name, result, {k: SectionOutput(v, 0) for k, v in sections.items()}
        )
    from pytest_hpcnet.campaigns.perftest.campaign import PerftestCampaigns

    PerftestCampaigns(facts).campaign("ib_write_bw")
    clients = [c for _, c in transport.commands if c.startswith("timeout") or " ib_write_bw " in c]
    clients = [c for c in clients if c.rstrip().endswith(("22", "21"))]
    on_eri1 = [c for c in clients if "-d erdma_1" in c]
    assert on_eri1, transport.commands
    assert all(c.rstrip().endswith(("192.168.11.22", "192.168.11.21")) for c in on_eri1), on_eri1
    assert all("-x 1" in c for c in on_eri1), on_eri1
    on_eri0 = [c for c in clients if "-d erdma_0" in c]
    assert on_eri0 and all(c.rstrip().endswith(("192.168.10.22", "192.168.10.21")) for c in on_eri0)


def _two_node_facts(tmp_path, transport) -> FactsCampaign:
    path = tmp_path / "inv.yaml"
    path.write_text(TWO_NODES)
    inventory = load_inventory(path)
    transport.inventory = inventory
    facts = FactsCampaign(inventory, transport)
    for name, last in (("n1", "21"), ("n2", "22")):
        sections = {"addr": ADDR, "rdma_link": LINK, "erdma_identity": IDENT}
        sections["ibv_devinfo_v"] = DEVINFO
        for old, new in (("10.21", f"10.{last}"), ("11.37", f"11.{last}")):
            sections = {
                k: v.replace(f"192.168.{old}", f"192.168.{new}") for k, v in sections.items()
            }
        result = CommandResult(name, "facts", 0, "", "", 0.1, 0.0)
        facts._facts[name] = NodeFacts(
            name, result, {k: SectionOutput(v, 0) for k, v in sections.items()}
        )
    return facts


def test_path_mtu_per_eri_pings_the_partners_eth1_from_eth1(tmp_path):
    from pytest_hpcnet.campaigns.eri_paths import EriPathCampaign, eri_paths

    transport = Recording()
    facts = _two_node_facts(tmp_path, transport)
    (path,) = eri_paths(facts, "n1", "n2")  # erdma_0 is on eth0: the data-plane ping's
    assert (path.device, path.netdev, path.target_address) == ("erdma_1", "eth1", "192.168.11.22")
    found = EriPathCampaign(facts, lambda: [("n1", "n2"), ("n2", "n1")]).pair("n1", "n2")
    assert [f.path.device for f in found] == ["erdma_1"]
    (sent,) = [c for n, c in transport.commands if n == "n1"]
    assert "-I eth1 192.168.11.22" in sent and "-M do" in sent
    assert not found[0].result.received  # the fake printed nothing: no reply, never a pass


def test_no_per_eri_probe_where_every_eri_is_on_the_data_interface(tmp_path):
    from pytest_hpcnet.campaigns.eri_paths import EriPathCampaign

    transport = Recording()
    facts = _two_node_facts(tmp_path, transport)
    one = LINK.replace("netdev eth1", "netdev eth0")
    for name in ("n1", "n2"):
        sections = dict(facts._facts[name].sections)
        sections["rdma_link"] = SectionOutput(one, 0)
        facts._facts[name] = NodeFacts(name, facts._facts[name].result, sections)
    assert EriPathCampaign(facts, lambda: [("n1", "n2")]).pair("n1", "n2") == []
    assert transport.commands == []


def _gid_verdict(c: FactsCampaign):
    eris = c.eri_devices("n1")
    tables = parse_gid_tables(DEVINFO)
    addresses = {d: c.eri_address("n1", d) for d in eris}
    return judge_erdma_gid("n1", tables, eris, {}, addresses)


@pytest.mark.parametrize("status", [None, 124, "absent"], ids=["cut short", "timed out", "absent"])
def test_a_cut_address_listing_leaves_the_gid_check_not_measured_never_failed(tmp_path, status):
    """A cut `ip addr` section shows no address for eth1: not "no IPv4 address" (which the
    gate would drain on), but not measured, naming the ERI and the section."""
    sections = {"rdma_link": LINK, "erdma_identity": IDENT, "ibv_devinfo_v": DEVINFO}
    c = campaign(tmp_path, sections)
    if status != "absent":
        found = dict(c._facts["n1"].sections)
        found["addr"] = SectionOutput(ADDR[: ADDR.index('"eth1"')], status)
        c._facts["n1"] = NodeFacts("n1", c._facts["n1"].result, found)
    assert c.eri_address("n1", "erdma_1").address is None
    assert c.eri_address("n1", "erdma_1").unread
    verdict = _gid_verdict(c)
    assert verdict.outcome == "not_measured", verdict.reason
    assert "n1 erdma_1" in verdict.reason and "'addr'" in verdict.reason
    assert "no IPv4 address" not in verdict.reason


def test_only_a_whole_address_listing_without_the_ipv4_fails_the_gid_check(tmp_path):
    whole = json.loads(ADDR)
    for iface in whole:
        if iface["ifname"] == "eth1":
            iface["addr_info"] = [a for a in iface["addr_info"] if a["family"] != "inet"]
    sections = {"rdma_link": LINK, "erdma_identity": IDENT, "ibv_devinfo_v": DEVINFO}
    c = campaign(tmp_path, {**sections, "addr": json.dumps(whole)})
    assert not c.eri_address("n1", "erdma_1").unread
    verdict = _gid_verdict(c)
    assert verdict.outcome == "fail"
    assert verdict.reason == "n1 erdma_1: netdev eth1 (rdma link), no IPv4 address"


def test_a_gid_failure_beside_an_unread_address_fails_and_names_both():
    tables = parse_gid_tables(DEVINFO)
    addresses = {
        "erdma_0": EriAddress("erdma_0", "eth0", None, "rdma link", unread="'addr' cut short"),
        "erdma_1": EriAddress("erdma_1", "eth1", None, "rdma link"),
    }
    verdict = judge_erdma_gid("n1", tables, ["erdma_0", "erdma_1"], {}, addresses)
    assert verdict.outcome == "fail"
    assert verdict.reason.startswith("n1 erdma_1: netdev eth1 (rdma link), no IPv4 address")
    assert "not measured: n1 erdma_0: netdev eth0 (rdma link), address unknown" in verdict.reason


def test_an_unparseable_or_toolless_address_listing_is_unread_not_addressless():
    netdevs = {"erdma_1": ("eth1", "rdma link")}
    cut = eri_address("erdma_1", netdevs, parse_interfaces(ADDR[:600]), "eth0")
    assert cut.address is None and cut.unread.startswith("ip addr unreadable: invalid JSON")
    gone = eri_address("erdma_1", netdevs, parse_interfaces("hpcnet: ip not found\n"), "eth0")
    assert gone.unread == "ip (iproute2) not installed"
    assert eri_address("erdma_1", netdevs, None, "eth0", "'addr' cut").unread == "'addr' cut"
    assert not eri_address("erdma_1", netdevs, parse_interfaces(ADDR), "eth0").unread
