"""Judges of the cloud control-plane audit. The audit (`cloud/`) evaluates security groups
and network ACLs into decisions; these judges turn the decisions, given as plain lines and
flags, into the one `Verdict` (an undetermined rule is not measured, never a pass)."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    failing,
    not_measured,
    passing,
)


def judge_flows_accepted(
    failures: Sequence[str], undetermined: Sequence[str], total: int, source: str
) -> Verdict:
    """Every required flow is accepted by the control plane; a flow it rejects fails, a
    flow it cannot decide is not measured."""
    measured = (Measurement("accepted_flows", total - len(failures), "flows", total, ">=", source),)
    if failures:
        return failing("; ".join(failures), measurements=measured)
    if undetermined:
        return not_measured("; ".join(undetermined), measurements=measured)
    return passing(measurements=measured)


def judge_planes_agree(disagreements: Sequence[str]) -> Verdict:
    """What the control plane allows is what the probes saw on the data plane."""
    measured = (
        Measurement("disagreements", len(disagreements), "ports", 0, "==", "control vs data plane"),
    )
    if disagreements:
        return failing("; ".join(disagreements), measurements=measured)
    return passing(measurements=measured)


def judge_listed_flow(kind: str, accepted: bool, all_denied: bool, described: str) -> Verdict:
    """A must-allow flow is accepted everywhere; a must-deny one denied everywhere."""
    seen = "accepted" if accepted else "denied" if all_denied else "mixed"
    wanted = "accepted" if kind == "allow" else "denied"
    measured = (Measurement("control_plane", seen, "", wanted, "==", f"expect.flows.{kind}"),)
    if (kind == "allow" and accepted) or (kind != "allow" and all_denied):
        return passing(measurements=measured)
    return failing(f"must-{kind} flow {described}", measurements=measured)


def judge_external_flows(failures: Sequence[str], total: int) -> Verdict:
    """Every declared external flow (bastion, monitoring, CPFS) is enforced as declared."""
    measured = (
        Measurement(
            "enforced_flows", total - len(failures), "flows", total, ">=", "cloud.external_flows"
        ),
    )
    if failures:
        return failing("; ".join(failures), measurements=measured)
    return passing(measurements=measured)


def judge_eri_supported(
    node: str, instance_type: str | None, quantity: int | None, supported: bool, minimum: int
) -> Verdict:
    """The instance type has ERIs (`EriQuantity`) where RDMA devices are expected."""
    measured = (
        Measurement("eri_quantity", quantity, "interfaces", 1, ">=", "expect.rdma.min_devices"),
    )
    if supported:
        return passing(measurements=measured)
    return failing(
        f"{node}: instance type {instance_type} has EriQuantity {quantity} "
        f"(ecs:DescribeInstanceTypes): no eRDMA, but {minimum} RDMA devices are expected",
        measurements=measured,
    )
