"""eRDMA facts (campaigns/facts.py): which devices perftest and NCCL use on a node, and
the GID index each gets, from the one facts round trip."""

from __future__ import annotations

import re

import pytest

from pytest_hpcnet.campaigns.fact_sections import SECTIONS, facts_command
from pytest_hpcnet.campaigns.facts import FactsCampaign, MissingMeasurement, NodeFacts
from pytest_hpcnet.inventory.expectations import Expectations, load_profile
from pytest_hpcnet.inventory.loader import load_inventory
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.sections import SectionOutput
from pytest_hpcnet.transport.fanout import CommandResult

INVENTORY = """\
cluster: {name: c1, region: cn-lab}
ssh: {user: root}
nodes:
  - {name: n1, host: 198.18.0.11}
  - {name: n2, host: 198.18.0.12, rdma: {gid_index: 3}}
  - {name: n3, host: 198.18.0.13, rdma: {device_glob: "mlx5*"}}
"""
ADDR = '[{"ifname": "eth0", "mtu": 8500, "addr_info": [{"family": "inet", "local": "%s"}]}]'


def facts(tmp_path, sections: dict[str, dict[str, str]]) -> FactsCampaign:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY)
    campaign = FactsCampaign(load_inventory(path), transport=None)
    for node, found in sections.items():
        result = CommandResult(node, "facts", 0, "", "", 0.1, 0.0)
        campaign._facts[node] = NodeFacts(
            node, result, {k: SectionOutput(v, 0) for k, v in found.items()}
        )
    return campaign


def devinfo_v(device: str, address: str) -> str:
    return (
        f"hca_id:\t{device}\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
        f"\t\t\tGID[  0]:\t\tfe80::216:3eff:fe00:1\n"
        f"\t\t\tGID[  1]:\t\t2001:db8::1\n\t\t\tGID[  2]:\t\t::ffff:{address}\n\n"
    )


def test_the_sections_join_the_one_round_trip():
    names = [s.name for s in SECTIONS]
    assert {"erdma_identity", "ibv_devinfo_v", "erdma_driver"} <= set(names)
    assert "ibv_devinfo" not in names  # the plain call's devices come from `-v` too
    assert len(names) == len(set(names))


INVOKED = re.compile(r"(?:^|[;&|(]|\b(?:then|else|do)\b)\s*(ibv_devinfo\b[^;|)]*)", re.M)
"""`ibv_devinfo` where the shell runs it (not `command -v ibv_devinfo` nor an echoed name)."""


@pytest.mark.parametrize("profile", [None, "ebmgn8is"])
def test_the_facts_script_runs_ibv_devinfo_once(profile):
    expect = Expectations.model_validate(load_profile(profile)) if profile else Expectations()
    script = facts_command(Node(name="n1", host="198.18.0.11"), expect)
    assert [call.strip() for call in INVOKED.findall(script)] == ["ibv_devinfo -v 2>&1"]


def test_devices_by_driver_and_gid_per_device(tmp_path):
    ident = (
        "dev=rocep26s0 driver=erdma vendor=0x1ded device=0x107f numa=0 netdev=eth0\n"
        "dev=erdma_1 driver=erdma vendor=0x1ded device=0x107f numa=1 netdev=eth0\n"
        "dev=mlx5_0 driver=mlx5_core vendor=0x15b3 device=0x1017 numa=0 netdev=eth1\n"
    )
    mlx = "dev=mlx5_0 driver=mlx5_core vendor=0x15b3 device=0x1017 numa=0 netdev=eth1\n"
    c = facts(
        tmp_path,
        {
            "n1": {
                "erdma_identity": ident,
                "addr": ADDR % "198.18.0.11",
                "ibv_devinfo_v": devinfo_v("erdma_1", "198.18.0.11"),
            },
            "n2": {"erdma_identity": ident},
            "n3": {"erdma_identity": mlx, "ibv_devinfo_v": "hca_id:\tmlx5_0\n\t\tport:\t1\n"},
        },
    )
    assert c.eri_devices("n1") == ["erdma_1", "rocep26s0"]  # by driver, not by name
    assert c.eri_devices("n3") == ["mlx5_0"]  # no eRDMA device: the node's glob decides
    assert c.gid_index("n1", "erdma_1") == 2  # the IPv4 GID, after an extra IPv6 one
    assert c.gid_index("n2", "erdma_1") == 3  # pinned by the inventory
    assert c.gid_index("n1", "rocep26s0") is None  # not in the table: none chosen


@pytest.mark.parametrize("status", [None, 124], ids=["cut short", "timed out"])
def test_a_section_cut_short_or_timed_out_is_read_as_missing(tmp_path, status):
    """A partial `ibv_devinfo -v` or sysfs listing would name only the devices printed
    before the cut: the accessors read it as not given, as `NodeFacts.text` does."""
    c = facts(tmp_path, {"n1": {}})
    whole = {
        "erdma_identity": "dev=erdma_0 driver=erdma vendor=0x1ded device=0x107f numa=0 "
        "netdev=eth0\n",
        "ibv_devinfo_v": devinfo_v("erdma_0", "198.18.0.11"),
        "addr": ADDR % "198.18.0.11",
        "metadata": "instance-id=i-1\n",
    }
    sections = {k: SectionOutput(v, status) for k, v in whole.items()}
    c._facts["n1"] = NodeFacts("n1", CommandResult("n1", "facts", 0, "", "", 0.1, 0.0), sections)
    with pytest.raises(MissingMeasurement, match="n1: neither sysfs nor `ibv_devinfo -v`"):
        c.eri_devices("n1")  # unknown ERIs are not "no ERI"
    assert c.listed_eris("n1") == []  # the campaigns measure none there
    assert c.identities("n1") is None and c.gid_tables("n1") is None
    assert c.rdma_device("n1") is None and c.data_address("n1") is None
    assert c.placement() == {}
    assert c._facts["n1"].whole("addr") is None
