"""`--hpcnet-baseline auto`: the latest good run of the same cluster (and scope), by the
controller's clock; none is said, not an error."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pytest_hpcnet.report.baseline import choose_baseline, good_runs
from pytest_hpcnet.report.evidence import EvidenceBundle

pytest_plugins = ["pytester"]

NIGHT = datetime(2026, 11, 20, 2, 0, tzinfo=timezone.utc)


def make_run(
    reports: Path,
    run_id: str,
    *,
    cluster: str = "prod",
    started: datetime = NIGHT,
    verdict: str = "pass",
    bw: float = 100.0,
    node_clock: timedelta = timedelta(0),
    scope: dict | None = None,
    close: bool = True,
) -> Path:
    """A run folder written through the real bundle; `node_clock` skews the record times
    (as if taken from a node whose clock is off), never the summary's controller time."""
    bundle = EvidenceBundle(reports / run_id, run_id)
    bundle.started_at = started
    bundle.append(
        {
            "check_id": "ib_write_bw",
            "requirement": "RDMA write bandwidth",
            "subject": "n1->n2",
            "kind": "pair",
            "verdict": verdict,
            "measured": [{"name": "bw_avg", "value": bw, "comparison": ">=", "threshold": 50}],
            "started_at": (started + node_clock).isoformat(),
            "ended_at": (started + node_clock + timedelta(seconds=5)).isoformat(),
        }
    )
    if close:
        facts: dict = {"cluster": cluster, "ended_at": started + timedelta(minutes=2)}
        if scope is not None:
            facts["scope"] = scope
        bundle.close(facts)
    return reports / run_id


def test_latest_good_run_of_the_same_cluster_is_chosen(tmp_path):
    make_run(tmp_path, "r1", started=NIGHT)
    good = make_run(tmp_path, "r2", started=NIGHT + timedelta(days=1))
    make_run(tmp_path, "r3", started=NIGHT + timedelta(days=2), verdict="fail")  # REJECTED
    make_run(tmp_path, "r4", started=NIGHT + timedelta(days=3), cluster="other")
    make_run(tmp_path, "r5", started=NIGHT + timedelta(days=4), close=False)  # never closed
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "summary.json").write_text("{not json")
    choice = choose_baseline(tmp_path, "prod")
    assert choice.run_dir == good
    assert choice.line() == "baseline auto: r2 (ACCEPTED, started 2026-11-21 02:00:00 UTC)"


def test_no_good_run_is_said_and_not_an_error(tmp_path):
    make_run(tmp_path, "r1", verdict="fail")
    choice = choose_baseline(tmp_path, "prod")
    assert choice.run_dir is None
    assert "no earlier ACCEPTED/PASSED run of cluster prod" in choice.line()
    assert choose_baseline(tmp_path / "absent", "prod").run_dir is None


def test_a_partial_run_is_a_baseline_only_for_the_same_selection(tmp_path):
    static = {"handover": False, "label": "static checks", "selection": "-m static"}
    make_run(tmp_path, "full", started=NIGHT)
    make_run(tmp_path, "static", started=NIGHT + timedelta(days=1), scope=static)
    mtu = {**static, "selection": "-k mtu"}
    make_run(tmp_path, "mtu", started=NIGHT + timedelta(days=2), scope=mtu)
    assert choose_baseline(tmp_path, "prod", "-m static").run_dir.name == "static"
    assert choose_baseline(tmp_path, "prod", "-m benchmark").run_dir.name == "full"


def test_a_node_clock_ahead_does_not_change_the_choice(tmp_path):
    """Order is the controller's start in summary.json: a run whose records carry times from a
    node 3 days ahead is still the older one."""
    make_run(tmp_path, "a-skewed", started=NIGHT, node_clock=timedelta(days=3))
    newer = make_run(tmp_path, "b", started=NIGHT + timedelta(days=1))
    assert [p.name for p, _ in good_runs(tmp_path, "prod")] == ["a-skewed", "b"]
    assert choose_baseline(tmp_path, "prod").run_dir == newer


def test_a_node_clock_past_a_waiver_expiry_does_not_change_the_verdict(tmp_path):
    """Waivers are judged on the controller's UTC start date, not on record times."""
    bundle = EvidenceBundle(tmp_path / "w", "w")
    bundle.started_at = NIGHT
    waiver = {"check": "mtu", "reason": "ticket 7", "by": "QA", "expires": "2026-11-21"}
    skewed = (NIGHT + timedelta(days=5)).isoformat()  # the node thinks it is the 25th
    bundle.append(
        {
            "check_id": "mtu",
            "requirement": "MTU",
            "subject": "n1",
            "verdict": "waived",
            "waiver": waiver,
            "started_at": skewed,
            "ended_at": skewed,
        }
    )
    assert bundle.close({"cluster": "prod"}).verdict == "ACCEPTED"


INVENTORY = """\
cluster: {name: unit, region: cn-test}
ssh: {connect_timeout_s: 1, connect_retries: 1}
nodes:
  - {name: "n[1-2]", host: "198.18.0.[201-202]"}
"""

SUITE = """\
import os, pytest

@pytest.mark.check("ib_write_bw", "RDMA write bandwidth")
def test_bandwidth(check):
    value = float(os.environ["HX_BW"])
    check.measure("bw_avg", value, "Gbit/s", 50.0, ">=", "expect.ib_write_bw")
    assert value >= 50.0
"""


def test_auto_through_pytest(pytester: pytest.Pytester, monkeypatch):
    """First night: none, said; second: compared with the first; a REJECTED night is never
    chosen, so the third night still compares with the first."""
    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_suite=SUITE)
    args = (".", "--inventory", "inv.yaml", "--reports-dir", "r", "--hpcnet-baseline", "auto")
    monkeypatch.setenv("HX_BW", "100")
    first = pytester.runpytest(*args)
    assert first.ret == 0
    first.stdout.fnmatch_lines(["hpcnet: baseline auto: no earlier ACCEPTED/PASSED run*"])
    (run1,) = [p for p in (pytester.path / "r").iterdir() if p.is_dir()]
    monkeypatch.setenv("HX_BW", "40")  # below the bound: REJECTED
    assert pytester.runpytest(*args).ret == 1
    monkeypatch.setenv("HX_BW", "80")  # -20 % against night 1: a regression
    third = pytester.runpytest(*args)
    # a site's checks alone are a partial run: night 1 was PASSED
    third.stdout.fnmatch_lines([f"hpcnet: baseline auto: {run1.name} (PASSED*"])
    third.stdout.fnmatch_lines(["*80 vs baseline 100 (-20.0 %*"])
    assert third.ret == 1
    runs = [p for p in (pytester.path / "r").iterdir() if p.is_dir()]
    summaries = [json.loads((p / "summary.json").read_text()) for p in runs]
    chosen = [s["baseline"] for s in summaries if s["run_id"] != run1.name]
    assert all(line.startswith(f"baseline auto: {run1.name} ") for line in chosen)
