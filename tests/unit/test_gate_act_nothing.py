"""`hpcnet gate run --act` with neither a `scheduler:` block nor an `actions:` command has
nothing to act with: it says so in one line instead of acting on nothing silently."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_hpcnet.gate import run as gate_run

BARE = "cluster: {name: c, region: r}\nnodes:\n  - {name: n1, host: 198.18.0.201}\n"
NOTHING = "hpcnet gate: --act: the inventory has no scheduler: (kind: slurm) and no actions:"


def gate(tmp_path: Path, text: str, act: bool, monkeypatch, capsys) -> str:
    (tmp_path / "inv.yaml").write_text(text)
    monkeypatch.setattr(gate_run, "_run_locked", lambda *a: 0)
    args = argparse.Namespace(
        inventory=tmp_path / "inv.yaml", reports_dir=tmp_path / "r", act=act, bench=False
    )
    assert gate_run.run(args) == 0
    return capsys.readouterr().out


def test_act_with_nothing_to_act_with_says_so(tmp_path, monkeypatch, capsys):
    (line,) = [ln for ln in gate(tmp_path, BARE, True, monkeypatch, capsys).splitlines()]
    assert line.startswith(NOTHING)


def test_no_line_without_act_or_with_something_to_act_with(tmp_path, monkeypatch, capsys):
    assert NOTHING not in gate(tmp_path, BARE, False, monkeypatch, capsys)
    hook = BARE + "actions: {command: 'ticket {node}'}\n"
    assert NOTHING not in gate(tmp_path, hook, True, monkeypatch, capsys)
