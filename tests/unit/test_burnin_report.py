"""The burn-in in the reports: each node's summary from its record's measurements, the
timelines of the evidence page (bounded, failures marked at their time, escaped), the
certificate's burn-in lines, the metrics and the trends digest."""

from __future__ import annotations

import json
import math
import re
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.burnin import NodeLines, Sample, parse_lines
from pytest_hpcnet.report.burnin_summary import failure_time, node_summary
from pytest_hpcnet.report.certificate import burnin_timeline as timeline
from pytest_hpcnet.report.certificate.format import format_value
from pytest_hpcnet.report.certificate.page import render_certificate
from pytest_hpcnet.report.evidence import EvidenceBundle, read_records
from pytest_hpcnet.report.records import CheckRecord
from pytest_hpcnet.requirements.burnin import NodeBurnin, _failed_at, judge_burnin
from tests.recorded import as_record

FIXTURE = Path(__file__).parents[1] / "fixtures" / "burnin"
LAB_RUN = (FIXTURE / "samples-8gpu-lab-throttle-gpu2-checksum-gpu1.jsonl").read_text()
DEVICE_RUN = (FIXTURE / "samples-8gpu-2eri-lab-aer-gpu3-counter-erdma1.jsonl").read_text()
EXPECT = Expectations.model_validate({"gpu_load": {"max_temperature_c": 85}})
DAY = 86400.0


def record_of(verdict, node: str) -> CheckRecord:
    """What `Check.judge` records of a burn-in verdict."""
    requirement = "Burn-in: every GPU healthy for the whole duration"
    return as_record(verdict, "burnin", node, requirement, f"{node}: {verdict.reason}")


def judged(nodes: dict[str, str], asked: float) -> list[CheckRecord]:
    """The burn-in records of nodes given their samples' text."""
    found = {n: NodeBurnin(n, asked, parse_lines(text), gpus=8) for n, text in nodes.items()}
    return [record_of(judge_burnin(f, found, EXPECT), n) for n, f in found.items()]


def long_run(hours: float = 24.0, interval: float = 30.0, hot_gpu: int = 3, hot_t: float = 3600.0):
    """A day of 8 GPUs sampled every 30 s; `hot_gpu` at 91 C from `hot_t` on, with one
    single-sample spike of 99 C on GPU 5 at 12 h."""
    lines = []
    for i in range(1, int(hours * 3600 / interval) + 1):
        t = i * interval
        for g in range(8):
            temp = 60 + g % 3 + 2 * math.sin(t / 900)
            temp = 91 if g == hot_gpu and t >= hot_t else temp
            temp = 99 if g == 5 and t == 12 * 3600 else temp
            record = {"t": t, "gpu": g, "temp": temp, "power": 690 + g, "sm": 1980}
            record |= {"events": "0x4", "ecc_uv": 0, "ecc_ua": 0, "rr_u": 0}
            lines.append(json.dumps(record | {"win": [[i, 780.0, "aaaa"]]}))
    lines.append(json.dumps({"t": hours * 3600 + 5, "end": "done"}))
    return "\n".join(lines) + "\n"


def run_folder(tmp_path: Path, nodes: dict[str, str], asked: float) -> Path:
    run = tmp_path / "run"
    bundle = EvidenceBundle(run)
    (run / "burnin").mkdir()
    for name, text in nodes.items():
        (run / "burnin" / f"{name}.jsonl").write_text(text)
    for record in judged(nodes, asked):
        bundle.append(record)
    bundle.close({"cluster": "c1"})
    render_certificate(run, {"cluster": "c1"})
    return run


def healthy() -> str:
    """A healthy node of the current format: the device-watch lab run with its device
    counters quiet (the AER and ERI counter it recorded are zeroed)."""
    lines = []
    for text in DEVICE_RUN.splitlines():
        record = json.loads(text)
        if "dev" in record:
            record["dev"] = {
                d: {k: [0] * len(v) for k, v in c.items()} for d, c in record["dev"].items()
            }
        lines.append(json.dumps(record))
    return "\n".join(lines) + "\n"


# -- the summary ----------------------------------------------------------------------------


