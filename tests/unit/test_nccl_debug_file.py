"""The NCCL campaign keeps NCCL's INFO lines out of rank 0's table (NCCL_DEBUG_FILE per
process, read back from every node) and names the node that stopped answering (findings 1
and 4 of the NCCL review)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from pytest_hpcnet.probes.nccl import parse_nccl
from pytest_hpcnet.probes.nccl_debug import parse_nccl_debug
from pytest_hpcnet.requirements import judges
from pytest_hpcnet.requirements.verdict import NotMeasured
from pytest_hpcnet.suites import test_nccl as suite
from pytest_hpcnet.transport.fanout import CommandResult
from tests.conftest import FIXTURES
from tests.unit.test_nccl_output import OLD_USAGE, TABLE, FakeTransport, _nodes, campaign
from tests.unit.test_nccl_verdict import GCP_RUN, fake_check, fake_cluster
from tests.unit.test_nccl_verdict import launch as verdict_launch

INFO_B = (
    "gpu-node-b:39810:39890 [0] NCCL INFO NET/IB : Using [0]erdma_0:1/RoCE [RO]; OOB eth0:x<0>\n"
    "gpu-node-b:39810:39890 [0] NCCL INFO Using network IB\n"
)
INFO_A = "gpu-node-a:41201:41290 [0] NCCL INFO Using network IB\n"
ROW = "[1,0]<stdout>:     4194304       1048576     float     sum      -1    412.6   10.17   15.25"
REST = "      0    410.1   10.23   15.34      0"


def launch(transport: FakeTransport):
    c = campaign(transport, 2, "1G")
    return c, c.run_launch(_nodes("a", "b"))


def test_info_lines_go_to_a_file_per_process_and_are_read_back_from_every_node():
    transport = FakeTransport(OLD_USAGE, TABLE.replace(INFO_B.split("\n")[0], ""), None)
    transport.debug = {"a": INFO_A, "b": INFO_B}
    _, done = launch(transport)
    pattern = re.search(r"NCCL_DEBUG_FILE=(\S+)", done.run.command).group(1)
    assert re.fullmatch(r"/tmp/hpcnet-nccl-[0-9a-f]{12}\.debug\.%h\.%p", pattern)
    assert "-x NCCL_DEBUG_FILE=" in done.run.command  # every rank gets it (mpirun -x)
    reads = [(n, cmd) for n, cmd in transport.calls if cmd.startswith("for f in ")]
    assert [n for n, _ in reads] == ["a", "b"]
    glob = pattern.split("%")[0]
    assert f"for f in {glob}*;" in reads[0][1] and "rm -f --" in reads[0][1]
    log = parse_nccl_debug(done.info)
    assert log.host("gpu-node-b").networks == ("IB",) and log.host("gpu-node-a")
    assert done.result.ok and judges.judge_nccl_run(done.result, done.run)


def test_info_lines_still_printed_inside_the_table_are_not_measured_never_a_failure():
    # a binary that ignores NCCL_DEBUG_FILE: other ranks' lines cut rank 0's row
    cut = TABLE.replace(ROW + REST, ROW + "\n[1,2]<stdout>:" + INFO_B + "[1,0]<stdout>:" + REST)
    assert cut != TABLE
    transport = FakeTransport(OLD_USAGE, cut, None)
    _, done = launch(transport)
    assert done.result.silent_nodes == ()
    verdict = judges.judge_nccl_run(done.result, done.run)
    assert verdict.outcome == "not_measured" and "unreadable row" in verdict.reason
    assert parse_nccl_debug(done.info).host("gpu-node-b").networks == ("IB",)


class Stops(FakeTransport):
    """node b stops answering mid-run: the launch times out with half a table."""

    def run(self, node, command, timeout):
        out = super().run(node, command, timeout)
        if " all_reduce_perf " in command and "-h" not in command.split():
            half = out.stdout.split("    16777216")[0]
            return CommandResult(node, command, None, half, "", 300.0, 0.0, timed_out=True)
        return out


def test_a_node_that_stops_answering_is_named_and_the_run_not_measured():
    transport = Stops(OLD_USAGE, TABLE, None)
    transport.silent = {"b"}
    _, done = launch(transport)
    assert done.result.silent_nodes == ("b",)
    verdict = judges.judge_nccl_run(done.result, done.run)
    assert verdict.outcome == "not_measured"
    assert verdict.reason.startswith("b stopped answering during all_reduce_perf")


def test_the_launchers_lost_daemon_message_names_the_node():
    lost = (
        "ORTE has lost communication with a remote daemon.\n\n"
        "  HNP daemon   : [[62034,0],0] on node gpu-node-a\n"
        "  Remote daemon: [[62034,0],1] on node gpu-node-b\n"
    )

    class Lost(FakeTransport):
        def run(self, node, command, timeout):
            out = super().run(node, command, timeout)
            if " all_reduce_perf " in command and "-h" not in command.split():
                half = out.stdout[: out.stdout.index("    16777216")]
                return CommandResult(node, command, 1, half, lost, 30.0, 0.0)
            return out

    _, done = launch(Lost(OLD_USAGE, TABLE, None))
    assert done.result.silent_nodes == ("b",)
    verdict = judges.judge_nccl_run(done.result, done.run)
    assert verdict.outcome == "not_measured" and "b stopped answering" in verdict.reason


def test_a_node_without_ranks_in_a_failed_run_is_named():
    text = (FIXTURES / "nccl" / "allreduce-2node-tag-output-warn.txt").read_text()
    only_a = "".join(ln for ln in text.splitlines(True) if "on gpu-node-b device" not in ln)
    only_a = only_a[: only_a.index("[1,0]<stdout>:    16777216")]
    transport = Stops(OLD_USAGE, only_a, None)
    _, done = launch(transport)
    assert done.result.silent_nodes == ("b",)


def test_a_run_that_passes_names_nobody():
    transport = FakeTransport(OLD_USAGE, TABLE, None)
    _, done = launch(transport)
    assert done.result.ok and done.result.silent_nodes == ()


def test_an_output_cut_mid_number_stays_cut_through_the_campaign():
    cut = TABLE[: TABLE.index("20.2613") + 4]  # `# Avg bus bandwidth    : 20.2`, no newline
    _, done = launch(FakeTransport(OLD_USAGE, cut, None))
    assert not done.result.ok and done.result.avg_busbw_gbs is None
    assert judges.judge_nccl_run(done.result, done.run).outcome == "not_measured"


def test_output_cut_at_the_transports_limit_is_not_measured():
    _, done = launch(FakeTransport(OLD_USAGE, TABLE, None))
    cut = CommandResult("node01", "mpirun", 0, TABLE, "", 1.0, 0.0, truncated=True)
    verdict = judges.judge_nccl_run(done.result, cut)
    assert verdict.outcome == "not_measured" and "cut at the transport's limit" in verdict.reason


def test_the_suite_names_the_silent_node_as_suspect_and_does_not_measure():
    cut = TABLE.split("    16777216")[0]
    result = dataclasses.replace(parse_nccl(cut), silent_nodes=("node03",))
    check = fake_check()
    cluster = fake_cluster(result, verdict_launch(None, cut), GCP_RUN)
    with pytest.raises(NotMeasured, match="node03 stopped answering"):
        suite.test_average_bus_bandwidth(cluster, check)
    assert check.suspects == ["node03"]
