"""A facts section cut short or timed out is never read as complete (issue 23, finding 10).

The facts script frames each section with `@@hpcnet begin NAME` and `@@hpcnet end NAME $?`
(`sections_script`); a section whose end line never came (the node's `timeout` killed the
script, the output hit its size limit, the connection dropped) or whose command was killed by
a `timeout` of its own (exit status 124/137) is incomplete: `NodeFacts.text` raises
`MissingMeasurement` saying so, so a kernel log cut right after its marker is not "no Xid".
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_hpcnet.campaigns.facts import MissingMeasurement, NodeFacts
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.inventory.models import Node
from pytest_hpcnet.probes.sections import sections_script, split_sections
from pytest_hpcnet.suites import test_gpu as suite
from pytest_hpcnet.transport.fanout import CommandResult
from tests.recorded import Recorded as BaseRecorded

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NODE = Node(name="n1", host="198.18.0.11")
GPU = Expectations.model_validate({"gpu": {"count": 8}})
KLOG = (FIXTURES / "gpu" / "kernel-log-journalctl-xids.txt").read_text()
QUERY = (FIXTURES / "gpu" / "query-8gpu-h200.csv").read_text()


def section(name: str, text: str, status: int | None = 0) -> str:
    """One section as the facts script prints it; `status` None: its end line never came."""
    end = f"\n@@hpcnet end {name} {status}" if status is not None else ""
    return f"@@hpcnet begin {name}\n{text}{end}"


def facts_of(stdout: str, **result) -> NodeFacts:
    """A node's facts from the script's `stdout`; `result` changes the command's result."""
    done = CommandResult(NODE.name, "facts", 0, stdout, "", 30.0, 0.0)
    return NodeFacts(NODE.name, dataclasses.replace(done, **result), split_sections(stdout))


class Recorded(BaseRecorded):
    """The check's recorder these tests read."""

    def __init__(self) -> None:
        super().__init__("gpu_xid", NODE.name)


def xid_check(facts: NodeFacts) -> Recorded:
    check = Recorded()
    read = lambda node, check: facts  # noqa: E731
    cluster = SimpleNamespace(expect=GPU, facts=read, gpu_facts=read)
    suite.test_gpu_no_xid_since_boot(cluster, NODE, check)
    return check


def test_split_sections_marks_a_section_without_its_end_line_incomplete():
    out = split_sections(
        section("hostname", "n1") + "\n" + section("gpu_klog", "hpcnet-klog: journalctl", None)
    )
    assert out["hostname"].complete and out["hostname"].text == "n1"
    assert not out["gpu_klog"].complete and out["gpu_klog"].status is None
    assert not split_sections(section("x", "late", 124))["x"].complete  # killed by `timeout`


def test_a_complete_kernel_log_without_xid_passes():
    clean = "hpcnet-klog: journalctl"
    facts = facts_of(section("gpu_klog", clean) + "\n" + section("gpu_query", QUERY))
    assert facts.text("gpu_klog") == clean
    assert xid_check(facts).measured["xid_events"] == 0


def test_a_kernel_log_cut_right_after_its_marker_is_not_no_xid():
    """The Xid lines would have come after the marker: the check is not measured."""
    whole = facts_of(section("gpu_klog", KLOG) + "\n" + section("gpu_query", QUERY))
    with pytest.raises(AssertionError, match="Xid"):
        xid_check(whole)
    cut = facts_of(
        section("gpu_query", QUERY) + "\n" + section("gpu_klog", "hpcnet-klog: journalctl", None),
        exit_status=None,
    )
    with pytest.raises(MissingMeasurement, match=r"n1: facts section 'gpu_klog' cut short"):
        cut.text("gpu_klog")
    with pytest.raises(MissingMeasurement, match="cut short"):
        xid_check(cut)


def test_a_section_running_when_the_facts_command_timed_out_is_not_measured():
    stdout = section("gpu_query", QUERY) + "\n" + section("gpu_klog", KLOG.splitlines()[0], None)
    facts = facts_of(stdout, exit_status=None, timed_out=True)
    assert facts.text("gpu_query") == QUERY.rstrip("\n")  # finished before the kill: kept
    with pytest.raises(MissingMeasurement, match=r"cut short: the facts command timed out"):
        facts.text("gpu_klog")


def test_a_section_killed_by_its_own_timeout_is_not_measured():
    facts = facts_of(section("gpu_klog", "hpcnet-klog: journalctl", 124))
    with pytest.raises(MissingMeasurement, match=r"'gpu_klog' timed out \(exit status 124\)"):
        facts.text("gpu_klog")


def test_output_over_the_size_limit_names_the_cut():
    facts = facts_of(section("gpu_klog", "hpcnet-klog: dmesg", None), truncated=True)
    with pytest.raises(MissingMeasurement, match=r"cut short: .*size limit"):
        facts.text("gpu_klog")


@pytest.mark.parametrize("parallel", [False, True])
def test_the_script_frames_a_killed_section_as_incomplete(parallel):
    """Run by a real shell and killed by `timeout` inside the second section: the first is
    complete, the second has no end line (serial) or is absent (parallel: none printed)."""
    script = sections_script(
        {"first": "echo done", "slow": "echo 'hpcnet-klog: journalctl'; sleep 5; echo late"},
        parallel=parallel,
    )
    run = subprocess.run(
        ["timeout", "1", "sh", "-c", script], capture_output=True, text=True, timeout=20
    )
    assert run.returncode == 124
    found = split_sections(run.stdout)
    if parallel:
        assert found == {}
        return
    assert found["first"].complete and found["first"].text == "done"
    assert not found["slow"].complete and found["slow"].text == "hpcnet-klog: journalctl"


def test_a_killed_parallel_script_leaves_no_temp_folder_on_the_node(tmp_path):
    """The node keeps nothing of an interrupted run: the parallel script's temp folder goes
    with it when it is killed (here by `timeout`, as the transport's timeout does)."""
    marker = tmp_path / "where"
    script = sections_script({"where": f'echo "$d" > {marker}', "slow": "sleep 6"}, parallel=True)
    run = subprocess.run(
        ["timeout", "3", "sh", "-c", script], capture_output=True, text=True, timeout=20
    )
    assert run.returncode == 124
    folder = Path(marker.read_text().strip())
    assert folder.name.startswith("hpcnet-sections.")
    assert not folder.exists()
