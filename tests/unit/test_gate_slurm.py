"""Slurm: parsing real scontrol/sinfo output, planning drains and resumes, executing them."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from pytest_hpcnet.gate import slurm
from pytest_hpcnet.gate.judge import NodeJudgement
from pytest_hpcnet.inventory.gate_settings import NodeNames, SchedulerSettings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
SETTINGS = SchedulerSettings(kind="slurm", act=True)


def sample(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_scontrol_sample_parses_states_and_reasons_without_stamp():
    nodes = slurm.parse_scontrol_nodes(sample("scontrol-show-node-o.txt"))
    assert sorted(nodes) == ["node01", "node02", "node03", "node04"]
    assert nodes["node01"].state == "IDLE" and nodes["node01"].reason == ""
    assert not nodes["node01"].drained
    assert nodes["node02"].drained and nodes["node02"].ours
    assert nodes["node02"].reason.startswith("hpcnet: mtu,path_mtu: ")
    assert nodes["node03"].drained and not nodes["node03"].ours
    assert nodes["node03"].reason == "ops: replace DIMM B2"
    assert nodes["node04"].state == "IDLE+NOT_RESPONDING" and not nodes["node04"].drained


def test_scontrol_line_keeps_values_with_spaces():
    line = sample("scontrol-show-node-o.txt").splitlines()[0]
    fields = slurm.parse_scontrol_line(line)
    assert fields["OS"].startswith("Linux ")
    assert fields["NodeAddr"] == "127.0.0.1" and fields["Partitions"] == "lab"


def test_sinfo_sample_parses_and_dedupes_partitions():
    nodes = slurm.parse_sinfo_nodes(sample("sinfo-N-h-o.txt"))
    assert sorted(nodes) == ["node01", "node02", "node03"]
    assert nodes["node02"].drained and nodes["node02"].ours
    assert nodes["node03"].drained and nodes["node03"].reason == "ops: replace DIMM B2"
    assert not nodes["node01"].drained and nodes["node01"].reason == ""


@pytest.mark.parametrize(
    "text", ["", "\n", "slurm_load_node error: Unable to contact slurm controller\n", "a|b\n"]
)
def test_parsers_fail_closed_on_other_output(text):
    with pytest.raises(slurm.SlurmError):
        slurm.parse_scontrol_nodes(text)
    with pytest.raises(slurm.SlurmError):
        slurm.parse_sinfo_nodes(text)


def fail(node: str, *checks: str) -> NodeJudgement:
    return NodeJudgement(node, "fail", list(checks), [f"{c} reason on {node}" for c in checks])


def live(*nodes: tuple[str, str, str]) -> dict[str, slurm.SlurmNode]:
    return {n: slurm.SlurmNode(n, state, reason) for n, state, reason in nodes}


def test_plan_drains_failed_resumes_ours_and_never_touches_others():
    judgements = {
        "node01": fail("node01", "mtu", "path_mtu"),
        "node02": NodeJudgement("node02", "pass"),
        "node03": NodeJudgement("node03", "pass"),
        "node04": fail("node04", "erdma"),
        "node05": NodeJudgement("node05", "pass"),
    }
    state = live(
        ("node01", "IDLE", ""),
        ("node02", "IDLE+DRAIN", "hpcnet: mtu: old"),
        ("node03", "IDLE+DRAIN", "ops: replace DIMM"),
        ("node04", "DOWN+NOT_RESPONDING", "Not responding"),
        ("node05", "ALLOCATED", ""),
    )
    plan = slurm.plan(judgements, state, SETTINGS)
    assert [a.command for a in plan.actions] == [
        "scontrol update NodeName=node01 State=DRAIN "
        "'Reason=hpcnet: mtu,path_mtu: mtu reason on node01'",
        "scontrol update NodeName=node02 State=RESUME",
    ]
    untouched = dict(plan.untouched)
    assert "someone else" in untouched["node03"] and "someone else" in untouched["node04"]
    assert "node05" not in untouched


def test_plan_keeps_an_identical_hpcnet_drain_and_rewrites_a_changed_one():
    judgement = {"node01": fail("node01", "mtu")}
    reason = slurm.drain_reason(judgement["node01"])
    same = slurm.plan(judgement, live(("node01", "IDLE+DRAIN", reason)), SETTINGS)
    assert same.actions == [] and "already drained" in same.untouched[0][1]
    changed = slurm.plan(judgement, live(("node01", "IDLE+DRAIN", "hpcnet: x: y")), SETTINGS)
    assert [a.op for a in changed.actions] == ["drain"]


def test_plan_leaves_our_drain_on_an_unjudged_node():
    judgement = {"node01": NodeJudgement("node01", "unjudged", why="unreachable in this run")}
    plan = slurm.plan(judgement, live(("node01", "IDLE+DRAIN", "hpcnet: mtu: x")), SETTINGS)
    assert plan.actions == []
    assert plan.untouched == [("node01", "stays drained: unreachable in this run")]


def test_names_are_mapped_by_map_then_pattern():
    settings = SchedulerSettings(
        kind="slurm", node_names=NodeNames(pattern="gpu-{name}", map={"node02": "spare7"})
    )
    judgements = {"node01": fail("node01", "mtu"), "node02": fail("node02", "mtu")}
    state = live(("gpu-node01", "IDLE", ""), ("spare7", "MIXED", ""))
    plan = slurm.plan(judgements, state, settings)
    assert [a.slurm_node for a in plan.actions] == ["gpu-node01", "spare7"]
    assert [a.node for a in plan.actions] == ["node01", "node02"]


def test_a_node_slurm_does_not_know_is_reported_not_acted_on():
    plan = slurm.plan({"node09": fail("node09", "mtu")}, live(("node01", "IDLE", "")), SETTINGS)
    assert plan.actions == [] and plan.untouched == [("node09", "node09 is not a Slurm node")]


def test_reason_is_one_short_line_and_hostile_text_stays_one_argument():
    judgement = NodeJudgement("n1", "fail", ["mtu"], ["x'; rm -rf / #\n$(reboot) " + "y" * 300])
    reason = slurm.drain_reason(judgement)
    assert reason.startswith("hpcnet: mtu: x'; rm -rf / # $(reboot) y")
    assert len(reason) <= slurm.REASON_MAX and "\n" not in reason
    argv = slurm.drain_argv("scontrol", "n1", reason)
    assert tuple(shlex.split(shlex.join(argv))) == argv


def completed(argv, code=0, out="", err=""):
    return subprocess.CompletedProcess(list(argv), code, out, err)


def test_execute_runs_exactly_the_planned_argv_and_stops_at_the_first_failure():
    plan = slurm.plan(
        {n: fail(n, "mtu") for n in ("node01", "node02", "node03")},
        live(*((n, "IDLE", "") for n in ("node01", "node02", "node03"))),
        SETTINGS,
    )
    ran = []

    def runner(argv, timeout):
        ran.append(argv)
        if "NodeName=node02" in argv:
            return completed(argv, 1, err="slurm_update error: Unable to contact slurm controller")
        return completed(argv)

    outcome = slurm.execute(plan.actions, SETTINGS, runner)
    assert ran == [a.argv for a in plan.actions[:2]]
    assert [a.node for a in outcome.done] == ["node01"]
    assert outcome.failed[0].node == "node02" and "Unable to contact" in outcome.failed[1]
    assert [a.node for a in outcome.not_done] == ["node03"]


def test_read_nodes_raises_when_the_controller_does_not_answer():
    def runner(argv, timeout):
        return completed(argv, 1, err="slurm_load_node error: Unable to contact slurm controller")

    with pytest.raises(slurm.SlurmError, match="Unable to contact"):
        slurm.read_nodes(SETTINGS, runner)


def test_run_command_times_out_as_slurm_error():
    with pytest.raises(slurm.SlurmError, match=r"did not answer within 0\.2 s"):
        slurm.run_command(("sleep", "5"), 0.2)
    with pytest.raises(slurm.SlurmError, match="cannot run"):
        slurm.run_command(("/nonexistent/scontrol",), 1)
