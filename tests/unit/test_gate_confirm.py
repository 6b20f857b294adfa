"""The gate confirms before it drains: the failed checks of a node are re-run once (the
inventory's `scheduler.confirm_runs`); only a failure seen again is drained, with "confirmed
by a re-run" in its reason; one that passes is flaky and left alone; an unreachable node is
never drained."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from pytest_hpcnet.gate import apply as gate
from pytest_hpcnet.gate import confirm
from pytest_hpcnet.gate.judge import NodeJudgement, judge
from pytest_hpcnet.gate.slurm import drain_reason
from pytest_hpcnet.inventory.gate_settings import ActionSettings, SchedulerSettings
from pytest_hpcnet.report.evidence import CheckRecord, EvidenceBundle, RunSummary
from tests.unit.test_gate_apply import NODES, SLURM, FakeSlurm

SUITES = Path(confirm.__file__).resolve().parents[1] / "suites"


def record(node: str, verdict: str, check: str = "mtu", **extra) -> dict:
    return {
        "check_id": check,
        "requirement": "jumbo frames",
        "subject": node,
        "nodeid": f"pytest_hpcnet/suites/test_mtu.py::test_interface_mtu_is_expected[{node}]",
        "verdict": verdict,
        "message": f"{node}: eth0 MTU 1500, expected 8500" if verdict == "fail" else "",
        **extra,
    }


def run_folder(tmp_path: Path, failing=("node02",), unreachable=()) -> Path:
    bundle = EvidenceBundle.create(tmp_path / "reports", "20261130-020000-ab12")
    for node in NODES:
        bundle.append(record(node, "fail" if node in failing else "pass"))
    bundle.close({"cluster": "lab", "unreachable_nodes": list(unreachable)})
    return bundle.run_dir


class FakeConfirm:
    """A confirmer answering from a table (node -> outcome), recording what it was asked."""

    def __init__(self, **outcomes: str) -> None:
        self.outcomes = outcomes
        self.asked: list[list[str]] = []

    def __call__(self, failed):
        self.asked.append(sorted(failed))
        return {
            name: confirm.Confirmation(name, self.outcomes[name], "re-run 20261130-020500-cd34")
            for name in failed
        }


def slurm_fake() -> FakeSlurm:
    return FakeSlurm({n: ("IDLE", "") for n in NODES})


def apply_confirmed(tmp_path, fake, confirm):
    """`gate apply --act` of the run folder on Slurm, with the re-runs `confirm` gives."""
    return gate.apply(
        run_folder(tmp_path),
        SLURM,
        ActionSettings(),
        NODES,
        act=True,
        scontrol_runner=fake,
        confirm=confirm,
    )


def test_a_confirmed_failure_is_drained_saying_so(tmp_path):
    fake, asked = slurm_fake(), FakeConfirm(node02="confirmed")
    report = gate.apply(
        run_folder(tmp_path),
        SLURM,
        ActionSettings(),
        NODES,
        act=True,
        scontrol_runner=fake,
        confirm=asked,
    )
    assert asked.asked == [["node02"]]
    assert report.code == gate.EXIT_FAILED
    [update] = [argv for argv in fake.ran if argv[1] == "update"]
    assert update[-1] == (
        "Reason=hpcnet: mtu (confirmed by a re-run): node02: eth0 MTU 1500, expected 8500"
    )
    assert "  confirmed node02: mtu failed again (re-run 20261130-020500-cd34)" in report.lines
    kept = tmp_path / "reports" / ".gate" / "20261130-020000-ab12" / "gate.jsonl"
    assert json.loads(kept.read_text())["confirmed"] == ["node02"]


def test_a_failure_that_passes_on_the_re_run_is_flaky_and_not_drained(tmp_path):
    fake = slurm_fake()
    script = tmp_path / "hook.py"
    script.write_text("import sys; sys.exit(0)\n")
    actions = ActionSettings(command=f"{sys.executable} {script} {{node}}")
    report = gate.apply(
        run_folder(tmp_path, failing=("node02", "node03")),
        SLURM,
        actions,
        NODES,
        act=True,
        scontrol_runner=fake,
        confirm=FakeConfirm(node02="flaky", node03="confirmed"),
    )
    drained = [argv[2] for argv in fake.ran if argv[1] == "update"]
    assert drained == ["NodeName=node03"]
    hooked = [shlex.split(ln)[2] for ln in report.lines if ln.startswith(sys.executable)]
    assert hooked == ["node03"]
    assert (
        "  flaky node02: mtu failed, then passed on a re-run (re-run 20261130-020500-cd34); "
        "not drained" in report.lines
    )
    assert report.code == gate.EXIT_FAILED


def test_only_flaky_failures_drain_nothing_and_say_why(tmp_path):
    fake = slurm_fake()
    report = apply_confirmed(tmp_path, fake, FakeConfirm(node02="flaky"))
    assert not [argv for argv in fake.ran if argv[1] == "update"]
    assert "  no failure was confirmed by a re-run: nothing to drain" in report.lines
    assert report.code == gate.EXIT_FAILED


def test_a_failure_the_re_run_cannot_judge_is_not_drained_and_the_run_is_incomplete(tmp_path):
    fake = slurm_fake()
    report = apply_confirmed(tmp_path, fake, FakeConfirm(node02="unconfirmed"))
    assert not [argv for argv in fake.ran if argv[1] == "update"]
    assert report.code == gate.EXIT_INCOMPLETE
    assert any(ln.startswith("  unjudged node02: mtu failed, not confirmed") for ln in report.lines)


def test_an_unreachable_node_is_neither_drained_nor_re_run(tmp_path):
    fake, asked = slurm_fake(), FakeConfirm()
    report = gate.apply(
        run_folder(tmp_path, failing=("node03",), unreachable=("node03",)),
        SLURM,
        ActionSettings(),
        NODES,
        act=True,
        scontrol_runner=fake,
        confirm=asked,
    )
    assert asked.asked == [] and not [argv for argv in fake.ran if argv[1] == "update"]
    assert any(
        ln.startswith("  unjudged node03: unreachable in this run (mtu failed: not measured")
        for ln in report.lines
    )
    assert report.code == gate.EXIT_INCOMPLETE


def test_confirm_runs_0_disables_the_re_run(tmp_path):
    run_dir = run_folder(tmp_path)
    off = SchedulerSettings(kind="slurm", act=True, confirm_runs=0)
    assert confirm.for_run(Path("inv.yaml"), off, run_dir) is None
    assert isinstance(confirm.for_run(Path("inv.yaml"), SLURM, run_dir), confirm.PytestConfirm)
    assert SchedulerSettings().confirm_runs == 1


# --- the re-run itself ----------------------------------------------------------------


def judged(records: list[dict], unreachable=()) -> dict[str, NodeJudgement]:
    summary = RunSummary(run_id="r", unreachable_nodes=list(unreachable))
    found = judge([CheckRecord.model_validate(r) for r in records], summary, NODES)
    return {n: j for n, j in found.items() if j.status == "fail"}


def test_the_re_run_is_just_those_tests_against_just_those_nodes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    failed = judged(
        [record("node02", "fail"), record("node03", "fail", nodeid="site_test.py::t[node03]")]
    )
    (tmp_path / "site_test.py").write_text("")
    argv = confirm.rerun_argv(Path("inv.yaml"), tmp_path / "confirm", failed, None)
    assert argv[:3] == [sys.executable, "-m", "pytest"]
    assert argv[3:] == [
        "-q",
        "-p",
        "no:cacheprovider",
        "--hpcnet-inventory",
        "inv.yaml",
        "--hpcnet-reports-dir",
        str(tmp_path / "confirm"),
        "--hpcnet-nodes",
        "node02,node03",
        str(SUITES / "test_mtu.py") + "::test_interface_mtu_is_expected[node02]",
        "site_test.py::t[node03]",
    ]


def test_a_pair_or_cluster_failure_is_re_run_against_the_whole_inventory_with_its_baseline(
    tmp_path,
):
    failed = judged(
        [
            record("node01", "pass"),
            record(
                "node01->node02",
                "fail",
                check="path_mtu",
                kind="pair",
                suspect_nodes=["node02"],
                nodeid="t.py::test_p[node01->node02]",
            ),
        ]
    )
    argv = confirm.rerun_argv(Path("i.yaml"), tmp_path, failed, tmp_path / "base")
    assert "--hpcnet-nodes" not in argv
    assert argv[-3:] == [
        "--hpcnet-baseline",
        str(tmp_path / "base"),
        "t.py::test_p[node01->node02]",
    ]


@pytest.mark.parametrize(
    ("again", "unreachable", "outcome", "detail"),
    [
        ("fail", (), "confirmed", "re-run rr"),
        ("pass", (), "flaky", "re-run rr"),
        ("error", (), "unconfirmed", "re-run rr: mtu error"),
        ("not_measured", (), "unconfirmed", "re-run rr: mtu not_measured"),
        ("fail", ("node02",), "unconfirmed", "re-run rr: node02 unreachable"),
        (None, (), "unconfirmed", "re-run rr: mtu did not run"),
    ],
)
def test_the_re_run_is_judged_as_the_run_is(again, unreachable, outcome, detail):
    failed = judged([record("node02", "fail")])
    rerun = [] if again is None else [record("node02", again)]
    records = [CheckRecord.model_validate(r) for r in rerun]
    summary = RunSummary(run_id="rr", unreachable_nodes=list(unreachable))
    [found] = confirm.outcomes(failed, records, summary).values()
    assert (found.node, found.outcome, found.detail) == ("node02", outcome, detail)


def test_each_of_several_confirm_runs_must_fail_again(tmp_path):
    calls = []

    def runner(argv, **kwargs):
        calls.append(argv)
        reports = Path(argv[argv.index("--hpcnet-reports-dir") + 1])
        bundle = EvidenceBundle.create(reports, f"2026113{len(calls)}-000000-aaaa")
        verdicts = {"node02": ["fail", "fail"], "node03": ["pass"]}
        for node in ("node02", "node03"):
            if node in argv[-1] or node in argv[-2]:
                bundle.append(record(node, verdicts[node][len(calls) - 1]))
        bundle.close({"cluster": "lab"})
        return type("Done", (), {"returncode": 0})()

    run_dir = run_folder(tmp_path, failing=("node02", "node03"))
    scheduler = SchedulerSettings(confirm_runs=2)
    confirmer = confirm.for_run(Path("inv.yaml"), scheduler, run_dir, runner=runner)
    found = confirmer(judged([record("node02", "fail"), record("node03", "fail")]))
    assert {n: c.outcome for n, c in found.items()} == {"node02": "confirmed", "node03": "flaky"}
    assert len(calls) == 2 and calls[1][-1].endswith("[node02]")  # node03 was not re-run again
    assert found["node02"].detail == "re-runs 20261131-000000-aaaa, 20261132-000000-aaaa"
    assert (run_dir.parent / ".gate" / run_dir.name / "confirm").is_dir()


def test_a_re_run_that_writes_no_run_is_unconfirmed(tmp_path):
    def runner(argv, **kwargs):
        return type("Done", (), {"returncode": 4, "stderr": "x\nERROR: file not found: t.py\n"})()

    confirmer = confirm.for_run(Path("inv.yaml"), SLURM, run_folder(tmp_path), runner=runner)
    [found] = confirmer(judged([record("node02", "fail")])).values()
    assert (found.outcome, found.detail) == (
        "unconfirmed",
        "the re-run wrote no run (pytest exited 4: ERROR: file not found: t.py)",
    )


def test_drain_reason_without_confirmation_is_unchanged():
    judgement = NodeJudgement("n", "fail", ["mtu"], ["n: eth0 MTU 1500"])
    assert drain_reason(judgement) == "hpcnet: mtu: n: eth0 MTU 1500"
    judgement.confirmed = True
    assert drain_reason(judgement) == "hpcnet: mtu (confirmed by a re-run): n: eth0 MTU 1500"


# --- a failure against the cluster's peers, re-run on the node alone ------------------------


def gpu_record(
    node: str, value: float, bound: float | None, source: str, verdict: str, basis: str = ""
) -> dict:
    """A gpu_compute record of `node` with GPU 0's bf16 TFLOPS judged against `bound`."""
    measured = {
        "basis": basis,
        "name": "bf16_tflops",
        "value": value,
        "unit": "TFLOPS",
        "threshold": bound,
        "comparison": ">=",
        "threshold_source": source,
        "subject": "GPU 0",
    }
    return {
        "check_id": "gpu_compute",
        "requirement": "GPU compute under load",
        "subject": node,
        "nodeid": f"pytest_hpcnet/suites/test_gpu_load.py::test_gpu_compute[{node}]",
        "verdict": verdict,
        "message": f"{node} GPU 0: bf16 {value:g} TFLOPS below {source}"
        if verdict == "fail"
        else "",
        "measured": [measured],
    }


