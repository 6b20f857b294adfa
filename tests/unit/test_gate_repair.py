"""Reboot and re-accept (gate/repair.py): the policy, the plan, the loop with fakes, and the
gate's report and history of it."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError

from pytest_hpcnet.gate import apply as gate
from pytest_hpcnet.gate import history, repair
from pytest_hpcnet.gate.judge import NodeJudgement
from pytest_hpcnet.gate.repair import (
    Acceptance,
    PastRepairs,
    RepairError,
    RepairLoop,
    RepairRecord,
    Step,
    node_faults,
)
from pytest_hpcnet.gate.slurm import SlurmNode
from pytest_hpcnet.inventory.gate_settings import (
    ActionSettings,
    GateSettings,
    RepairSettings,
    SchedulerSettings,
)
from pytest_hpcnet.report.evidence import EvidenceBundle
from pytest_hpcnet.requirements.registry import default_code

SLURM = SchedulerSettings(kind="slurm", act=True, confirm_runs=0)
NOW = datetime(2026, 12, 3, 2, 0, tzinfo=timezone.utc)
POLICY = RepairSettings(max_share=0.25, max_nodes_per_night=4)


def failed(node: str, *checks: str, confirmed: bool = True) -> NodeJudgement:
    """A node whose records of `checks` failed with each requirement's default code."""
    return NodeJudgement(
        node,
        "fail",
        list(checks),
        [f"{node}: {c} bad" for c in checks],
        faults=[(c, default_code(c)) for c in checks],
        confirmed=confirmed,
    )


def drained(*names: str, state: str = "IDLE+DRAIN") -> dict[str, SlurmNode]:
    return {n: SlurmNode(n, state, "hpcnet: gpu_xid: bad") for n in names}


def plan(judgements, live, policy=POLICY, past=None, nodes=8):
    return repair.plan(
        {j.node: j for j in judgements}, live, policy, SLURM, past or PastRepairs(), nodes, NOW
    )


@pytest.mark.parametrize(
    ("check", "code", "repair_class"),
    [
        ("gpu_health", "HPCNET-GPU-ECC-DBE", "reset"),
        ("gpu_health", "HPCNET-GPU-MEMORY", "reset"),
        ("gpu_xid", "HPCNET-GPU-XID-79", "reboot"),
        ("gpu_xid", "HPCNET-GPU-XID-94", "reset"),
        ("mtu", "HPCNET-MTU", "config"),
        ("security_group", "HPCNET-SG-PORTS", "config"),
        ("gpu_inventory", "HPCNET-GPU-COUNT", "replace"),
        ("site_check", "SITE-OWN-CODE", "config"),  # a code the registry does not declare
    ],
)
def test_each_fault_takes_the_repair_class_the_registry_declares(check, code, repair_class):
    judgement = NodeJudgement("n", "fail", [check], ["bad"], faults=[(check, code)])
    (fault,) = node_faults(judgement)
    assert (fault.code, fault.repair, fault.check_id) == (code, repair_class, check)


def test_a_failed_check_without_a_code_is_never_reset_or_rebooted():
    (fault,) = node_faults(NodeJudgement("n", "fail", ["gpu_xid"], ["Xid 79"]))
    assert (fault.code, fault.repair) == ("", "config")


def test_policy_is_validated_and_limits_the_share():
    assert RepairSettings(max_share=0.5, max_nodes_per_night=10).limit(4) == 2
    assert RepairSettings(max_share=0.1, max_nodes_per_night=10).limit(4) == 0
    assert RepairSettings(max_share=1, max_nodes_per_night=3).limit(100) == 3
    for bad in (
        {"reboot": ["config"]},
        {"reset": ["replace"]},
        {"reset": ["reboot"]},
        {"reboot": ["gpu_xid"]},
        {"max_share": 0},
        {"max_share": 1.5},
        {"max_attempts": 0},
    ):
        with pytest.raises(ValidationError):
            RepairSettings(**bad)
    assert GateSettings.model_validate({"repair": {"reboot": ["HPCNET-GPU-XID"]}}).repair


