"""The trends page over a synthetic week (tests/week.py): regressions against the previous good
run, counters as deltas, flapping nodes, one self-contained page a real browser renders."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from pytest_hpcnet import cli
from pytest_hpcnet.gate.history import history, write_run_digest
from pytest_hpcnet.report import trends
from pytest_hpcnet.report.evidence import read_records, read_summary
from pytest_hpcnet.report.trends import DIGEST_FILE, flapped
from pytest_hpcnet.report.trends_page import render_trends
from tests.lab.test_certificate_browser import chromium
from tests.week import ERRORS, FIRST_NIGHT, FLAPPING, REBOOTED, REGRESSING, write_week

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def week(tmp_path_factory) -> Path:
    reports = tmp_path_factory.mktemp("reports")
    write_week(reports)
    write_week(
        reports, nights=2, cluster="staging", first=FIRST_NIGHT + timedelta(hours=1)
    )  # another cluster in the same folder
    return reports


def series(found, check_id, name, subject):
    (one,) = [
        s
        for s in found.series
        if (s.figure.check_id, s.figure.name, s.subject) == (check_id, name, subject)
    ]
    return one


def test_regressions_are_node05_from_night_5_only(week):
    found = history(week, "prod")
    assert len(found.runs) == 7
    marked = {(s.figure.check_id, s.subject, i) for s, i in found.regressions()}
    subjects = {subject for _, subject, _ in marked}
    assert subjects == {"node05", "node04->node05", "node05->node06"}
    assert {i for _, _, i in marked} == {4, 5, 6}  # nights 5, 6, 7 (0-based 4..6)
    bw = series(found, "ib_write_bw", "bw_avg", "node04->node05")
    assert "in good run " + found.runs[3].run_id in bw.points[4].note  # night 4: last good
    busbw = series(found, "nccl_busbw", "avg_busbw", "cluster")
    assert not busbw.marked  # -7 %: within the 10 % tolerance
    tighter = history(week, "prod", tolerance=0.05).regressions()
    assert "cluster" in {s.subject for s, _ in tighter}  # the same series at 5 %


def test_counters_are_deltas_not_totals(week):
    found = history(week, "prod")
    errors = series(found, "tuning", "errors", ERRORS)
    assert [p.shown for p in errors.points] == [None, 0, 0, 0, 0, 150, 0]
    assert [p.mark for p in errors.points].count("increase") == 1
    rebooted = series(found, "tuning", "errors", REBOOTED)
    assert rebooted.points[3].mark == "reset"
    assert not any(s.marked for s in found.series if s.figure.name == "dropped")  # noise


def test_flapping(week):
    found = history(week, "prod")
    assert found.flapped == [FLAPPING]
    assert found.node_status[FLAPPING][:4] == ["pass", "pass", "fail", "pass"]
    assert found.node_status[REGRESSING][3:5] == ["pass", "fail"]  # failed once: not flapping
    assert flapped(["pass", "unjudged", "fail", "", "pass"])
    assert not flapped(["fail", "fail", "pass", "pass"])


def test_cli_writes_the_page_and_says_the_latest_regressed(week, tmp_path, capsys):
    out = tmp_path / "t.html"
    assert cli.main(["trends", str(week), "--cluster", "prod", "-o", str(out)]) == 1
    said = capsys.readouterr().out
    assert "cluster prod, 7 runs" in said and "flapped: node03" in said
    assert cli.main(["trends", str(week), "--cluster", "staging", "-o", str(out)]) == 0
    assert cli.main(["trends", str(week), "--cluster", "nope", "-o", str(out)]) == 2


def test_page_is_self_contained(week):
    page = render_trends(history(week, "prod"))
    assert "<script" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert page.count('class="pt regression"') == 24


def test_week_in_a_browser(week, tmp_path):
    page = tmp_path / "trends.html"
    assert cli.main(["trends", str(week), "--cluster", "prod", "-o", str(page)]) == 1
    dom = chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    rows = re.findall(r'<tr class="regression"[^>]*data-subject="([^"]+)"', dom)
    assert set(rows) == {"node05", "node04-&gt;node05", "node05-&gt;node06"}
    assert re.search(r'<tr class="flapped" data-node="node03">', dom)
    card = re.search(
        r'<div class="card marked" data-subject="node04-&gt;node05">(.*?)</svg>', dom, re.S
    )
    assert card and 'class="badge regression"' in card.group(1)
    assert card.group(1).count('class="pt regression"') == 3
    shot = ROOT / "reports" / "trends-week.png"
    shot.parent.mkdir(exist_ok=True)
    chromium(tmp_path, "--window-size=1300,2400", f"--screenshot={shot}", page.as_uri())
    assert shot.stat().st_size > 10_000


def shape(found):
    """Everything a history page shows, as plain data."""
    series = [
        (s.figure, s.subject, s.unit, s.comparison, [(p.value, p.shown, p.mark) for p in s.points])
        for s in found.series
    ]
    return found.runs, series, found.node_status, found.flapped, found.skipped


@pytest.fixture
def digested_week(tmp_path) -> Path:
    reports = tmp_path / "reports"
    reports.mkdir()
    write_week(reports)
    return reports


def digest_every_run(reports: Path) -> None:
    for run_dir in sorted(p for p in reports.iterdir() if p.is_dir()):
        write_run_digest(run_dir, read_summary(run_dir), read_records(run_dir))


def test_history_from_digests_is_the_history_from_evidence(digested_week, monkeypatch):
    from_evidence = shape(history(digested_week, "prod"))
    digest_every_run(digested_week)

    def no_evidence(run_dir):
        raise AssertionError(f"evidence read although {run_dir} has a digest")

    monkeypatch.setattr(trends, "read_records", no_evidence)
    assert shape(history(digested_week, "prod")) == from_evidence
    assert len(from_evidence[0]) == 7 and from_evidence[3] == [FLAPPING]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data.update(version=0),  # another version
        lambda data: data["figures"].pop(),  # written for another figure list
        lambda data: data.update(node_status=None),  # without the gate's node judgements
        lambda data: data["points"][0].pop(),  # a malformed point
        lambda data: data["points"][0].__setitem__(0, "nope"),  # a figure it does not know
    ],
)
def test_a_digest_that_does_not_fit_is_replaced_by_the_evidence(digested_week, damage):
    import json

    from_evidence = shape(history(digested_week, "prod"))
    digest_every_run(digested_week)
    for path in digested_week.glob(f"*/{DIGEST_FILE}"):
        data = json.loads(path.read_text())
        data["points"] = data["points"] or [["x", "y", "z", 1.0, "", None]]
        damage(data)
        path.write_text(json.dumps(data))
    assert shape(history(digested_week, "prod")) == from_evidence


INVENTORY = """\
cluster: {name: prod, region: cn-test}
ssh: {connect_timeout_s: 1, connect_retries: 1}
nodes:
  - {name: "node[01-08]", host: "198.18.0.[201-208]"}