def test_failure_time_reads_what_the_judge_wrote():
    (record,) = judged({"node01": LAB_RUN}, 10)
    failed = [m for m in record.measured if m.outcome == "fail"]
    assert len(failed) == 3
    for m in failed:
        assert failure_time(m.value) == _failed_at(m) != float("inf")
    assert failure_time("91.0 at t=3600 s (1h00m00s)") == 3600.0
    assert failure_time(91.0) is None and failure_time("none") is None


def test_a_node_summary_is_its_measurements():
    (record,) = judged({"node01": LAB_RUN}, 10)
    summary = node_summary(record)
    assert summary.outcome == "fail"
    assert (summary.asked_s, summary.achieved_s, summary.whole) == (10, 12.8, True)
    assert summary.first is not None
    assert (summary.first.label, summary.first.t) == ("GPU 2 temperature", 5.1)
    assert [f.label for f in summary.failures] == [
        "GPU 2 temperature",
        "GPU 2 slowdown",
        "GPU 1 checksum",
    ]
    assert summary.max_temperature_c == 91.0


def test_a_failed_value_shows_its_unit_before_its_time():
    assert format_value("91.0 at t=5.1 s (0h00m05s)", "C") == "91 C at t=5.1 s (0h00m05s)"
    assert format_value("1 at t=7 s (0h00m07s)", "errors") == "1 error at t=7 s (0h00m07s)"
    assert format_value("0x4c at t=5.1 s (0h00m05s)", "") == "0x4c at t=5.1 s (0h00m05s)"


# -- the timelines --------------------------------------------------------------------------


def test_the_evidence_page_draws_one_timeline_per_node_that_ran(tmp_path):
    run = run_folder(tmp_path, {"node01": LAB_RUN, "node02": healthy()}, 10)
    page = (run / "evidence.html").read_text()
    assert page.count('<svg class="burnin-timeline"') == 2
    assert 'id="burnin-node01"' in page and 'id="burnin-node02"' in page
    assert "<script" not in page
    section = page[page.index('<section id="burnin">') :]
    assert re.search(r"GPU 2 temperature 91 C at t=5\.1 s", section)
    panels = re.findall(r'data-quantity="([^"]+)"', section)
    assert panels[:4] == ["temperature", "SM clock", "power", "GEMM"]


def test_the_certificate_says_the_duration_and_each_nodes_first_failure(tmp_path):
    lost = "\n".join(LAB_RUN.splitlines()[:8]) + "\n"  # one round, no end line
    nodes = {"node01": LAB_RUN, "node02": healthy(), "node03": lost}
    run = run_folder(tmp_path, nodes, 10)
    page = (run / "certificate.html").read_text()
    section = page[page.index('<section id="burnin">') : page.index('<section id="versions">')]
    assert "asked 10 s (0h00m10s)" in section
    assert "the whole duration achieved on 2 of 3 nodes" in section
    rows = re.findall(r"<tr class=\"row-(\w+)\"><td class=\"mono\">([^<]+)</td>", section)
    assert rows == [("fail", "node01"), ("not_measured", "node03"), ("pass", "node02")]
    assert "GPU 2 temperature 91 C at t=5.1 s (0h00m05s)" in section
    assert "(and 2 more)" in section
    assert "4.6 s (0h00m04s) of 10 s (0h00m10s)" in section  # node03's achieved
    assert "burn-in 4.6 s of 10 s asked" in section


def test_a_failure_is_marked_at_its_time():
    failure = timeline.Failure(
        "GPU 3", "burnin.temperature", "91 at t=3600 s (1h00m00s)", "C", 3600.0
    )
    lines = parse_lines(long_run(hours=2))
    svg = str(timeline.timeline_svg("node01", lines, [failure], DAY))
    (marker,) = re.findall(r'<line class="failure" data-t="([^"]+)" x1="([^"]+)"', svg)
    want = timeline.LEFT + (timeline.WIDTH - timeline.LEFT - timeline.RIGHT) * 3600 / DAY
    assert marker[0] == "3600" and float(marker[1]) == pytest.approx(want, abs=0.05)
    assert "GPU 3 temperature at t=3600 s (1h00m00s)" in svg
    assert 'data-gpu="3"' in svg  # the failed GPU drawn on its own


