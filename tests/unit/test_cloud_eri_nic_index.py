"""ERIs and their NIC indexes from the fake ECS API (DescribeNetworkInterfaces
`Attachment.NetworkCardIndex`): the `erdma_nic_index` check per node on an ebmgn7ex profile
(two ERIs on distinct NIC indexes, source S1), and the indexes it hands to the
all-ERIs-at-once bandwidth check."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("alibabacloud_ecs20140526")
pytest.importorskip("alibabacloud_vpc20160428")


from pytest_hpcnet.cloud import audit
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.lab.cloud_api import CloudWorld, instance_item, network_interface_item
from pytest_hpcnet.requirements.erdma import judge_instance_bw
from pytest_hpcnet.suites import test_cloud_audit as suite
from tests.recorded import Recorded as BaseRecorded
from tests.unit.test_cloud_scenarios import gather

REGION = "cn-hangzhou"
TYPE = "ecs.ebmgn7ex.32xlarge"
NODES = ("gpu1", "gpu2", "gpu3")
EBMGN7EX = Expectations(
    erdma={
        "eris": 2,
        "per_eri_gbps": 80,
        "per_instance_gbps": 160,
        "same_nic_index_gbps": 100,
        "bw_fraction": 0.8,
    }
)


def world() -> CloudWorld:
    """Three ebmgn7ex instances with two ERIs each; gpu2's both sit on NIC index 0."""
    w = CloudWorld(region_id=REGION)
    w.eri = {TYPE: 2}
    for n, name in enumerate(NODES, start=1):
        w.instances.append(instance_item(f"i-{name}", TYPE, f"10.0.1.{n}", ["sg-gpu"]))
        for k in (0, 1):
            w.network_interfaces.append(
                network_interface_item(
                    f"eni-{name}-eri{k}",
                    f"i-{name}",
                    f"10.0.1.{100 + 10 * n + k}",
                    ["sg-gpu"],
                    traffic_mode="HighPerformance",
                    network_card_index=0 if name == "gpu2" else k,
                )
            )
    w.add_group("sg-gpu", [])
    return w


@pytest.fixture(scope="module")
def plane() -> audit.ControlPlane:
    locators = [
        audit.NodeLocator(name, f"i-{name}", f"10.0.1.{n}", "vpc-1")
        for n, name in enumerate(NODES, start=1)
    ]
    return gather(world(), locators)


class Recorded(BaseRecorded):
    """`Recorded` that keeps the suspects it is given."""

    def __init__(self) -> None:
        super().__init__("erdma_nic_index", "n")
        self.suspects: list[str] = []

    def suspect(self, *nodes: str) -> None:
        self.suspects.extend(nodes)


def run_check(plane: audit.ControlPlane, name: str, expect: Expectations = EBMGN7EX):
    """The suite's erdma_nic_index test on one node, with the snapshot as its `cloud`."""
    cluster = SimpleNamespace(expect=expect)
    read = SimpleNamespace(plane=plane, reason="")  # the `cloud` fixture's
    request = SimpleNamespace(getfixturevalue=lambda fixture: read)
    check = Recorded()
    suite.test_eris_attached_on_distinct_nic_indexes(
        cluster, SimpleNamespace(name=name), request, check
    )
    return check


def test_nic_indexes_are_read_from_the_attachment(plane):
    assert audit.eri_attachments(plane, "gpu1") == [("eni-gpu1-eri0", 0), ("eni-gpu1-eri1", 1)]
    assert audit.eri_nic_indexes(plane) == {"gpu1": (0, 1), "gpu2": (0, 0), "gpu3": (0, 1)}


def test_the_node_with_both_eris_on_one_index_fails_and_the_others_pass(plane):
    for name in ("gpu1", "gpu3"):
        assert run_check(plane, name).measured == {"eris": 2, "nic_indexes": 2}
    with pytest.raises(AssertionError) as failed:
        run_check(plane, "gpu2")
    message = str(failed.value).splitlines()[0]
    assert message == (
        "gpu2: ERIs eni-gpu2-eri0, eni-gpu2-eri1 share NIC index 0: the instance is capped at "
        "100 Gbit/s instead of 160 (source S1); attach one with another "
        "NetworkCardIndex (AttachNetworkInterface)"
    )


def test_no_eri_count_expected_is_not_applicable(plane):
    with pytest.raises(pytest.skip.Exception, match="not applicable"):
        run_check(plane, "gpu2", Expectations())


def test_audited_indexes_set_the_instance_figure(plane):
    indexes = audit.eri_nic_indexes(plane)
    both = ["erdma_0", "erdma_1"]
    at_cap = {"erdma_0": 45.0, "erdma_1": 45.0}  # 90 Gbit/s
    assert judge_instance_bw("gpu2", at_cap, both, EBMGN7EX, indexes["gpu2"])  # 80% of 100
    assert not judge_instance_bw("gpu1", at_cap, both, EBMGN7EX, indexes["gpu1"])  # of 160
