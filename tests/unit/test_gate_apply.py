"""`hpcnet gate apply`: a run folder in, the exact commands out, exit codes as documented."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_hpcnet import cli
from pytest_hpcnet.gate import apply as gate
from pytest_hpcnet.inventory.gate_settings import ActionSettings, SchedulerSettings
from pytest_hpcnet.report.evidence import EvidenceBundle

NODES = ["node01", "node02", "node03"]
SLURM = SchedulerSettings(kind="slurm", act=True)


def run_folder(tmp_path: Path, failing: str | None = "node02", close: bool = True) -> Path:
    bundle = EvidenceBundle.create(tmp_path / "reports", "20261130-020000-ab12")
    for node in NODES:
        bad = node == failing
        bundle.append(
            {
                "check_id": "mtu",
                "requirement": "jumbo frames",
                "subject": node,
                "verdict": "fail" if bad else "pass",
                "message": f"{node}: eth0 MTU 1500, expected 8500" if bad else "",
            }
        )
    if close:
        bundle.close({"cluster": "lab"})
    return bundle.run_dir


class FakeSlurm:
    """scontrol as a callable: answers `show node -o` from a table, records updates."""

    def __init__(self, states: dict[str, tuple[str, str]], answer: bool = True) -> None:
        self.states = states
        self.answer = answer
        self.ran: list[tuple[str, ...]] = []

    def __call__(self, argv, timeout):
        self.ran.append(argv)
        if not self.answer:
            err = "slurm_load_node error: Unable to contact slurm controller (connect failure)"
            return subprocess.CompletedProcess(list(argv), 1, "", err)
        if argv[1:] == ("show", "node", "-o"):
            lines = [
                f"NodeName={n} Arch=x86_64 State={s}"
                + (f" Reason={r} [root@2026-11-30T01:00:00]" if r else "")
                for n, (s, r) in self.states.items()
            ]
            return subprocess.CompletedProcess(list(argv), 0, "\n".join(lines) + "\n", "")
        return subprocess.CompletedProcess(list(argv), 0, "", "")


def healthy_slurm() -> FakeSlurm:
    return FakeSlurm(
        {
            "node01": ("IDLE+DRAIN", "hpcnet: mtu: old"),
            "node02": ("IDLE", ""),
            "node03": ("IDLE+DRAIN", "ops: replace DIMM"),
        }
    )


def test_dry_run_prints_exactly_what_the_real_run_executes(tmp_path, capsys):
    run_dir = run_folder(tmp_path)
    dry_fake, act_fake = healthy_slurm(), healthy_slurm()
    dry = gate.apply(run_dir, SLURM, ActionSettings(), NODES, scontrol_runner=dry_fake)
    act = gate.apply(run_dir, SLURM, ActionSettings(), NODES, act=True, scontrol_runner=act_fake)
    assert dry_fake.ran == [("scontrol", "show", "node", "-o")]  # a dry run changes nothing
    printed = [ln for ln in dry.lines if ln.startswith("scontrol ")]
    executed = [argv for argv in act_fake.ran if argv[1] == "update"]
    assert [tuple(shlex.split(line)) for line in printed] == executed
    assert printed == [
        "scontrol update NodeName=node01 State=RESUME",
        "scontrol update NodeName=node02 State=DRAIN "
        "'Reason=hpcnet: mtu: node02: eth0 MTU 1500, expected 8500'",
    ]
    assert dry.code == act.code == gate.EXIT_FAILED
    assert any("untouched node03: reason set by someone else" in ln for ln in dry.lines)
    kept = (tmp_path / "reports" / ".gate" / "20261130-020000-ab12" / "gate.jsonl").read_text()
    entry = json.loads(kept)  # one line: the act, not the dry run
    assert entry["slurm"]["done"] == printed and entry["mode"] == "act"


def test_controller_not_answering_does_nothing_and_exits_4(tmp_path):
    fake = FakeSlurm({}, answer=False)
    report = gate.apply(
        run_folder(tmp_path), SLURM, ActionSettings(), NODES, act=True, scontrol_runner=fake
    )
    assert fake.ran == [("scontrol", "show", "node", "-o")]
    assert report.code == gate.EXIT_NOT_DONE
    assert "slurm: nothing done; the next gate run plans again" in report.lines


def test_healthy_run_exits_0_and_incomplete_run_exits_3(tmp_path):
    healthy = gate.apply(
        run_folder(tmp_path / "a", failing=None),
        SLURM,
        ActionSettings(),
        NODES,
        scontrol_runner=FakeSlurm({n: ("IDLE", "") for n in NODES}),
    )
    assert healthy.code == gate.EXIT_HEALTHY and "slurm: nothing to do" in healthy.lines
    fake = healthy_slurm()
    unclosed = gate.apply(
        run_folder(tmp_path / "b", close=False),
        SLURM,
        ActionSettings(),
        NODES,
        scontrol_runner=fake,
    )
    assert unclosed.code == gate.EXIT_INCOMPLETE
    assert not any("RESUME" in ln for ln in unclosed.lines)  # no resume on a partial run
    assert any("State=DRAIN" in ln for ln in unclosed.lines)


def test_act_needs_the_inventory_consent(tmp_path):
    report = gate.apply(
        run_folder(tmp_path),
        SchedulerSettings(kind="slurm"),
        ActionSettings(),
        NODES,
        act=True,
        scontrol_runner=healthy_slurm(),
    )
    assert report.code == gate.EXIT_USAGE and "scheduler.act: false" in report.lines[0]


def test_hook_runs_once_per_failed_node_and_its_output_is_kept(tmp_path):
    script = tmp_path / "hook.py"
    script.write_text("import sys; print('taint', sys.argv[1:]); sys.exit(0)\n")
    actions = ActionSettings(command=f"{sys.executable} {script} {{node}} {{checks}} {{reasons}}")
    dry = gate.apply(run_folder(tmp_path), SchedulerSettings(), actions, NODES)
    report = gate.apply(run_folder(tmp_path), SchedulerSettings(), actions, NODES, act=True)
    assert report.code == gate.EXIT_FAILED
    hooks = [ln for ln in report.lines if ln.startswith(sys.executable)]
    assert hooks == [ln for ln in dry.lines if ln.startswith(sys.executable)]
    assert len(hooks) == 1 and shlex.split(hooks[0])[2:] == [
        "node02",
        "mtu",
        "node02: eth0 MTU 1500, expected 8500",
    ]
    gate_dir = tmp_path / "reports" / ".gate" / "20261130-020000-ab12"
    (record,) = json.loads((gate_dir / "gate.jsonl").read_text())["hooks"]
    stored = (gate_dir / "outputs" / f"{record['output_digest']}.txt").read_text()
    assert "taint ['node02', 'mtu'" in stored and record["exit_status"] == 0


def test_failing_hook_exits_4(tmp_path):
    actions = ActionSettings(command=f"{sys.executable} -c 'import sys; sys.exit(2)'")
    report = gate.apply(run_folder(tmp_path), SchedulerSettings(), actions, NODES, act=True)
    assert report.code == gate.EXIT_NOT_DONE
    assert "hook: FAILED for node02: exit status 2" in report.lines


INVENTORY = """\
cluster: {name: lab, region: cn-lab}
ssh: {user: root}
nodes:
  - {name: "node0[1-3]", host: "198.18.0.1[1-3]"}
