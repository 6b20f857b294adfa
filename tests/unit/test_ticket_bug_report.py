"""`hpcnet ticket --bug-report`: nvidia-bug-report.sh run on the node (here the lab's
emulation, run through a local stand-in for the node's SSH), its log in the bundle compressed
and redacted, the summary unchanged; bounded in time and size."""

from __future__ import annotations

import base64
import gzip
import os
import subprocess
import time
from pathlib import Path

from pytest_hpcnet.cli import main
from pytest_hpcnet.lab.control_plane import KEY_ID
from pytest_hpcnet.lab.emulation import install_tools
from pytest_hpcnet.lab.state import LabNode, LabState
from pytest_hpcnet.report.ticket import (
    SUMMARY,
    read_ticket,
    register_run_credentials,
    write_ticket,
)
from pytest_hpcnet.report.ticket_bug_report import (
    LOG,
    MARK,
    bug_report_command,
    collect_bug_report,
    parse_bug_report,
)
from pytest_hpcnet.transport.results import CommandResult
from tests.unit.test_ticket import _forget_secrets, run

FIXTURES = Path(__file__).parents[1] / "fixtures" / "repair"
__all__ = ["_forget_secrets", "run"]


def lab_node(tmp_path: Path) -> dict[str, str]:
    """The environment of lab node02 run here: the emulated tools first on PATH."""
    (tmp_path / "lab").mkdir()
    state = LabState(str(tmp_path / "lab"), "lab.yaml", nodes=[LabNode("node02", "198.18.0.12", 1)])
    state.save()
    bin_dir = install_tools(state)
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HPCNET_LAB_NODE": "node02",
        "HPCNET_LAB_STATE": state.root,
    }


def local_run(env: dict[str, str]):
    """The node's SSH, stood in for by a local shell with the node's environment."""

    def run_command(command: str, timeout_s: float) -> CommandResult:
        started = time.monotonic()
        proc = subprocess.run(
            ["sh", "-c", command], capture_output=True, text=True, env=env, timeout=timeout_s
        )
        took = time.monotonic() - started
        return CommandResult("node02", command, proc.returncode, proc.stdout, proc.stderr, took, 0)

    return run_command


def test_the_emulation_prints_the_real_message_and_writes_its_log(tmp_path):
    env = lab_node(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(
        ["nvidia-bug-report.sh"], capture_output=True, text=True, env=env, cwd=work, check=True
    )
    assert proc.stdout == (FIXTURES / "nvidia-bug-report-stdout.txt").read_text()
    text = gzip.decompress((work / LOG).read_bytes()).decode()
    assert "Start of NVIDIA bug report log file.  Please include this file, along" in text
    assert "==============NVSMI LOG==============" in text


def test_the_bundle_holds_the_log_redacted_and_the_summary_unchanged(run, tmp_path):
    run_dir, secret, _, key = run
    env = lab_node(tmp_path)
    klog = Path(env["HPCNET_LAB_STATE"]) / "nodes" / "node02" / "kernel.log"
    klog.parent.mkdir(parents=True, exist_ok=True)
    klog.write_text(f"[  12.5] leaked access_key_secret = {secret} by {KEY_ID}\n")
    register_run_credentials(run_dir)
    report = collect_bug_report(local_run(env), timeout_s=60)
    assert report.data and report.exit_status == 0 and report.note.endswith("from the node")
    plain = tmp_path / "plain.tar.gz"
    with_log = tmp_path / "with-log.tar.gz"
    write_ticket(run_dir, "node02", plain, key)
    write_ticket(run_dir, "node02", with_log, key, bug_report=report)
    files, before = read_ticket(with_log), read_ticket(plain)
    assert files[SUMMARY] == before[SUMMARY]
    text = gzip.decompress(files[LOG]).decode()
    assert "nvidia-bug-report.sh Version: hpcnet-lab-emulation" in text
    assert "leaked access_key_secret" in text
    assert secret not in text and KEY_ID not in text
    assert b'"file": "nvidia-bug-report.log.gz"' in files["ticket.json"]
    assert not list(Path("/var/tmp").glob("hpcnet-bug-report.*/" + LOG))


def test_timed_out_too_large_and_missing_are_said():
    partial = gzip.compress(b"Start of NVIDIA bug report log file.\n" * 200)[:-40]
    cut = parse_bug_report(
        f"{MARK} 124 {len(partial)} /var/tmp/x\n" + base64.b64encode(partial).decode()
    )
    assert cut.data == partial and cut.timed_out and cut.note.endswith("timed out: incomplete")
    big = parse_bug_report(f"{MARK} 0 98765432 /var/tmp/hpcnet-bug-report.ab12\n")
    assert big.data is None and "left on the node in /var/tmp/hpcnet-bug-report.ab12" in big.note
    hung = parse_bug_report(f"{MARK} 124 0 /var/tmp/x\n")
    assert hung.note == "no report: nvidia-bug-report.sh timed out before writing it"
    assert parse_bug_report("bash: nvidia-bug-report.sh: command not found").data is None
    assert "timeout -k 10 30 nvidia-bug-report.sh" in bug_report_command(30)


def test_a_cut_log_is_redacted_as_far_as_it_goes():
    from pytest_hpcnet.report.ticket_bug_report import redacted

    whole = "".join(f"line {i * 7919 % 10007}\n" for i in range(3000)).encode()
    data = gzip.compress(whole)[: -len(gzip.compress(whole)) // 3]
    text = gzip.decompress(redacted(data, str.upper)).decode()
    assert text.startswith("LINE 0\nLINE 7919\n") and 1000 < len(text) < len(whole)


def test_bug_report_needs_the_inventory(run, capsys):
    run_dir, _, _, key = run
    argv = ["ticket", str(run_dir), "node02", "--sign-key", str(key), "--bug-report"]
    assert main(argv) == 2
    assert "--bug-report runs on the node: give --inventory" in capsys.readouterr().out
