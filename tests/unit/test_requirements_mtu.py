"""MTU judges: each interface (the ERIs' own too), the LL128 rule, agreement, the path."""

from __future__ import annotations

from pytest_hpcnet.probes.links import Interface
from pytest_hpcnet.probes.ping import PingResult
from pytest_hpcnet.requirements import mtu


def test_an_eri_interface_off_fails_naming_it_and_keeps_every_measurement():
    eth0, eth1 = Interface(name="eth0", mtu=8500), Interface(name="eth1", mtu=1500)
    verdict = mtu.judge_each_interface(
        "n2",
        eth0,
        "eth0",
        [("eth1 (erdma_1)", eth1)],
        lambda i: mtu.judge_interface_mtu(8500, i, "eth1 (erdma_1)" if i is eth1 else ""),
    )
    assert verdict.outcome == "fail"
    assert verdict.reason == "n2: eth1 (erdma_1): MTU 1500, expected 8500"
    assert [(m.name, m.value) for m in verdict.measurements] == [
        ("mtu", 8500),
        ("eth1 (erdma_1) mtu", 1500),
    ]


def test_an_unknown_mtu_is_not_measured_and_a_missing_interface_fails():
    unknown = mtu.judge_interface_mtu(8500, Interface(name="eth0"))
    assert unknown.outcome == "not_measured"
    missing = mtu.judge_each_interface("n1", None, "eth0", [], lambda i: mtu.passing())
    assert missing.outcome == "fail" and "'eth0' not found" in missing.reason


def test_nodes_that_disagree_name_the_ones_off_the_expected_mtu():
    verdict = mtu.judge_mtu_same({"n1": 8500, "n2": 1500, "n3": 8500}, 8500)
    assert not verdict and verdict.extra["suspects"] == ["n2"]
    assert mtu.judge_mtu_same({"n1": 8500}, 8500)
    assert mtu.judge_mtu_same({}, 8500).outcome == "not_measured"


def test_a_path_probe_that_could_not_run_is_not_measured():
    assert mtu.judge_path_mtu(PingResult(tool_missing=True), 8500).outcome == "not_measured"


def test_an_eri_not_measured_is_named_and_a_failure_beside_it_shows_both():
    eth0, eth1 = Interface(name="eth0", mtu=8500), Interface(name="eth1", mtu=1500)
    judge = lambda i: mtu.judge_interface_mtu(8500, i)  # noqa: E731
    why = [("erdma_2", "netdev unknown (listing cut)")]
    alone = mtu.judge_each_interface("n3", eth0, "eth0", [], judge, why)
    assert alone.outcome == "not_measured"
    assert alone.reason == "n3: erdma_2: netdev unknown (listing cut)"
    both = mtu.judge_each_interface("n3", eth0, "eth0", [("eth1 (erdma_1)", eth1)], judge, why)
    assert both.outcome == "fail"
    assert both.reason == (
        "n3: eth1 (erdma_1): MTU 1500, expected 8500; "
        "not measured: erdma_2: netdev unknown (listing cut)"
    )