def test_share_limit_holds_when_half_the_nodes_fail():
    judgements = [failed(f"node0{i}", "gpu_xid") for i in range(1, 5)]
    result = plan(judgements, drained(*(j.node for j in judgements)), nodes=8)
    assert result.limit == 2 and [c.node for c in result.chosen] == ["node01", "node02"]
    left = {r.node: r for r in result.left}
    assert set(left) == {"node03", "node04"}
    assert all(r.outcome == "skipped" and "2 nodes in repair" in r.why for r in left.values())


def test_config_and_replace_are_never_reset_or_rebooted():
    judgements = [
        failed("node01", "mtu"),
        failed("node02", "gpu_xid", "mtu"),
        failed("node03", "gpu_inventory"),
        failed("node04", "gpu_health"),
    ]
    result = plan(judgements, drained("node01", "node02", "node03", "node04"))
    assert [(c.node, c.action) for c in result.chosen] == [("node04", "reset")]
    left = {r.node: r for r in result.left}
    assert left["node01"].outcome == "not_repaired" and "HPCNET-MTU (config)" in left["node01"].why
    assert "HPCNET-MTU (config)" in left["node02"].why
    assert "(replace)" in left["node03"].why


def test_reset_only_when_the_policy_resets_every_fault():
    judgements = [failed("node01", "gpu_health", "gpu_xid")]
    result = plan(judgements, drained("node01"))
    assert [c.action for c in result.chosen] == ["reboot"]
    no_reboot = RepairSettings(reset=["HPCNET-GPU-HEALTH"], reboot=[], max_share=1)
    left = plan(judgements, drained("node01"), no_reboot).left
    assert left[0].outcome == "not_repaired" and "allows no reset or reboot" in left[0].why


def test_never_a_node_running_a_job_nor_one_drained_by_someone_else():
    live = {
        **drained("node01", state="MIXED+DRAIN"),
        "node02": SlurmNode("node02", "IDLE+DRAIN", "ops: DIMM"),
        **drained("node03", state="ALLOCATED+DRAIN"),
    }
    result = plan([failed(n, "gpu_xid") for n in ("node01", "node02", "node03")], live)
    assert not result.chosen
    why = {r.node: r.why for r in result.left}
    assert "job" in why["node01"] and "job" in why["node03"]
    assert "not drained by hpcnet" in why["node02"]


def test_unconfirmed_failure_is_not_repaired_when_confirmation_is_on():
    judgements = {"node01": failed("node01", "gpu_xid", confirmed=False)}
    result = repair.plan(
        judgements, drained("node01"), POLICY, SLURM, PastRepairs(), 8, NOW, confirm_required=True
    )
    assert not result.chosen and result.left[0].why == "failure not confirmed by a re-run"


def past(*records: tuple[str, str, str, timedelta]) -> PastRepairs:
    return PastRepairs(
        [
            RepairRecord(
                node, [code], ["reboot"], outcome, action="reboot", at=(NOW - ago).isoformat()
            )
            for node, code, outcome, ago in records
        ]
    )


def test_same_code_while_suspect_goes_to_replace_other_codes_and_old_ones_do_not():
    history_ = past(
        ("node01", "HPCNET-GPU-XID", "resumed", timedelta(days=2)),
        ("node02", "HPCNET-GPU-CLOCKS", "resumed", timedelta(days=2)),
        ("node03", "HPCNET-GPU-XID", "resumed", timedelta(days=30)),
    )
    judgements = [failed(n, "gpu_xid") for n in ("node01", "node02", "node03")]
    result = plan(judgements, drained("node01", "node02", "node03"), past=history_, nodes=12)
    assert [c.node for c in result.chosen] == ["node02", "node03"]
    assert result.left[0].node == "node01" and result.left[0].why.endswith("replace")
    assert "HPCNET-GPU-XID again within 7 nights" in result.left[0].why


def test_attempts_are_bounded():
    history_ = past(
        ("node01", "HPCNET-GPU-CLOCKS", "failed", timedelta(days=1)),
        ("node01", "HPCNET-GPU-CLOCKS", "failed", timedelta(days=2)),
    )
    result = plan([failed("node01", "gpu_xid")], drained("node01"), past=history_)
    assert not result.chosen and "2 repairs did not hold: replace" in result.left[0].why


