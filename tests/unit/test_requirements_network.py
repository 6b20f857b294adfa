"""The network judges (requirements/network.py) on recorded outputs: reachability, placement,
required ports and ACL flows; each a pass, a failure and what was not measured."""

from __future__ import annotations

import pytest

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.metadata import MetadataFacts, parse_metadata
from pytest_hpcnet.probes.ports import parse_connect, parse_listener
from pytest_hpcnet.requirements.network import (
    group_by_value,
    judge_acl_flow,
    judge_placement,
    judge_reachability,
    judge_required_ports,
)

LISTENING = "READY tcp:5000,5001,7000 udp:6000,6001,6002\n"


def expect(**keys) -> Expectations:
    return Expectations.model_validate(keys)


def _facts(**by_node: str | None) -> dict[str, MetadataFacts]:
    out = {}
    for node, value in by_node.items():
        if value is None:
            out[node] = MetadataFacts(missing=(("vswitch-id", "http 404"),))
        else:
            out[node] = MetadataFacts(vswitch_id=value, values=(("vswitch-id", value),))
    return out


# -- reachability ---------------------------------------------------------------------------


def test_reachability_measures_what_the_node_says(fixture_text):
    placement = parse_metadata(fixture_text("metadata", "token-all-keys.txt"))
    verdict = judge_reachability("node01", "5.15.0-105-generic", placement)
    assert verdict.ok
    shown = {m.name: m.value for m in verdict.measurements}
    assert shown["hostname"] == "node01" and shown["instance_type"] == "ecs.ebmgn8v.48xlarge"
    assert judge_reachability("node01", "5.15.0", None).ok
    silent = judge_reachability("", "5.15.0", None)
    assert silent.outcome == "fail"
    assert silent.reason == "answered over SSH but reported no hostname"


# -- placement ------------------------------------------------------------------------------


def test_grouping_with_expected_id():
    g = group_by_value(
        _facts(n1="vsw-a", n2="vsw-a", n3="vsw-b", n4=None), "vswitch-id", expected="vsw-b"
    )
    assert [(x.value, x.nodes) for x in g.groups] == [("vsw-a", ("n1", "n2")), ("vsw-b", ("n3",))]
    assert g.odd == ("n1", "n2")
    assert g.undetermined == (("n4", "http 404"),)
    assert g.findings == ("vswitch-id is vsw-a on n1, n2; the inventory expects vsw-b",)
    assert not g.consistent


def test_grouping_without_expectation_reports_every_group():
    g = group_by_value(_facts(n1="vsw-a", n2="vsw-a", n3="vsw-b"), "vswitch-id")
    assert g.odd == ()  # no majority is taken to be right
    assert g.findings == ("vswitch-id differs between nodes: vsw-a on n1, n2; vsw-b on n3",)
    assert group_by_value(_facts(n1="vsw-a", n2="vsw-a"), "vswitch-id").consistent


def test_placement_that_differs_fails_naming_nodes_and_values():
    verdict = judge_placement(
        _facts(n1="vsw-a", n2="vsw-a", n3="vsw-b", n4=None),
        "vswitch-id",
        expect(placement={"vswitch_id": "vsw-b"}),
    )
    assert verdict.outcome == "fail" and verdict.reason == (
        "vswitch-id is vsw-a on n1, n2; the inventory expects vsw-b; "
        "vswitch-id on n4: cannot determine (http 404)"
    )
    assert verdict.extra["suspects"] == ["n1", "n2", "n4"]
    groups = [(m.value, m.subject, m.bound, m.source) for m in verdict.measurements]
    assert groups == [
        ("vsw-a", "n1, n2", "vsw-b", "expect.placement.vswitch_id"),
        ("vsw-b", "n3", "vsw-b", "expect.placement.vswitch_id"),
    ]
    majority = judge_placement(_facts(n1="vsw-a", n2="vsw-a", n3="vsw-b"), "vswitch-id", expect())
    assert majority.outcome == "fail" and majority.extra["suspects"] == ["n3"]


def test_placement_unread_is_not_measured_agreement_passes(fixture_text):
    old = parse_metadata(fixture_text("metadata", "old-version-no-vswitch.txt"))
    good = parse_metadata(fixture_text("metadata", "token-all-keys.txt"))
    unread = judge_placement({"n1": good, "n2": old}, "vswitch-id", expect())
    assert unread.outcome == "not_measured"
    assert unread.reason == (
        "vswitch-id on n2: cannot determine (http 404 (key unknown to this metadata version))"
    )
    down = parse_metadata(fixture_text("metadata", "unreachable.txt"))
    assert judge_placement({"n1": down}, "zone-id", expect()).outcome == "not_measured"
    assert judge_placement({}, "zone-id", expect()).outcome == "not_measured"
    agree = judge_placement({"n1": good, "n2": good}, "zone-id", expect())
    assert agree.ok and [m.subject for m in agree.measurements] == ["n1, n2"]