PEER_SOURCES = ["0.90 x cluster median 800", "0.90 x the nodes' median 800"]


@pytest.mark.parametrize("source", PEER_SOURCES)
def test_a_whole_node_slow_against_its_peers_is_confirmed_by_the_first_runs_reference(source):
    first = [gpu_record("node02", 400, 720, source, "fail")]
    first += [gpu_record(n, 800, 720, source, "pass") for n in ("node01", "node03")]
    failed = judged(first)
    assert "--hpcnet-nodes" in confirm.rerun_argv(Path("i.yaml"), Path("r"), failed, None)
    # alone, node02 is its own peer: its median is its own 400, so the re-run passes it
    rerun = [
        CheckRecord.model_validate(
            gpu_record("node02", 400, 360, "0.90 x cluster median 400", "pass")
        )
    ]
    summary = RunSummary(run_id="rr")
    first_records = [CheckRecord.model_validate(r) for r in first]
    [found] = confirm.outcomes(failed, rerun, summary, first_records).values()
    assert found.outcome == "confirmed"
    assert found.detail == (
        f"re-run rr: gpu_compute GPU 0 bf16_tflops 400 TFLOPS below the first run's {source} (720)"
    )


def test_a_node_back_to_its_peers_speed_on_the_re_run_is_flaky():
    source = PEER_SOURCES[0]
    first = [gpu_record("node02", 400, 720, source, "fail")]
    failed = judged(first)
    rerun = [
        CheckRecord.model_validate(
            gpu_record("node02", 790, 711, "0.90 x cluster median 790", "pass")
        )
    ]
    first_records = [CheckRecord.model_validate(r) for r in first]
    [found] = confirm.outcomes(failed, rerun, RunSummary(run_id="rr"), first_records).values()
    assert (found.outcome, found.detail) == ("flaky", "re-run rr")


