"""The trends page lists the gate's repairs (code, repair, times, outcome) and names a node
that keeps coming back, from the same `gate.jsonl` records as `hpcnet trends` prints."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from pytest_hpcnet.gate.history import history, repair_lines, repairs
from pytest_hpcnet.report.trends_page import render_trends
from tests.week import write_week

NOW = datetime(2026, 12, 3, tzinfo=timezone.utc)


def gate_entry(reports, run_id: str, at: str, *repaired: dict) -> None:
    folder = reports / ".gate" / run_id
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"at": at, "cluster": "prod", "repair": list(repaired)}
    (folder / "gate.jsonl").write_text(json.dumps(entry) + "\n")


def test_page_lists_the_repairs_and_the_returning_node(tmp_path):
    write_week(tmp_path, nights=2)
    xid = {"node": "node05", "codes": ["HPCNET-GPU-XID-94"], "classes": ["reset"]}
    gate_entry(
        tmp_path,
        "20261120-020000-aa01",
        "2026-11-20T02:40:00+00:00",
        {**xid, "action": "reboot", "outcome": "resumed", "reboot_to_ssh_s": 61.5,
         "ssh_to_accepted_s": 402.0, "why": "re-accepted; suspect"},
        {"node": "node02", "codes": ["HPCNET-MTU"], "classes": ["config"],
         "outcome": "not_repaired", "why": "HPCNET-MTU (config): never reset or rebooted"},
    )  # fmt: skip
    gate_entry(
        tmp_path,
        "20261127-020000-aa02",
        "2026-11-27T02:40:00+00:00",
        {**xid, "codes": ["HPCNET-GPU-ECC-DBE"], "action": "reset", "outcome": "failed",
         "reset_s": 3.2, "ssh_to_accepted_s": 380.4, "why": "failed the re-acceptance"},
    )  # fmt: skip
    found = history(tmp_path, "prod")
    assert [(r.node, r.action, r.outcome) for r in found.repairs] == [
        ("node05", "reboot", "resumed"),
        ("node05", "reset", "failed"),
    ]
    html = render_trends(found, NOW)
    section = html.split('<h2 id="repairs">')[1].split("<h2")[0]
    rows = section.split('<tr class="repair ')[1:]
    assert len(rows) == 2 and "node02" not in section  # no repair tried: not listed
    assert "2026-11-20 02:40" in rows[0] and "HPCNET-GPU-XID-94" in rows[0]
    assert ">reboot<" in rows[0] and ">61.5 s<" in rows[0] and ">402.0 s<" in rows[0]
    assert ">resumed<" in rows[0] and 'title="re-accepted; suspect"' in rows[0]
    assert ">reset<" in rows[1] and ">3.2 s<" in rows[1] and ">failed<" in rows[1]
    assert "Returning node05</strong>: 2 repairs since 2026-11-20" in section
    assert "HPCNET-GPU-ECC-DBE, HPCNET-GPU-XID-94" in section
    terminal = repair_lines(repairs(tmp_path, "prod"))
    assert len(terminal) == 3 and terminal[-1].startswith("returning node05: 2 repairs since")


def test_page_without_repairs_says_so(tmp_path):
    write_week(tmp_path, nights=2)
    html = render_trends(history(tmp_path, "prod"), NOW)
    assert 'id="no-repairs"' in html and '<table class="repairs">' not in html