# -- required ports -------------------------------------------------------------------------


def ports(tcp: list[str], udp: list[str]) -> Expectations:
    return expect(ports={"tcp": tcp, "udp": udp})


def test_required_ports_closed_fail_each_closed_flow_measured(fixture_text):
    found = parse_connect(fixture_text("ports", "connect-mixed.txt"))
    verdict = judge_required_ports(
        found, parse_listener(LISTENING), ports(["22", "5000-5001", "7000"], ["6000-6002"])
    )
    assert verdict.outcome == "fail"
    assert verdict.reason.startswith("tcp/5000 refused (answered with a reset")
    assert "tcp/5001 silently dropped" in verdict.reason
    assert "tcp/7000 failed to connect (No route to host)" in verdict.reason
    assert "security group" in verdict.fix
    first, *per_flow = verdict.measurements
    assert (first.name, first.value, first.bound, first.comparison) == ("open_ports", 2, 7, ">=")
    assert [(m.subject, m.value) for m in per_flow] == [
        ("tcp/5000", "refused"),
        ("tcp/5001", "timeout"),
        ("tcp/7000", "error"),
        ("udp/6001", "refused"),
        ("udp/6002", "timeout"),
    ]


def test_required_ports_not_tried_or_not_listened_are_not_measured(fixture_text):
    cut = parse_connect(fixture_text("ports", "connect-truncated.txt"))
    verdict = judge_required_ports(cut, parse_listener(LISTENING), ports(["22", "5000"], []))
    assert verdict.outcome == "not_measured" and verdict.reason.startswith("tcp/5000 not tried")
    refused = parse_connect("tcp 80 refused\nDONE 1\n")
    busy = parse_listener(fixture_text("ports", "listener-busy.txt"))  # FAILED tcp:80
    unbound = judge_required_ports(refused, busy, ports(["80"], []))
    assert unbound.outcome == "not_measured"
    assert unbound.reason == "tcp/80 could not be listened on at the target"
    missing = parse_connect("hpcnet: python3 not found")
    assert judge_required_ports(missing, busy, ports(["22"], [])).outcome == "not_measured"
    assert judge_required_ports(cut, busy, ports([], [])).outcome == "not_applicable"


def test_required_ports_open_pass(fixture_text):
    found = parse_connect(fixture_text("ports", "connect-mixed.txt"))
    busy = parse_listener(fixture_text("ports", "listener-busy.txt"))  # sshd holds 22
    verdict = judge_required_ports(found, busy, ports(["22"], ["6000"]))
    assert verdict.ok and verdict.reason == "2 ports open"


# -- ACL flows ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "line", "listening", "outcome"),
    [
        ("allow", "tcp 5000 open", True, "pass"),
        ("allow", "tcp 5000 timeout", True, "fail"),
        ("allow", "tcp 5000 refused", True, "fail"),
        ("allow", "tcp 5000 refused", False, "not_measured"),
        ("allow", "tcp 5000 error:No route to host", True, "fail"),
        ("deny", "tcp 5000 open", True, "fail"),
        ("deny", "tcp 5000 timeout", False, "pass"),
        ("deny", "tcp 5000 refused", True, "pass"),
        ("deny", "tcp 5000 refused", False, "not_measured"),
        ("deny", "tcp 5000 error:Cannot assign requested address", True, "not_measured"),
    ],
)
def test_acl_flow(kind, line, listening, outcome):
    listener = parse_listener("READY tcp:5000 udp:\n" if listening else "READY tcp: udp:\n")
    verdict = judge_acl_flow(kind, "tcp", 5000, parse_connect(line + "\nDONE 1\n"), listener)
    assert verdict.outcome == outcome, verdict.reason
    (measured,) = [m for m in verdict.measurements if m.name != "judge"]
    assert measured.value == line.split()[2].split(":")[0]
    assert measured.source == f"expect.flows.{kind}"


def test_acl_flow_not_tried_is_not_measured():
    assert judge_acl_flow("deny", "udp", 4791, None, None).outcome == "not_measured"
    other = parse_connect("tcp 22 open\nDONE 1\n")
    verdict = judge_acl_flow("allow", "udp", 4791, other, None)
    assert verdict.outcome == "not_measured" and verdict.reason.startswith("no result")
    deny = judge_acl_flow("deny", "tcp", 22, other, None)
    assert deny.reason == "must-deny flow connected: the ACL lets it through"