def test_a_bound_of_the_node_itself_is_not_carried_from_the_first_run():
    """A bound that does not depend on the other nodes (the SKU floor, the node's own best
    GPU) is the re-run's own judge's business: it is not re-applied from the first run."""
    first = [gpu_record("node02", 400, 720, "0.90 x node best 800", "fail")]
    failed = judged(first)
    rerun = [
        CheckRecord.model_validate(gpu_record("node02", 400, 360, "0.90 x node best 400", "pass"))
    ]
    first_records = [CheckRecord.model_validate(r) for r in first]
    [found] = confirm.outcomes(failed, rerun, RunSummary(run_id="rr"), first_records).values()
    assert found.outcome == "flaky"


def test_the_confirmer_carries_the_first_runs_peer_reference_into_the_re_run(tmp_path):
    source = PEER_SOURCES[0]
    bundle = EvidenceBundle.create(tmp_path / "reports", "20261130-020000-ab12")
    bundle.append(gpu_record("node02", 400, 720, source, "fail"))
    for node in ("node01", "node03"):
        bundle.append(gpu_record(node, 800, 720, source, "pass"))
    bundle.close({"cluster": "lab"})

    def runner(argv, **kwargs):
        reports = Path(argv[argv.index("--hpcnet-reports-dir") + 1])
        rerun = EvidenceBundle.create(reports, "20261130-021000-cd34")
        rerun.append(gpu_record("node02", 400, 360, "0.90 x cluster median 400", "pass"))
        rerun.close({"cluster": "lab"})
        return type("Done", (), {"returncode": 0})()

    confirmer = confirm.for_run(Path("inv.yaml"), SLURM, bundle.run_dir, runner=runner)
    records = [CheckRecord.model_validate(gpu_record("node02", 400, 720, source, "fail"))]
    [found] = confirmer(judged([r.model_dump() for r in records])).values()
    assert found.outcome == "confirmed"


