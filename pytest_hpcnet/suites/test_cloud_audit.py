"""Cloud control plane: the security groups and network ACLs the cloud holds let the required
flows through on every interface (ENIs and ERIs), agree with what the probes saw, enforce the
listed and external flows; types have eRDMA; each instance has its ERIs, on distinct NIC
indexes where the family's rate depends on it (ebmgn7ex). The control plane is read once per
session (the `cloud_plane` fixture), so the all-ERIs-at-once bandwidth check reads the same NIC
indexes whatever ran before it.

Every check asserts on "accepted" (or, for a must-deny flow, "denied everywhere"): a flow the
audit could not judge fails with what could not be read. Needs Alibaba Cloud credentials (the
default credential chain) and the read-only RAM actions in `pytest_hpcnet.cloud.audit.RAM_ACTIONS`
(docs/cloud-audit.md); without them the whole audit is skipped.
"""

from __future__ import annotations

import pytest

from pytest_hpcnet.campaigns.pairs.campaign import required_flows
from pytest_hpcnet.cloud import audit
from pytest_hpcnet.requirements import cloud as cloud_judges
from pytest_hpcnet.requirements.erdma import eri_count_expected, judge_eri_attachments
from pytest_hpcnet.requirements.registry import mark

pytestmark = [
    pytest.mark.static,
    pytest.mark.audit,
    mark("cloud_audit"),
]


@pytest.fixture(scope="session")
def cloud(cloud_plane):
    """The session's control plane read (once, `cloud_plane`): the snapshot, or why there
    is none; the whole audit is skipped where it cannot run (no verdict outcome says
    "skipped, in scope" yet)."""
    if cloud_plane.skipped:
        pytest.skip(cloud_plane.reason)
    return cloud_plane


def readable(cloud, check) -> audit.ControlPlane:
    """The snapshot; a read error (e.g. the missing RAM action) is not measured, never a
    failure a waiver could cover."""
    check.judge(cloud_judges.plane_read(cloud.plane, cloud.reason))
    return cloud.plane


def test_required_ports_accepted_by_control_plane(cluster, node_pair, cloud, check):
    plane = readable(cloud, check)
    source, target = node_pair
    required = cluster.expect.cloud.required_flows
    decisions = audit.required_verdicts(plane, source, target, required)
    verdict = cloud_judges.judge_required_flows(decisions, target.name, len(required))
    check.suspect(*verdict.extra["suspects"])
    check.judge(verdict)


def test_control_plane_agrees_with_data_plane(cluster, node_pair, cloud, check):
    plane = readable(cloud, check)
    source, target = node_pair
    check.judge(cloud_judges.all_known(plane.gaps(source.name, target.name)))
    facts = cluster.pair_facts(source, target, check)
    addresses = (cluster.data_address(source.name), cluster.data_address(target.name))
    found = [
        audit.cross_check(
            audit.port_decision(plane, source, target, flow.proto, flow.port),
            facts.ports.get(flow.proto, flow.port),
            facts.listener.listening(flow.proto, flow.port),
            addresses=addresses,
        )
        for flow in required_flows(cluster.expect)
    ]
    check.judge(cloud_judges.judge_planes_agree(found))


def test_listed_flows_enforced_by_control_plane(acl_flow, cloud, check):
    plane = readable(cloud, check)
    kind, flow = acl_flow
    check.judge(cloud_judges.judge_listed_decision(kind, audit.flow_decision(plane, flow)))


def test_external_flows_enforced_by_control_plane(cluster, cloud, check):
    flows = cluster.inventory.cloud.external_flows
    check.judge(cloud_judges.external_flows_declared(flows))
    plane = readable(cloud, check)
    decided = [(flow, audit.external_verdict(plane, flow)) for flow in flows]
    check.judge(cloud_judges.judge_external_decisions(decided))


def test_instance_type_supports_erdma(cluster, node, cloud, check):
    plane = readable(cloud, check)
    eri = audit.eri_supported(plane, node)
    node_min, expect_min = node.rdma.min_devices, cluster.expect.rdma.min_devices
    check.judge(cloud_judges.judge_instance_eri(node.name, eri, node_min, expect_min))


@mark("erdma_nic_index")
def test_eris_attached_on_distinct_nic_indexes(cluster, node, request, check):
    """The instance has `expect.erdma.eris` ERIs and, where the profile publishes the
    one-NIC-index cap (`same_nic_index_gbps`, ebmgn7ex: source S1), each on its own
    NIC index (DescribeNetworkInterfaces `Attachment.NetworkCardIndex`)."""
    expect = cluster.expect
    check.judge(eri_count_expected(expect))  # before the cloud is asked
    plane = readable(request.getfixturevalue("cloud"), check)
    problem = plane.node(node.name).problem
    eris = audit.eri_attachments(plane, node.name)
    verdict = judge_eri_attachments(node.name, problem, eris, expect)
    check.suspect(*verdict.extra.get("suspects", ()))
    check.judge(verdict)
