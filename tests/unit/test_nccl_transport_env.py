"""NCCL's environment for the transport check (campaigns/nccl/campaign.py): INFO logging always,
every ERI in NCCL_IB_HCA, the GID index chosen per device or NCCL's IPv4 selection."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_hpcnet.campaigns.nccl.campaign import NcclCampaign
from pytest_hpcnet.inventory.bench_settings import BenchmarkSettings
from pytest_hpcnet.inventory.expectations import Expectations


def campaign(gids: dict[tuple[str, str], int | None], env=None, gdr=None) -> NcclCampaign:
    devices: dict[str, list[str]] = {}
    for node, dev in gids:
        devices.setdefault(node, []).append(dev)
    inventory = SimpleNamespace(
        expect=Expectations(erdma={"gdr": gdr}),
        benchmarks=BenchmarkSettings(nccl={"env": env or {}}),
    )
    facts = SimpleNamespace(
        inventory=inventory,
        listed_eris=lambda node: devices.get(node, []),
        gid_index=lambda node, dev: gids[(node, dev)],
    )
    return NcclCampaign(facts)


NODES = [SimpleNamespace(name="n1", interface="eth0"), SimpleNamespace(name="n2", interface="eth0")]


def test_one_gid_index_everywhere_is_passed_as_is():
    c = campaign({("n1", "erdma_0"): 1, ("n1", "erdma_1"): 1, ("n2", "erdma_0"): 1})
    env = c.env(NODES)
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert env["NCCL_IB_HCA"] == "erdma_0,erdma_1" and env["NCCL_IB_GID_INDEX"] == "1"
    assert "NCCL_NET_GDR_LEVEL" not in env


def test_gid_index_differing_per_device_lets_nccl_pick_the_ipv4_one():
    c = campaign({("n1", "erdma_0"): 2, ("n1", "erdma_1"): 1, ("n2", "erdma_0"): 1}, gdr=True)
    env = c.env(NODES)
    assert env["NCCL_IB_GID_INDEX"] == "-1" and env["NCCL_IB_ADDR_FAMILY"] == "AF_INET"
    assert env["NCCL_IB_ROCE_VERSION_NUM"] == "2" and env["NCCL_NET_GDR_LEVEL"] == "SYS"


def test_inventory_env_wins_but_logging_stays_at_info():
    env_in = {"NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "=erdma_0"}
    c = campaign({("n1", "erdma_0"): 1, ("n1", "erdma_1"): 1}, env=env_in)
    env = c.env(NODES)
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_IB_HCA"] == "=erdma_0"
    assert c.ib_devices("n1") == ["erdma_0"]  # the traffic check follows the pinned HCA
