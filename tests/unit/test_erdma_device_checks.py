"""The static eRDMA device checks (suites/test_erdma.py) read the node's `ibv_devinfo -v`
section, and fail closed on it: tool missing, no device, output cut short."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_hpcnet.campaigns.facts import MissingMeasurement, NodeFacts
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.sections import SectionOutput
from pytest_hpcnet.requirements.verdict import NotMeasured
from pytest_hpcnet.suites import test_erdma as suite
from pytest_hpcnet.transport.fanout import CommandResult
from tests.corpus import sample
from tests.recorded import Recorded as BaseRecorded

RDMA = Path(__file__).resolve().parents[1] / "fixtures" / "rdma"
NODE = Node(name="n1", host="198.18.0.11")
IRDMA = Expectations.model_validate({"rdma": {"device_glob": "irdma*"}})
"""A profile whose devices are the published E810's (`irdma1`)."""


class Recorded(BaseRecorded):
    """The check's recorder these tests read."""

    def __init__(self) -> None:
        super().__init__("erdma", NODE.name)


def cluster(sections: dict[str, str], expect: Expectations = IRDMA) -> SimpleNamespace:
    result = CommandResult(NODE.name, "facts", 0, "", "", 0.1, 0.0)
    facts = NodeFacts(NODE.name, result, {k: SectionOutput(v, 0) for k, v in sections.items()})
    return SimpleNamespace(expect=expect, facts=lambda node, check: facts)


def run(check_name: str, sections: dict[str, str], expect: Expectations = IRDMA) -> Recorded:
    check = Recorded()
    getattr(suite, check_name)(cluster(sections, expect), NODE, check)
    return check


VERBOSE = (RDMA / "published-irdma1-e810-v.txt").read_text()
LINK = "link irdma1/1 state ACTIVE physical_state LINK_UP netdev enp23s0f1\n"
"""The same host's `rdma link` line for irdma1 (published with the -v output)."""


def test_devices_and_ports_come_from_the_verbose_section():
    assert run("test_expected_rdma_devices_present", {"ibv_devinfo_v": VERBOSE}).measured == {
        "devices": 1
    }
    run("test_rdma_ports_active", {"ibv_devinfo_v": VERBOSE})
    run("test_rdma_tools_agree", {"ibv_devinfo_v": VERBOSE, "rdma_link": LINK})
    with pytest.raises(AssertionError, match="physical state LINK_UP, rdma link shows POLLING"):
        polling = LINK.replace("LINK_UP", "POLLING")
        run("test_rdma_tools_agree", {"ibv_devinfo_v": VERBOSE, "rdma_link": polling})


def test_a_node_without_the_verbose_section_fails_with_its_name():
    with pytest.raises(MissingMeasurement, match="facts lack section 'ibv_devinfo_v'"):
        run("test_expected_rdma_devices_present", {"ibv_devinfo": VERBOSE})


NO_DEVICES = sample("ibv_devinfo", "no-ib-devices-found-pib-2.txt").read_text()
"""The same for `-v`: devinfo.c prints "No IB devices found" before anything `-v` adds."""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hpcnet: ibv_devinfo not found\n", "n1: ibv_devinfo is not installed (fix: install"),
        (
            (RDMA / "real-irdma1-v-cut-in-device-attributes.txt").read_text(),
            "n1: ibv_devinfo output: irdma1: no port block (output cut short?)",
        ),
        (
            (RDMA / "real-irdma1-v-cut-in-state.txt").read_text(),
            "n1: ibv_devinfo output: irdma1: port 1 has no active_mtu, link layer",
        ),
        (
            (RDMA / "real-cx6dx-v-cut-after-link-layer.txt").read_text(),
            "n1: ibv_devinfo output: rocep61s0f1: port 1 has no active speed, physical state",
        ),
    ],
    ids=["tool missing", "cut before port", "cut in state", "cut after link_layer"],
)
def test_the_device_checks_fail_closed(text, message):
    for check in ("test_expected_rdma_devices_present", "test_rdma_ports_active"):
        with pytest.raises(NotMeasured) as failed:  # never a pass, never a waivable failure
            run(check, {"ibv_devinfo_v": text})
        assert str(failed.value).startswith(message)


def test_no_device_fails_both_device_checks():
    with pytest.raises(AssertionError) as failed:
        run("test_expected_rdma_devices_present", {"ibv_devinfo_v": NO_DEVICES})
    assert str(failed.value).startswith(
        "n1: 0 RDMA devices match 'irdma*', expected at least 1 "
        "(ibv_devinfo shows none: No IB devices found)"
    )
    with pytest.raises(AssertionError, match="no RDMA device matches 'irdma\\*'"):
        run("test_rdma_ports_active", {"ibv_devinfo_v": NO_DEVICES})