def test_a_day_of_samples_stays_small_and_keeps_its_extremes():
    lines = parse_lines(long_run())
    assert len(lines.samples) == 2880 * 8
    failure = timeline.Failure("GPU 5", "burnin.temperature", "99 at t=43200 s", "C", 43200.0)
    svg = str(timeline.timeline_svg("node01", lines, [failure], DAY))
    shapes = re.findall(r'points="([^"]*)"', svg)
    assert shapes and max(len(s.split()) for s in shapes) <= timeline.MAX_POINTS
    assert len(svg) < 40_000
    temperature = svg[: svg.index('data-quantity="SM clock"')]
    assert ">99</text>" in temperature  # the one-sample spike sets the panel's top


def test_copy_bandwidth_is_drawn_where_the_windows_carry_it():
    windows = (SimpleNamespace(number=1, tflops=780.0, checksum="a", copy_gbps=52.5),)
    lines = NodeLines(tuple(Sample(t=float(t), gpu=0, temp=60.0, windows=windows) for t in (1, 2)))
    svg = str(timeline.timeline_svg("node01", lines, [], 10))
    assert 'data-quantity="copy"' in svg and "GB/s" in svg


def test_a_hostile_node_name_is_escaped_and_reads_no_file_outside(tmp_path):
    hostile = '<script>alert(1)</script>"'
    svg = str(timeline.timeline_svg(hostile, parse_lines(LAB_RUN), [], 10))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    (tmp_path / "burnin").mkdir()
    (tmp_path / "secret.jsonl").write_text(LAB_RUN)
    assert timeline.read_samples(tmp_path, "../secret") is None
    assert timeline.read_samples(tmp_path, "..") is None
    run = run_folder(tmp_path, {hostile.replace("/", "_"): LAB_RUN}, 10)
    page = (run / "evidence.html").read_text()
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;_script&gt;" in page


def test_only_the_first_nodes_are_drawn_the_rest_named(tmp_path, monkeypatch):
    monkeypatch.setattr(timeline, "MAX_TIMELINES", 1)
    run = run_folder(tmp_path, {"node01": LAB_RUN, "node02": healthy()}, 10)
    page = (run / "evidence.html").read_text()
    assert page.count('<svg class="burnin-timeline"') == 1 and 'id="burnin-node01"' in page
    assert re.search(r'id="burnin-undrawn">No timeline drawn for 1 more node \(node02\)', page)


def test_a_node_without_samples_in_the_bundle_is_named(tmp_path):
    run = run_folder(tmp_path, {"node01": LAB_RUN, "node02": healthy()}, 10)
    (run / "burnin" / "node02.jsonl").unlink()  # a merged bundle keeps no burnin/
    records = read_records(run)
    section = timeline.burnin_section(run, records, date(2026, 12, 7))
    assert section is not None and section["missing"] == ["node02"]
    assert [bool(n["svg"]) for n in section["nodes"]] == [True, False]


# -- metrics and trends ---------------------------------------------------------------------


def test_metrics_carry_each_nodes_burnin_summary():
    from pytest_hpcnet.report.metrics import prometheus_text

    records = judged({"node01": LAB_RUN, "node02": healthy()}, 10)
    text = prometheus_text(records, {"cluster": "c1"})
    lines = set(text.splitlines())
    assert 'hpcnet_burnin_asked_seconds{node="node01",cluster="c1"} 10.0' in lines
    assert 'hpcnet_burnin_achieved_seconds{node="node02",cluster="c1"} 12.8' in lines
    assert 'hpcnet_burnin_outcome{node="node01",outcome="fail",cluster="c1"} 1' in lines
    assert 'hpcnet_burnin_outcome{node="node02",outcome="pass",cluster="c1"} 1' in lines
    assert (
        'hpcnet_burnin_first_failure_seconds{node="node01",device="GPU 2",'
        'quantity="temperature",cluster="c1"} 5.1'
    ) in lines
    assert not any(x.startswith('hpcnet_burnin_first_failure_seconds{node="node02"') for x in lines)
    assert 'hpcnet_burnin_max_temperature_celsius{node="node01",cluster="c1"} 91.0' in lines
    assert 'hpcnet_burnin_max_temperature_celsius{node="node02",cluster="c1"} 63.0' in lines
    assert any(x.startswith('hpcnet_burnin_tflops_drift_percent{node="node02"') for x in lines)
    assert "# TYPE hpcnet_burnin_outcome gauge" in lines