class FakeRepairer:
    def __init__(self, passes=(), busy=(), broken=()):
        self.passes, self.busy, self.broken = set(passes), set(busy), set(broken)
        self.done: list[tuple[str, str]] = []

    def gpu_busy(self, node):
        return ["4242, python"] if node in self.busy else []

    def reset(self, node):
        self.done.append((node, "reset"))
        return Step(reset_s=1.5)

    def reboot(self, node):
        self.done.append((node, "reboot"))
        if node in self.broken:
            raise RepairError("i-1 not Running 900 s after the reboot (Starting)")
        return Step(reboot_to_running_s=40.0, reboot_to_ssh_s=55.0)

    def reaccept(self, node, judgement):
        ok = node in self.passes
        return Acceptance(ok, "gpu_xid pass" if ok else "gpu_xid failed again", ["-m gpu_load"])

    def ticket(self, node):
        self.done.append((node, "ticket"))
        return f"tickets/ticket-{node}.tar.gz"


def test_loop_resumes_only_what_passes_and_resets_only_an_idle_gpu():
    judgements = [
        failed("node01", "gpu_xid"),
        failed("node02", "gpu_xid"),
        failed("node03", "gpu_health"),
        failed("node04", "gpu_xid"),
    ]
    the_plan = plan(judgements, drained("node01", "node02", "node03", "node04"), nodes=16)
    fake = FakeRepairer(passes={"node01", "node03"}, busy={"node03"}, broken={"node04"})
    resumed: list[str] = []
    records = {r.node: r for r in repair.execute(the_plan, fake, lambda c: resumed.append(c.node))}
    assert resumed == ["node01"]
    assert records["node01"].outcome == "resumed" and records["node01"].reboot_to_ssh_s == 55.0
    assert records["node01"].ssh_to_accepted_s is not None
    assert records["node02"].outcome == "failed" and "re-acceptance" in records["node02"].why
    assert records["node03"].outcome == "skipped" and records["node03"].action is None
    assert "a process holds a GPU" in records["node03"].why
    assert records["node04"].outcome == "failed" and "not Running" in records["node04"].why
    assert ("node03", "reset") not in fake.done


def run_folder(tmp_path: Path, failing: dict[str, str]) -> Path:
    bundle = EvidenceBundle.create(tmp_path / "reports", "20261203-020000-ab12")
    for node in ("node01", "node02", "node03", "node04"):
        check = failing.get(node, "gpu_xid")
        bad = node in failing
        bundle.append(
            {
                "check_id": check,
                "requirement": check,
                "subject": node,
                "verdict": "fail" if bad else "pass",
                "message": f"{node}: {check} bad" if bad else "",
                "nodeid": f"pytest_hpcnet/suites/test_gpu.py::test_{check}[{node}]",
            }
        )
    bundle.close({"cluster": "lab"})
    return bundle.run_dir


class StatefulSlurm:
    """scontrol that applies the drains and resumes it is given."""

    def __init__(self, nodes):
        self.states = {n: ("IDLE", "") for n in nodes}
        self.ran: list[tuple[str, ...]] = []

    def __call__(self, argv, timeout):
        self.ran.append(argv)
        if argv[1:] == ("show", "node", "-o"):
            lines = [
                f"NodeName={n} State={s}" + (f" Reason={r}" if r else "")
                for n, (s, r) in self.states.items()
            ]
            return subprocess.CompletedProcess(list(argv), 0, "\n".join(lines) + "\n", "")
        fields = dict(a.split("=", 1) for a in argv[2:])
        name = fields["NodeName"]
        if fields["State"] == "DRAIN":
            self.states[name] = ("IDLE+DRAIN", fields["Reason"])
        else:
            self.states[name] = ("IDLE", "")
        return subprocess.CompletedProcess(list(argv), 0, "", "")