scheduler:
  kind: slurm
  node_names: {pattern: "gpu-{name}", map: {node03: spare7}}
  scontrol: /nonexistent/scontrol
"""


def test_cli_usage_errors_exit_2_and_missing_scontrol_exits_4(tmp_path, capsys):
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(textwrap.dedent(INVENTORY))
    run_dir = run_folder(tmp_path)
    assert cli.main(["gate", "apply", str(run_dir), "--inventory", str(inventory)]) == 4
    out = capsys.readouterr().out
    assert "`/nonexistent/scontrol show node -o` cannot run" in out
    assert cli.main(["gate", "apply", str(tmp_path), "--inventory", str(inventory)]) == 2
    assert cli.main(["gate", "apply", str(run_dir), "--inventory", str(tmp_path / "x")]) == 2
    assert cli.main(["gate", "apply", str(run_dir), "--inventory", str(inventory), "--act"]) == 2
    with pytest.raises(SystemExit) as exc:
        cli.main(["gate", "apply", str(run_dir)])
    assert exc.value.code == 2


@pytest.mark.parametrize(
    "section, problem",
    [
        ("scheduler: {kind: pbs}", "scheduler.kind"),
        ("scheduler: {node_names: {pattern: gpu}}", "must contain {name}"),
        ("scheduler: {node_names: {map: {node01: 'a b'}}}", "not a valid scheduler node name"),
        ("scheduler: {scontrol: 'scontrol --foo'}", "one program"),
        ('actions: {command: "echo \'x"}', "cannot be split"),
        ("actions: {timeout_s: 0}", "actions.timeout_s"),
    ],
)
def test_bad_sections_are_one_line_inventory_errors(tmp_path, section, problem):
    from pytest_hpcnet.inventory.loader import InventoryError, load_inventory

    inventory = tmp_path / "inv.yaml"
    inventory.write_text(INVENTORY.split("scheduler:")[0] + section + "\n")
    with pytest.raises(InventoryError, match=problem.replace("{", r"\{").replace("}", r"\}")):
        load_inventory(inventory)


def test_inventory_sections_load(tmp_path):
    from pytest_hpcnet.inventory.loader import load_inventory

    inventory = tmp_path / "inv.yaml"
    inventory.write_text(INVENTORY + "actions: {command: 'ticket {node}', timeout_s: 5}\n")
    loaded = load_inventory(inventory)
    assert loaded.scheduler.node_names.slurm_name("node01") == "gpu-node01"
    assert loaded.scheduler.node_names.slurm_name("node03") == "spare7"
    assert loaded.actions.timeout_s == 5 and loaded.scheduler.act is False


def test_a_run_of_another_cluster_is_refused_and_strange_nodes_ignored(tmp_path):
    run_dir = run_folder(tmp_path)
    other = gate.apply(
        run_dir, SLURM, ActionSettings(), NODES, cluster="prod", scontrol_runner=healthy_slurm()
    )
    assert other.code == gate.EXIT_USAGE and "cluster 'lab'" in other.lines[0]
    fake = healthy_slurm()
    fewer = gate.apply(
        run_dir, SLURM, ActionSettings(), ["node01", "node03"], cluster="lab", scontrol_runner=fake
    )
    assert "  ignored node02: not a node of the inventory" in fewer.lines
    assert not any("node02" in line for line in fewer.lines if line.startswith("scontrol"))