def test_a_measurement_of_each_gpu_is_its_own_sample():
    from pytest_hpcnet.report.metrics import prometheus_text

    (record,) = judged({"node02": healthy()}, 10)
    text = prometheus_text([record])
    temps = [x for x in text.splitlines() if x.startswith("hpcnet_burnin_temperature{")]
    assert len(temps) == 8  # one a GPU: not the last GPU's alone
    assert 'hpcnet_burnin_temperature{check="burnin",node="node02",device="GPU 0",unit="C"}' in (
        "\n".join(temps)
    )


def test_the_trends_digest_carries_each_nodes_burnin(tmp_path):
    from pytest_hpcnet.report import trends
    from pytest_hpcnet.report.records import RunSummary

    records = judged({"node01": LAB_RUN, "node02": healthy()}, 10)
    digest = trends.digest_run(records, RunSummary(run_id="r1"), None)
    burnin = {
        (name, subject): (value, comparison, bound)
        for _, name, subject, value, _, comparison, bound in digest.points
        if name.startswith("burnin.")
    }
    assert burnin[("burnin.achieved_s", "node01")] == (12.8, None, 10)
    assert burnin[("burnin.max_temperature", "node01")] == (91.0, "<=", 85)
    assert burnin[("burnin.max_temperature", "node02")] == (63.0, "<=", 85)
    assert burnin[("burnin.first_failure_s", "node01 GPU 2 temperature")] == (5.1, None, None)
    assert ("burnin.first_failure_s", "node02") not in {k[:2] for k in burnin}
    assert ("burnin.tflops_drift_max", "node02") in burnin


def test_the_trends_page_follows_the_burnin_night_after_night(tmp_path):
    from datetime import datetime, timedelta, timezone

    from pytest_hpcnet.report.trends import build_history
    from pytest_hpcnet.report.trends_page import render_trends

    start = datetime(2026, 12, 1, tzinfo=timezone.utc)
    for night, text in enumerate([healthy(), healthy(), LAB_RUN]):
        bundle = EvidenceBundle(tmp_path / f"run{night}")
        for record in judged({"node01": text}, 10):
            bundle.append(record)
        bundle.close({"cluster": "c1", "started_at": start + timedelta(days=night)})
    history = build_history(tmp_path, "c1")
    hot = next(
        s
        for s in history.series
        if s.figure.name == "burnin.max_temperature" and s.subject == "node01"
    )
    assert [p.value for p in hot.points] == [63.0, 63.0, 91.0]
    assert hot.points[-1].mark == "regression"  # 91 C against 63 C in the last good night
    page = render_trends(history)
    assert "Burn-in: hottest GPU temperature" in page and "Burn-in: duration achieved" in page


def test_a_failed_rows_worst_value_is_a_failure_not_a_passing_gpu(tmp_path):
    """A burn-in failure's value is text (`91.0 at t=...`): the row's worst is that failure,
    the earliest, not the passing GPU whose number has the least headroom."""
    run = run_folder(tmp_path, {"node01": LAB_RUN, "node02": healthy()}, 10)
    facts = json.loads((run / "certificate.json").read_text())
    (row,) = [r for r in facts["requirements"] if r["check_id"] == "burnin"]
    assert row["verdict"] == "fail"
    assert (row["worst_value"], row["worst_subject"]) == ("91.0 at t=5.1 s (0h00m05s)", "node01")
    assert row["measurement"] == "burnin.temperature" and row["threshold"] == "≤ 85 C"
    assert row["where"] == "node01 GPU 2" and row["margin"] is None


def test_metrics_of_records_read_once_still_carry_the_burnin():
    from pytest_hpcnet.report.metrics import prometheus_text

    records = judged({"node01": LAB_RUN}, 10)
    text = prometheus_text(r for r in records)  # a generator: read once
    assert "hpcnet_burnin_outcome{" in text and "hpcnet_burnin_temperature{" in text