def test_gate_apply_repairs_reports_and_keeps_it_in_the_history(tmp_path, capsys):
    run_dir = run_folder(tmp_path, {"node01": "gpu_xid", "node02": "gpu_xid", "node03": "mtu"})
    nodes = ["node01", "node02", "node03", "node04"]
    fake_slurm = StatefulSlurm(nodes)
    fake = FakeRepairer(passes={"node01"})
    loop = RepairLoop(RepairSettings(max_share=0.5), fake, PastRepairs(), 4)
    report = gate.apply(
        run_dir,
        SLURM,
        ActionSettings(),
        nodes,
        act=True,
        cluster="lab",
        scontrol_runner=fake_slurm,
        repair_loop=loop,
    )
    assert report.code == gate.EXIT_FAILED
    assert sorted(fake.done) == [("node01", "reboot"), ("node02", "reboot"), ("node02", "ticket")]
    assert fake_slurm.states["node01"] == ("IDLE", "")
    assert fake_slurm.states["node02"][0] == "IDLE+DRAIN"
    assert fake_slurm.states["node03"][0] == "IDLE+DRAIN"
    lines = "\n".join(report.lines)
    assert (
        "repair node01: HPCNET-GPU-XID: reboot (reboot to SSH 55.0 s, SSH to re-accepted" in lines
    )
    assert "repair node03: HPCNET-MTU: no repair: not_repaired: HPCNET-MTU (config)" in lines
    entry = json.loads((tmp_path / "reports/.gate" / run_dir.name / "gate.jsonl").read_text())
    kept = {r["node"]: r for r in entry["repair"]}
    assert kept["node01"]["outcome"] == "resumed" and kept["node01"]["reboot_to_ssh_s"] == 55.0
    assert kept["node02"]["outcome"] == "failed" and kept["node03"]["outcome"] == "not_repaired"

    again = history.repairs(tmp_path / "reports", "lab")
    assert [r.node for r in again.of("node01")] == ["node01"]
    assert "HPCNET-GPU-XID" in again.suspect_codes("node01", 7, datetime.now(timezone.utc))
    second = run_folder(tmp_path, {"node01": "gpu_xid"})
    (second.parent / ".gate" / second.name).mkdir(parents=True, exist_ok=True)
    loop = RepairLoop(RepairSettings(max_share=0.5), fake, again, 4)
    report = gate.apply(
        second,
        SLURM,
        ActionSettings(),
        nodes,
        act=True,
        cluster="lab",
        scontrol_runner=fake_slurm,
        repair_loop=loop,
    )
    assert "HPCNET-GPU-XID again within 7 nights of its repair: replace" in "\n".join(report.lines)
    lines = history.repair_lines(history.repairs(tmp_path / "reports", "lab"))
    assert any(line.startswith("returning node01") for line in lines) is False  # one repair
    capsys.readouterr()


def test_returning_node_is_named():
    history_ = past(
        ("node05", "HPCNET-GPU-XID", "resumed", timedelta(days=20)),
        ("node05", "HPCNET-GPU-HEALTH", "resumed", timedelta(days=9)),
    )
    lines = history.repair_lines(history_)
    assert lines[-1].startswith("returning node05: 2 repairs since")
    assert "HPCNET-GPU-HEALTH, HPCNET-GPU-XID" in lines[-1]


def test_dry_run_plans_the_repair_and_does_nothing(tmp_path):
    run_dir = run_folder(tmp_path, {"node01": "gpu_xid"})
    fake_slurm = StatefulSlurm(["node01", "node02", "node03", "node04"])
    fake = FakeRepairer(passes={"node01"})
    loop = RepairLoop(RepairSettings(max_share=0.5), fake, PastRepairs(), 4)
    report = gate.apply(
        run_dir,
        SLURM,
        ActionSettings(),
        list(fake_slurm.states),
        scontrol_runner=fake_slurm,
        repair_loop=loop,
    )
    assert "  repair node01: HPCNET-GPU-XID: reboot (planned)" in report.lines
    assert fake.done == [] and all(a[1] == "show" for a in fake_slurm.ran)


def test_reaccept_is_one_run_on_the_node_alone_with_its_failed_tests_and_the_load():
    from pytest_hpcnet.gate.repair_live import reaccept_argv

    judgement = failed("node02", "gpu_xid")
    judgement.nodeids = ["pytest_hpcnet/suites/test_gpu.py::test_gpu_no_xid_since_boot[node02]"]
    argv = reaccept_argv(Path("inv.yaml"), Path("out"), "node02", judgement)
    assert argv[argv.index("-k") + 1] == "gpu_load or test_gpu_no_xid_since_boot"
    assert argv[argv.index("--hpcnet-nodes") + 1] == "node02"
    assert argv[-1].endswith("pytest_hpcnet/suites") and "-m" not in argv[3:]
