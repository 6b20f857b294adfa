"""Where the NCCL campaign reads all_reduce_perf's result (campaigns/nccl/output.py): the `-J`
JSON file when the binary's usage text lists it, else the table; both fail closed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

from pytest_hpcnet.campaigns.nccl.campaign import NcclCampaign
from pytest_hpcnet.campaigns.nccl.output import kept_text, offers_json, rank0_node
from pytest_hpcnet.inventory.bench_settings import BenchmarkSettings
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.nccl import parse_nccl
from pytest_hpcnet.transport.fanout import CommandResult
from tests.corpus import sample

FIXTURES = Path(__file__).parent.parent / "fixtures" / "nccl"
OLD_USAGE = (FIXTURES / "derived-usage-2.13.8-no-json.txt").read_text()
NEW_USAGE = (FIXTURES / "derived-usage-2.19.6-json.txt").read_text()
TABLE = (FIXTURES / "allreduce-2node-tag-output-warn.txt").read_text()
JSON = sample("nccl_allreduce", "h200-nccl-tests-2.19.6-g1-json.json").read_text()


def _done(node: str, command: str, stdout: str = "", status: int = 0) -> CommandResult:
    return CommandResult(node, command, status, stdout, "", 0.1, 0.0)


class FakeTransport:
    """Answers the usage probe, the launch and the JSON read-back; records every call."""

    def __init__(self, usage: str, table: str, json_text: str | None, json_status: int = 0):
        self.usage, self.table, self.json, self.status = usage, table, json_text, json_status
        self.calls: list[tuple[str, str]] = []
        self.debug: dict[str, str] = {}  # each node's NCCL debug files, as read back
        self.silent: set[str] = set()  # nodes that no longer answer

    def run_on_all(self, command, nodes, timeout_s=None) -> dict[str, CommandResult]:
        return {n: self.run(n, command, timeout_s or 0) for n in nodes}

    def run(self, node: str, command: str, timeout: float) -> CommandResult:
        self.calls.append((node, command))
        if node in self.silent:
            return CommandResult(node, command, None, "", "", 30.0, 0.0, unreachable="lost")
        if command.startswith("for f in /tmp/hpcnet-nccl-"):
            return _done(node, command, self.debug.get(node, ""))
        if command.startswith("all_reduce_perf -h"):
            return _done(node, command, self.usage)
        if command.startswith("cat -- "):
            return _done(node, command, self.json or "", self.status if self.json else 1)
        asked = re.search(r" -J (\S+)", command)
        wrote = f"# Writing JSON output to {asked.group(1)}\n" if asked else ""
        return _done(node, command, wrote + self.table)


def campaign(transport: FakeTransport, nodes: int, e: str) -> NcclCampaign:
    # -b 1M and -f as the fixture ran (the 2-node table steps by 4, the JSON file by 2)
    args = {"b": "1M", "e": e, "f": 4 if nodes == 2 else 2, "g": 1, "c": 1}
    inventory = SimpleNamespace(
        expect=Expectations(),
        benchmarks=BenchmarkSettings(nccl={"gpus_per_node": 1 if nodes == 1 else 2, "args": args}),
    )
    hostnames = {"n1": "vm", "a": "gpu-node-a", "b": "gpu-node-b"}
    facts = SimpleNamespace(
        inventory=inventory,
        transport=transport,
        listed_eris=lambda node: ["erdma_0"],
        gid_index=lambda node, dev: 1,
        gather=lambda: {
            n: SimpleNamespace(whole={"hostname": h + "\n"}.get) for n, h in hostnames.items()
        },
    )
    return NcclCampaign(facts)


def _nodes(*names: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(name=n, host=n, interface="eth0") for n in names]


def test_usage_text_tells_json_support():
    assert offers_json(NEW_USAGE) and not offers_json(OLD_USAGE)


def test_binary_without_json_falls_back_to_the_table():
    transport = FakeTransport(OLD_USAGE, TABLE, JSON)
    c = campaign(transport, 2, "1G")
    parsed, run, extras = c.launch(_nodes("a", "b"))
    assert " -J " not in run.command and [e.command for e in extras] == [transport.calls[0][1]]
    assert parsed.ok and parsed.max_size_bytes == 1073741824 and len(parsed.ranks) == 4
    assert not any(cmd.startswith("cat") for _, cmd in transport.calls)


def test_json_file_is_the_result_and_is_kept_as_evidence():
    transport = FakeTransport(NEW_USAGE, TABLE, JSON)
    c = campaign(transport, 1, "256M")
    parsed, run, extras = c.launch(_nodes("n1"))
    path = re.search(r" -J (/tmp/hpcnet-nccl-\w+\.json)", run.command).group(1)
    assert parsed.ok and len(parsed.rows) == 9 and parsed.nccl_version == 22803
    assert ("n1", f"cat -- {path}; status=$?; rm -f -- {path}; exit $status") in transport.calls
    kept = json.loads(extras[-1].stdout)
    assert kept["results"] == json.loads(JSON)["results"]
    assert all(e.startswith(("NCCL_", "CUDA", "NVIDIA_")) for e in kept["env"])
    c.launch(_nodes("n1"))
    probes = [cmd for _, cmd in transport.calls if cmd.startswith("all_reduce_perf -h")]
    assert len(probes) == 1  # asked once per node


def test_json_path_fails_closed_like_the_table():
    cut = FakeTransport(NEW_USAGE, TABLE, JSON[: len(JSON) // 2])
    parsed, _, _ = campaign(cut, 1, "256M").launch(_nodes("n1"))
    assert not parsed.ok and "unparseable JSON" in parsed.error and "cut short" in parsed.error
    missing = FakeTransport(NEW_USAGE, TABLE, None)
    parsed, _, _ = campaign(missing, 1, "256M").launch(_nodes("n1"))
    assert not parsed.ok and "not read" in parsed.error
    short = json.loads(JSON)
    del short["results"][4:]
    fewer = FakeTransport(NEW_USAGE, TABLE, json.dumps(short))
    parsed, _, _ = campaign(fewer, 1, "256M").launch(_nodes("n1"))
    assert not parsed.ok and "output ends at" in parsed.error


def test_no_json_written_is_an_error_with_the_tables_reason():
    class Silent(FakeTransport):
        def run(self, node, command, timeout):
            out = super().run(node, command, timeout)
            if " -J " not in command:
                return out
            text = re.sub(r"# Writing JSON output to \S+\n", "", out.stdout)
            return CommandResult(node, command, 1, text, "", 0.1, 0.0)

    failed = Silent(NEW_USAGE, "node1: Test NCCL failure common.cu:1 'unhandled'\n", JSON)
    parsed, _, extras = campaign(failed, 1, "256M").launch(_nodes("n1"))
    assert not parsed.ok and parsed.error.startswith("no JSON result (-J /tmp/hpcnet-nccl-")
    assert "the table:" in parsed.error and len(extras) == 1


def test_rank0_node_and_kept_text():
    table = parse_nccl(TABLE)
    names = {"a": "gpu-node-a.example", "b": "gpu-node-b"}
    assert rank0_node(table, ["b", "a"], names.__getitem__) == "a"
    assert rank0_node(parse_nccl(""), ["b", "a"], names.__getitem__) == "b"
    cut = '{"version": 3, "args": [], "env": ["SECRET=x", "NCCL_DEBUG=INFO"], "nccl_ver'
    assert "SECRET" not in kept_text(cut) and kept_text(cut).startswith('{"version": 3')