"""


def test_a_run_with_history_writes_its_trends_page(pytester: pytest.Pytester):
    import json

    pytester.makefile(".yaml", inv=INVENTORY)
    pytester.makepyfile(test_one="def test_x():\n    pass\n")
    reports = pytester.path / "r"
    args = (".", "--inventory", "inv.yaml", "--reports-dir", str(reports))
    assert pytester.runpytest(*args).ret == 0
    (first,) = [p for p in reports.iterdir() if p.is_dir()]
    assert "trends" not in json.loads((first / "summary.json").read_text())  # no history yet
    assert not (first / "trends.html").exists()
    write_week(reports, nights=3)
    assert pytester.runpytest(*args).ret == 0
    latest = max((p for p in reports.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    summary = json.loads((latest / "summary.json").read_text())
    assert summary["trends"] == "trends.html"
    page = (latest / "trends.html").read_text()
    assert re.search(r"5 runs\s+from 2026-11-23", page) and latest.name in page
    assert 'id="no-regressions"' in page
    from pytest_hpcnet.report.verify import verify

    assert verify(latest).ok  # written before the digest: the bundle still verifies
    assert (latest / DIGEST_FILE).exists() and (first / DIGEST_FILE).exists()
    certificate = (latest / "certificate.html").read_text()
    assert '<a href="trends.html">night-by-night trends</a>' in certificate


def test_plots_have_axes_dates_and_the_threshold(week):
    page = render_trends(history(week, "prod"))
    bandwidth = page.split('id="ib_write_bw-bw_avg"', 1)[1].split("<h2", 1)[0]
    plot = re.search(r"<svg class=\"spark\".*?</svg>", bandwidth, re.S).group(0)
    assert plot.count('class="axis"') == 2  # the value axis and the time axis
    assert re.findall(r'class="tick date"[^>]*>([^<]+)<', plot) == ["11-23", "11-29"]
    assert 'class="threshold"' in plot and "≥ 80" in plot  # the bound, dashed
    assert "Gbit/s" in plot and "threshold ≥ 80 Gbit/s" in bandwidth


def test_one_run_is_said_not_plotted(tmp_path):
    write_week(tmp_path, nights=1)
    page = render_trends(history(tmp_path, "prod"))
    assert re.search(r"\b1 run\s+on 2026-11-23", page) and "1 runs" not in page
    assert "<circle" not in page and "<polyline" not in page  # no dots at arbitrary heights
    assert "one run so far: 93.32 Gbit/s (threshold ≥ 80 Gbit/s)" in page


def test_a_version_change_between_nights_is_named():
    from pytest_hpcnet.report.certificate.versions import Manifest, ManifestLine, OddValue
    from pytest_hpcnet.report.trends import History, manifest_changes

    line = ManifestLine(instance_type="ecs.ebmgn8v.48xlarge", items=[("nvidia_driver", "570")])
    night1 = Manifest(lines=[line])
    night2 = Manifest(
        lines=[line],
        odd=[OddValue(subject=n, item="nvidia_driver", value="580", agreed="570") for n in "abc"],
    )
    night3 = Manifest(lines=[line.model_copy(update={"items": [("nvidia_driver", "580")]})], odd=[])
    assert manifest_changes(night1, night1) == []
    assert manifest_changes(night1, night2) == [
        f"{n}: nvidia_driver 580 (its type runs 570)" for n in "abc"
    ]
    assert manifest_changes(night2, night3) == ["ecs.ebmgn8v.48xlarge: nvidia_driver 570 -> 580"]
    page = render_trends(
        History("c", version_changes=[("run-2", manifest_changes(night1, night2))])
    )
    assert "a: nvidia_driver 580 (its type runs 570)" in page
    assert 'id="no-version-changes"' in render_trends(History("c"))
