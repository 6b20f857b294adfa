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

from pytest_hpcnet.campaigns.pairs import required_flows
from pytest_hpcnet.cloud import audit
from pytest_hpcnet.requirements import cloud as cloud_judges
from pytest_hpcnet.requirements.erdma import judge_eri_nic_indexes
from pytest_hpcnet.requirements.registry import mark
from pytest_hpcnet.requirements.verdict import NotMeasured

pytestmark = [
    pytest.mark.static,
    pytest.mark.audit,
    mark("cloud_audit"),
]


@pytest.fixture(scope="session")
def cloud(cloud_plane) -> audit.ControlPlane | str:
    """The session's control plane (read once, `cloud_plane`), or the one-line reason it
    could not be read; the whole audit is skipped where it cannot run."""
    if cloud_plane.skipped:
        pytest.skip(cloud_plane.reason)
    return cloud_plane.plane if cloud_plane.plane is not None else cloud_plane.reason


def readable(cloud) -> audit.ControlPlane:
    """The snapshot; a read error (e.g. the missing RAM action) is not measured, never a
    failure a waiver could cover."""
    if isinstance(cloud, str):
        raise NotMeasured(cloud)
    return cloud


def known(problem: str | None) -> None:
    """A fact the control plane could not tell (an undetermined rule, an unread interface)
    is not measured."""
    if problem:
        raise NotMeasured(problem)


def test_required_ports_accepted_by_control_plane(cluster, node_pair, cloud, check):
    plane = readable(cloud)
    source, target = node_pair
    required = cluster.expect.cloud.required_flows
    verdicts = audit.required_verdicts(plane, source, target, required)
    failures = audit.not_accepted(v for v in verdicts if v.unknown is None)
    undetermined = [str(v) for v in verdicts if v.unknown is not None]
    check.suspect(*([target.name] if failures else []))
    source_key = "expect.cloud.required_flows"
    check.judge(
        cloud_judges.judge_flows_accepted(failures, undetermined, len(required), source_key)
    )


def test_control_plane_agrees_with_data_plane(cluster, node_pair, cloud, check):
    plane = readable(cloud)
    source, target = node_pair
    known("; ".join(plane.gaps(source.name, target.name)))
    facts = cluster.pair_facts(source, target, check)
    addresses = (cluster.data_address(source.name), cluster.data_address(target.name))
    disagreements = [
        found
        for flow in required_flows(cluster.expect)
        if (
            found := audit.cross_check(
                audit.port_decision(plane, source, target, flow.proto, flow.port),
                facts.ports.get(flow.proto, flow.port),
                facts.listener.listening(flow.proto, flow.port),
                addresses=addresses,
            )
        )
    ]
    check.judge(cloud_judges.judge_planes_agree(disagreements))


def test_listed_flows_enforced_by_control_plane(acl_flow, cloud, check):
    plane = readable(cloud)
    kind, flow = acl_flow
    decision = audit.flow_decision(plane, flow)
    known(f"{kind} flow {decision}" if decision.unknown is not None else None)
    check.judge(
        cloud_judges.judge_listed_flow(kind, decision.accepted, decision.all_denied, str(decision))
    )


def test_external_flows_enforced_by_control_plane(cluster, cloud, check):
    flows = cluster.inventory.cloud.external_flows
    if not flows:
        pytest.skip(
            "not applicable: no cloud.external_flows declared (bastion, monitoring, CPFS mounts)"
        )
    plane = readable(cloud)
    failures = []
    for flow in flows:
        verdict = audit.external_verdict(plane, flow)
        if flow.expect == "allow" and not verdict.accepted:
            failures.append(f"must-allow {flow.name} flow {verdict}")
        elif flow.expect == "deny" and not verdict.all_denied:
            failures.append(f"must-deny {flow.name} flow {verdict}")
    check.judge(cloud_judges.judge_external_flows(failures, len(flows)))


def test_instance_type_supports_erdma(cluster, node, cloud, check):
    plane = readable(cloud)
    minimum = node.rdma.min_devices
    if minimum is None:
        minimum = cluster.expect.rdma.min_devices
    if minimum == 0:
        pytest.skip(f"not applicable: {node.name}: no eRDMA expected (rdma.min_devices is 0)")
    eri = audit.eri_supported(plane, node)
    known(eri.problem)
    check.judge(
        cloud_judges.judge_eri_supported(
            node.name, eri.instance_type, eri.quantity, eri.supported, minimum
        )
    )


@mark("erdma_nic_index")
def test_eris_attached_on_distinct_nic_indexes(cluster, node, request, check):
    """The instance has `expect.erdma.eris` ERIs and, where the profile publishes the
    one-NIC-index cap (`same_nic_index_gbps`, ebmgn7ex: source S1), each on its own
    NIC index (DescribeNetworkInterfaces `Attachment.NetworkCardIndex`)."""
    wanted = cluster.expect.erdma.eris
    if wanted is None:
        pytest.skip("not applicable: no ERI count expected (expect.erdma.eris is null)")
    plane = readable(request.getfixturevalue("cloud"))
    known(plane.node(node.name).problem)
    eris = audit.eri_attachments(plane, node.name)
    check.measure("eris", len(eris), "interfaces", wanted, ">=", "expect.erdma.eris")
    cap = cluster.expect.erdma.same_nic_index_gbps
    if cap is not None:
        indexes = len({i for _, i in eris if i is not None})
        check.measure("nic_indexes", indexes, "", min(wanted, 2), ">=", "source S1")
    verdict = judge_eri_nic_indexes(node.name, eris, cluster.expect)
    check.suspect(*([] if verdict else [node.name]))
    check.judge(verdict)