def test_a_bound_whose_basis_is_the_peers_is_carried_whatever_its_source_says():
    first = [gpu_record("node02", 400, 720, "0.90 x median 800", "fail", basis="cluster median")]
    failed = judged(first)
    rerun = gpu_record("node02", 400, 360, "0.90 x median 400", "pass", basis="cluster median")
    records = [CheckRecord.model_validate(rerun)]
    first_records = [CheckRecord.model_validate(r) for r in first]
    [found] = confirm.outcomes(failed, records, RunSummary(run_id="rr"), first_records).values()
    assert found.outcome == "confirmed"


def test_a_re_run_too_small_for_a_peer_bound_is_judged_by_the_first_runs_bound():
    """Alone, the node has too few peers for a peer bound: its figure is measured but not
    judged (not measured); the first run's bound still judges it."""
    source = PEER_SOURCES[0]
    first = [gpu_record("node02", 400, 720, source, "fail", basis="cluster median")]
    failed = judged(first)
    rerun = [CheckRecord.model_validate(gpu_record("node02", 400, None, "", "not_measured"))]
    first_records = [CheckRecord.model_validate(r) for r in first]
    [found] = confirm.outcomes(failed, rerun, RunSummary(run_id="rr"), first_records).values()
    assert found.outcome == "confirmed"
    [plain] = confirm.outcomes(failed, rerun, RunSummary(run_id="rr")).values()
    assert plain.outcome == "unconfirmed"  # without the first run's bound: nothing to judge
