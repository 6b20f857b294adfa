"""Judges of the cloud control-plane audit. The audit (`cloud/`) evaluates security groups
and network ACLs into decisions; these judges turn the decisions, given as plain lines and
flags, into the one `Verdict` (an undetermined rule is not measured, never a pass)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pytest_hpcnet.requirements.verdict import (
    Measurement,
    Verdict,
    failing,
    not_applicable,
    not_measured,
    passing,
)


def plane_read(plane: Any, reason: str) -> Verdict:
    """The control plane was read; a read error (e.g. a missing RAM action) is not
    measured, never a failure a waiver could cover."""
    return not_measured(reason) if plane is None else passing()


def all_known(problems: Iterable[str]) -> Verdict:
    """Facts the control plane could not tell (an undetermined rule, an unread interface)
    are not measured."""
    said = "; ".join(problems)
    return not_measured(said) if said else passing()


def judge_required_flows(decisions: Sequence[Any], target: str, total: int) -> Verdict:
    """`judge_flows_accepted` on the audit's decisions (`cloud.verdicts.FlowDecisions`) for
    each required flow to `target`, named as suspect when one is rejected."""
    failures = [str(v) for v in decisions if v.unknown is None and not v.accepted]
    undetermined = [str(v) for v in decisions if v.unknown is not None]
    verdict = judge_flows_accepted(failures, undetermined, total, "expect.cloud.required_flows")
    verdict.extra["suspects"] = [target] if failures else []
    return verdict


def judge_listed_decision(kind: str, decision: Any) -> Verdict:
    """`judge_listed_flow` on the audit's decision for one inventory flow; undetermined is
    not measured."""
    if decision.unknown is not None:
        return not_measured(f"{kind} flow {decision}")
    return judge_listed_flow(kind, decision.accepted, decision.all_denied, str(decision))


def external_flows_declared(flows: Sequence[Any]) -> Verdict:
    """External flows are declared (`cloud.external_flows`); else not applicable."""
    if not flows:
        return not_applicable("no cloud.external_flows declared (bastion, monitoring, CPFS mounts)")
    return passing()


def judge_external_decisions(decided: Sequence[tuple[Any, Any]]) -> Verdict:
    """`judge_external_flows` on each declared flow and the audit's decision for it."""
    failures = []
    for flow, verdict in decided:
        if flow.expect == "allow" and not verdict.accepted:
            failures.append(f"must-allow {flow.name} flow {verdict}")
        elif flow.expect == "deny" and not verdict.all_denied:
            failures.append(f"must-deny {flow.name} flow {verdict}")
    return judge_external_flows(failures, len(decided))


def judge_instance_eri(node: str, eri: Any, node_min: int | None, expect_min: int) -> Verdict:
    """`judge_eri_supported` on the node's instance type (`cloud.audit.EriSupport`) where
    RDMA devices are expected (the node's `rdma.min_devices`, else the profile's)."""
    minimum = node_min if node_min is not None else expect_min
    if minimum == 0:
        return not_applicable(f"{node}: no eRDMA expected (rdma.min_devices is 0)")
    if eri.problem:
        return not_measured(eri.problem)
    return judge_eri_supported(node, eri.instance_type, eri.quantity, eri.supported, minimum)


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


def judge_planes_agree(found: Iterable[str | None]) -> Verdict:
    """What the control plane allows is what the probes saw on the data plane (`found`: one
    line per port checked, None where they agree or the probe cannot say)."""
    disagreements = [d for d in found if d]
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
