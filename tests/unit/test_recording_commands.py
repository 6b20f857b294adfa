"""A check's command records: a long script (the facts) is stored once by digest, not copied
into every record."""

from __future__ import annotations

from pytest_hpcnet.report.evidence import EvidenceBundle, read_output
from pytest_hpcnet.report.recording import COMMAND_INLINE_MAX, Check
from pytest_hpcnet.transport.fanout import CommandResult


def result(command: str) -> CommandResult:
    return CommandResult("node01", command, 0, "out", "", 0.5, 1_700_000_000.0)


def test_a_short_command_is_recorded_as_run(tmp_path):
    bundle = EvidenceBundle(tmp_path / "run")
    check = Check("mtu", "MTU", "node01", "node", "t::x", bundle)
    check.command(result("ip -j link show"))
    assert check.commands[0]["command"] == "ip -j link show"
    assert check.commands[0]["command_digest"] is None


def test_a_long_script_is_stored_once_and_named_by_its_digest(tmp_path):
    bundle = EvidenceBundle(tmp_path / "run")
    script = "echo begin\n" + "true; " * COMMAND_INLINE_MAX
    checks = [Check(c, c, "node01", "node", f"t::{c}", bundle) for c in ("a", "b")]
    for check in checks:
        check.command(result(script))
    first, second = (c.commands[0] for c in checks)
    assert first["command_digest"] == second["command_digest"]
    assert read_output(bundle.run_dir, first["command_digest"]) == script
    assert len(first["command"]) < 200
    assert first["command"].startswith("echo begin")
    assert first["command_digest"][:16] in first["command"]


def test_a_command_read_twice_by_one_check_is_recorded_once(tmp_path):
    """A check reads its node's facts, then a GPU phase that reads them again: the facts
    command stands once in its evidence."""
    check = Check("gpu_dcgm", "DCGM", "node01", "node", "t::x", None)
    facts = CommandResult("node01", "facts", 0, "out", "", 0.1, 0.0)
    check.command(facts)
    check.command(facts)
    check.command(CommandResult("node01", "dcgmi diag -r 2 -j", 0, "{}", "", 1.0, 0.0))
    assert [c["command"] for c in check.commands] == ["facts", "dcgmi diag -r 2 -j"]
