"""Evidence bundle, verdict rules, Prometheus textfile and baseline comparison."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import date, datetime, timedelta, timezone

import pytest

from pytest_hpcnet.redact import clear_secrets, register_secret
from pytest_hpcnet.report import evidence
from pytest_hpcnet.report.baseline import compare_to_baseline, load_baseline
from pytest_hpcnet.report.evidence import (
    CheckRecord,
    CommandRecord,
    EvidenceBundle,
    EvidenceError,
    Measurement,
    Waiver,
    merge_bundles,
    new_run_id,
    overall_verdict,
    read_records,
    read_summary,
)
from pytest_hpcnet.report.metrics import prometheus_text, write_prometheus_textfile

RUN_START = datetime(2026, 11, 30, 5, 27, 50, tzinfo=timezone.utc)
RUN_DATE = RUN_START.date()


@pytest.fixture
def secrets_cleared():
    clear_secrets()
    yield
    clear_secrets()


def record(
    check_id: str = "mtu",
    subject: str = "gpu-a",
    verdict: str = "pass",
    value: float | str | None = 9000,
    threshold: float | None = 9000,
    comparison: str | None = ">=",
    kind: str = "node",
    waiver: Waiver | None = None,
    **extra,
) -> CheckRecord:
    return CheckRecord(
        check_id=check_id,
        requirement=check_id.upper(),
        nodeid=f"suites/test_{check_id}.py::test_{check_id}[{subject}]",
        subject=subject,
        kind=kind,
        measured=[
            Measurement(
                name=check_id,
                value=value,
                unit="B",
                threshold=threshold,
                comparison=comparison,
                threshold_source="inventory expect.mtu",
            )
        ],
        verdict=verdict,
        started_at=RUN_START,
        ended_at=RUN_START + timedelta(seconds=3),
        waiver=waiver,
        **extra,
    )


# --- run id and records -------------------------------------------------------------


def test_new_run_id_is_utc_time_plus_random_suffix():
    run_id = new_run_id(RUN_START)
    assert re.fullmatch(r"20261130-052750-[0-9a-f]{4}", run_id)
    assert len({new_run_id(RUN_START) for _ in range(20)}) > 1


def test_record_roundtrips_through_json():
    original = record(
        commands=[
            CommandRecord(
                node="gpu-a",
                command="ip -j link show eth0",
                exit_status=0,
                duration_s=0.12,
                started_at=RUN_START,
                output_digest="0" * 64,
            )
        ],
        tool_versions={"iproute2": "6.1"},
        suspect_nodes=["gpu-b"],
        waiver=Waiver(reason="vendor ticket", by="ops", expires=date(2027, 1, 1)),
    )
    data = json.loads(json.dumps(original.model_dump(mode="json")))
    assert CheckRecord.model_validate(data) == original


def test_bundle_create_makes_reports_run_dir(tmp_path):
    bundle = EvidenceBundle.create(tmp_path / "reports")
    assert bundle.run_dir.parent == tmp_path / "reports"
    assert bundle.run_dir.name == bundle.run_id
    assert (bundle.run_dir / "outputs").is_dir()


def test_append_writes_one_flushed_line_per_record_and_fsyncs_at_most_once_a_second(
    tmp_path, monkeypatch
):
    synced: list[int] = []
    real_fsync = evidence.os.fsync
    monkeypatch.setattr(evidence.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    clock = [100.0]
    monkeypatch.setattr(evidence.time, "monotonic", lambda: clock[0])
    bundle = EvidenceBundle(tmp_path / "run")
    bundle.append(record(subject="gpu-a"))
    assert len(synced) == 1  # the first record is synced at once
    # readable by another reader before the run ends (flushed to the kernel per record)
    assert [r.subject for r in read_records(bundle.run_dir)] == ["gpu-a"]
    bundle.append(record(subject="gpu-b").model_dump(mode="json"))
    assert len(synced) == 1  # within the second: written, not yet synced
    clock[0] += evidence.SYNC_INTERVAL_S
    bundle.append(record(subject="gpu-c"))
    assert len(synced) == 2
    lines = bundle.evidence_path.read_text().splitlines()
    assert [json.loads(line)["subject"] for line in lines] == ["gpu-a", "gpu-b", "gpu-c"]
    bundle.append(record(subject="gpu-d"))
    bundle.close({"cluster": "c"})
    assert len(synced) == 4  # close syncs what is left (and summary.json)
    assert [r.subject for r in read_records(bundle.run_dir)][-1] == "gpu-d"
    bundle.append(record(subject="gpu-e"))  # after close: reopened, still appended
    assert [r.subject for r in read_records(bundle.run_dir)][-1] == "gpu-e"


def test_truncated_last_line_after_a_crash_is_ignored(tmp_path):
    bundle = EvidenceBundle(tmp_path / "run")
    for subject in ("gpu-a", "gpu-b", "gpu-c"):
        bundle.append(record(subject=subject))
    data = bundle.evidence_path.read_bytes()
    bundle.evidence_path.write_bytes(data[: len(data) - 25])  # killed mid-write
    assert [r.subject for r in read_records(bundle.run_dir)] == ["gpu-a", "gpu-b"]


def test_damaged_line_before_the_last_is_an_error(tmp_path):
    bundle = EvidenceBundle(tmp_path / "run")
    for subject in ("gpu-a", "gpu-b"):
        bundle.append(record(subject=subject))
    lines = bundle.evidence_path.read_text().splitlines()
    bundle.evidence_path.write_text(lines[0][:-5] + "\n" + lines[1] + "\n")
    with pytest.raises(EvidenceError, match="line 1"):
        read_records(bundle.run_dir)


def test_read_records_of_missing_file_is_empty(tmp_path):
    assert read_records(tmp_path) == []


# --- outputs and redaction ----------------------------------------------------------


def test_store_output_is_content_addressed(tmp_path):
    bundle = EvidenceBundle(tmp_path / "run")
    digest = bundle.store_output("65536 5000 196.52 196.40 0.374\n")
    path = bundle.run_dir / "outputs" / f"{digest}.txt"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert bundle.store_output("65536 5000 196.52 196.40 0.374\n") == digest
    assert len(list((bundle.run_dir / "outputs").iterdir())) == 1


def test_secrets_never_reach_disk(tmp_path, secrets_cleared):
    register_secret("hunter2-TOKEN")
    bundle = EvidenceBundle(tmp_path / "run")
    digest = bundle.store_output("login ok token=hunter2-TOKEN\n")
    bundle.append(
        record(
            message="auth with hunter2-TOKEN failed",
            commands=[CommandRecord(node="gpu-a", command="curl -H 'X: hunter2-TOKEN' x")],
            tool_versions={"hunter2-TOKEN": "1"},
        )
    )
    bundle.close({"cluster": "c1", "note": "pass hunter2-TOKEN"})
    for path in bundle.run_dir.rglob("*"):
        if path.is_file():
            assert b"hunter2-TOKEN" not in path.read_bytes(), path
    assert "***" in (bundle.run_dir / "outputs" / f"{digest}.txt").read_text()
    assert read_records(bundle.run_dir)[0].message == "auth with *** failed"


def test_a_secret_json_escapes_is_still_redacted_and_a_line_without_one_is_not_walked(
    secrets_cleared, monkeypatch
):
    """A record's line is redacted string by string only when its JSON may hold a secret:
    one with a quote or backslash (escaped in JSON) is still found."""
    register_secret('pa"ss\\word')
    line = evidence.evidence_line(record(message='login pa"ss\\word refused'))
    assert 'pa\\"ss' not in line and "login *** refused" in json.loads(line)["message"]
    walked = []
    real = evidence.redact_data
    monkeypatch.setattr(evidence, "redact_data", lambda data: walked.append(1) or real(data))
    assert "nothing secret" in evidence.evidence_line(record(message="nothing secret"))
    assert walked == []


def test_store_output_replaces_undecodable_bytes(tmp_path):
    bundle = EvidenceBundle(tmp_path / "run")
    digest = bundle.store_output(b"ok \xff\xfe end")
    text = (bundle.run_dir / "outputs" / f"{digest}.txt").read_text(encoding="utf-8")
    assert text == "ok \ufffd\ufffd end"


def test_store_output_is_bounded_with_a_note(tmp_path):
    bundle = EvidenceBundle(tmp_path / "run")
    text = "HEAD\n" + "x" * 10_000 + "\nTAIL\n"
    digest = bundle.store_output(text, limit=1000)
    stored = (bundle.run_dir / "outputs" / f"{digest}.txt").read_text()
    assert len(stored.encode()) < 1200
    assert stored.startswith("HEAD") and stored.endswith("TAIL\n")
    assert "output truncated" in stored


# --- verdict rules ------------------------------------------------------------------

VALID = Waiver(reason="known vendor issue", by="ops@example.com", expires=date(2026, 12, 31))
EXPIRED = Waiver(reason="known vendor issue", by="ops@example.com", expires=date(2026, 11, 29))
SAME_DAY = Waiver(reason="known vendor issue", by="ops@example.com", expires=RUN_DATE)


@pytest.mark.parametrize(
    ("verdicts", "unreachable", "expected"),
    [
        (["pass", "pass"], [], "ACCEPTED"),
        (["pass", "fail"], [], "REJECTED"),
        (["pass", "error"], [], "INCOMPLETE"),
        (["fail", "error"], [], "INCOMPLETE"),
        (["pass", "pass"], ["gpu-c"], "INCOMPLETE"),
        (["pass", "skipped"], [], "INCOMPLETE"),  # a skip in scope was not measured
        (["skipped"], [], "INCOMPLETE"),
        ([], [], "INCOMPLETE"),
    ],
)
def test_overall_verdict(verdicts, unreachable, expected):
    records = [record(subject=f"n{i}", verdict=v) for i, v in enumerate(verdicts)]
    assert overall_verdict(records, unreachable, RUN_DATE) == expected


@pytest.mark.parametrize(
    ("verdict", "waiver", "expected"),
    [
        ("fail", VALID, "ACCEPTED"),
        ("waived", VALID, "ACCEPTED"),
        ("waived", SAME_DAY, "ACCEPTED"),
        ("fail", EXPIRED, "REJECTED"),
        ("waived", EXPIRED, "REJECTED"),
        ("waived", None, "REJECTED"),
        ("error", VALID, "INCOMPLETE"),
    ],
)
def test_waivers(verdict, waiver, expected):
    records = [record(subject="gpu-a"), record(subject="gpu-b", verdict=verdict, waiver=waiver)]
    assert overall_verdict(records, [], RUN_DATE) == expected


def test_close_writes_summary(tmp_path):
    bundle = EvidenceBundle(tmp_path / "20261130-052750-ab12")
    bundle.append(record(subject="gpu-a"))
    bundle.append(record(subject="gpu-b", verdict="fail"))
    bundle.append(record(subject="gpu-c", verdict="fail", waiver=EXPIRED))
    bundle.append(record(subject="gpu-d", verdict="fail", waiver=VALID))
    summary = bundle.close(
        {
            "cluster": "prod-gpu",
            "inventory_sha256": "a" * 64,
            "expectations_sha256": "b" * 64,
            "started_at": RUN_START,
        }
    )
    assert summary.verdict == "REJECTED"
    on_disk = json.loads((bundle.run_dir / "summary.json").read_text())
    assert on_disk["run_id"] == "20261130-052750-ab12"
    assert on_disk["cluster"] == "prod-gpu"
    assert on_disk["inventory_sha256"] == "a" * 64
    assert on_disk["expectations_sha256"] == "b" * 64
    assert on_disk["counts"] == {
        "pass": 1,
        "fail": 2,
        "not_measured": 0,
        "error": 0,
        "waived": 1,
        "skipped": 0,
    }
    assert on_disk["verdict"] == "REJECTED"
    assert on_disk["started_at"].startswith("2026-11-30T05:27:50")
    assert on_disk["ended_at"]
    assert read_summary(bundle.run_dir) == summary


def test_close_with_unreachable_node_is_incomplete(tmp_path):
    bundle = EvidenceBundle(tmp_path / "run")
    bundle.append(record())
    summary = bundle.close({"unreachable_nodes": ["gpu-z"]})
    assert summary.verdict == "INCOMPLETE"
    assert read_summary(bundle.run_dir).unreachable_nodes == ["gpu-z"]


def test_merge_bundles_folds_worker_records_and_outputs(tmp_path):
    worker = EvidenceBundle(tmp_path / "gw0")
    digest = worker.store_output("worker output\n")
    worker.append(
        record(
            subject="gpu-b",
            commands=[CommandRecord(node="gpu-b", command="x", output_digest=digest)],
        )
    )
    controller = EvidenceBundle(tmp_path / "run")
    controller.append(record(subject="gpu-a"))
    merge_bundles(controller.run_dir, [worker.run_dir])
    assert [r.subject for r in read_records(controller.run_dir)] == ["gpu-a", "gpu-b"]
    assert (controller.run_dir / "outputs" / f"{digest}.txt").exists()


# --- Prometheus textfile ------------------------------------------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(
    rf"^(?P<name>{_NAME})\{{(?:{_LABEL}(?:,{_LABEL})*)?\}} "
    r"(?P<value>[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|NaN|Inf))$"
)
COMMENT = re.compile(rf"^# (?:HELP {_NAME} .*|TYPE {_NAME} (?:gauge|counter|untyped))$")


def _prom_records() -> list[CheckRecord]:
    return [
        record(check_id="mtu", subject="gpu-a", value=9000),
        record(check_id="mtu", subject="gpu-b", value=1500, verdict="fail"),
        record(
            check_id="ib_write_bw",
            subject="gpu-a->gpu-b",
            kind="pair",
            value=196.5,
            threshold=180,
        ),
        record(
            check_id="cpfs",
            subject='odd "node"\nname\\x',
            value="mounted",
            threshold=None,
            comparison=None,
            kind="node",
        ),
        record(check_id="tuning", subject="gpu-a", verdict="skipped", value=None),
    ]


def test_prometheus_textfile_is_valid_exposition(tmp_path):
    path = write_prometheus_textfile(
        tmp_path / "hpcnet.prom", _prom_records(), {"cluster": "prod-gpu", "run_id": "r1"}
    )
    text = path.read_text()
    assert text.endswith("\n")
    lines = text.splitlines()
    for line in lines:
        assert COMMENT.match(line) or SAMPLE.match(line), line
    assert (
        'hpcnet_mtu{check="mtu",node="gpu-a",unit="B",cluster="prod-gpu",run_id="r1"} 9000.0'
        in lines
    )
    assert any(
        line.startswith("hpcnet_ib_write_bw{")
        and 'pair="gpu-a->gpu-b"' in line
        and line.endswith(" 196.5")
        for line in lines
    )
    assert (
        'hpcnet_check_passed{check="mtu",subject="gpu-b",cluster="prod-gpu",run_id="r1"} 0' in lines
    )
    assert any(r'subject="odd \"node\"\nname\\x"' in line for line in lines)
    assert not any("tuning" in line for line in lines)  # skipped: no sample, no pass line
    # every family is announced once, before its samples
    for name in {SAMPLE.match(line)["name"] for line in lines if SAMPLE.match(line)}:
        assert lines.count(f"# TYPE {name} gauge") == 1
    assert [p.name for p in tmp_path.iterdir()] == ["hpcnet.prom"]  # no temp file left


def test_prometheus_text_of_no_records_is_empty():
    assert prometheus_text([]) == ""


# --- baseline -----------------------------------------------------------------------


def _bw(value: float, subject: str = "gpu-a->gpu-b") -> CheckRecord:
    return record(
        check_id="ib_write_bw",
        subject=subject,
        kind="pair",
        value=value,
        threshold=100,
        comparison=">=",
    )


def _lat(value: float) -> CheckRecord:
    return record(
        check_id="ib_write_lat",
        subject="gpu-a->gpu-b",
        kind="pair",
        value=value,
        threshold=10,
        comparison="<=",
    )


@pytest.fixture
def baseline_run(tmp_path):
    bundle = EvidenceBundle(tmp_path / "previous")
    bundle.append(_bw(200.0))
    bundle.append(_lat(4.0))
    bundle.close({})
    return bundle.run_dir


def test_baseline_regression_of_20_percent_is_reported(baseline_run):
    current = [_bw(160.0)]
    regressions = compare_to_baseline(current, load_baseline(baseline_run))
    assert len(regressions) == 1
    (regression,) = regressions
    assert (regression.check_id, regression.metric, regression.subject) == (
        "ib_write_bw",
        "ib_write_bw",
        "gpu-a->gpu-b",
    )
    assert regression.delta_pct == pytest.approx(-20.0)
    assert regression.baseline == 200.0
    assert "-20.0 %" in regression.describe()
    measured = current[0].measured[0]
    assert measured.baseline == 200.0
    assert measured.delta == pytest.approx(-0.20)


def test_baseline_drop_of_5_percent_passes(baseline_run):
    current = [_bw(190.0)]
    assert compare_to_baseline(current, load_baseline(baseline_run)) == []
    assert current[0].measured[0].delta == pytest.approx(-0.05)


def test_lower_is_better_regresses_when_it_rises(baseline_run):
    baseline = load_baseline(baseline_run / "summary.json")
    assert [r.metric for r in compare_to_baseline([_lat(5.0)], baseline)] == ["ib_write_lat"]
    assert compare_to_baseline([_lat(3.0)], baseline) == []  # faster is no regression


def test_per_metric_tolerance_and_unknown_subjects(baseline_run):
    baseline = load_baseline(baseline_run / "evidence.jsonl")
    assert compare_to_baseline([_bw(190.0)], baseline, per_metric={"ib_write_bw": 0.02})
    unknown = [_bw(10.0, subject="gpu-x->gpu-y")]
    assert compare_to_baseline(unknown, baseline) == []
    assert unknown[0].measured[0].baseline is None


def test_the_same_output_stored_again_is_not_redacted_and_written_again(tmp_path, monkeypatch):
    bundle = EvidenceBundle(tmp_path / "run")
    calls: list[str] = []
    real = evidence.redact
    monkeypatch.setattr(evidence, "redact", lambda text: calls.append(text) or real(text))
    facts = "hpcnet facts of node01\n" * 100
    first = bundle.store_output(facts)
    assert bundle.store_output(facts) == first  # every check of the node records it
    assert calls == [facts]
    assert bundle.store_output(facts, limit=64) != first  # another bound is another output
    assert bundle.output_path(first).read_text() == facts


def test_a_runs_records_are_parsed_once_however_often_they_are_read(tmp_path, monkeypatch):
    """Closing the bundle, the certificate and its evidence page read the same records: the
    file is parsed once while it is unchanged, and again once it changes."""
    from pytest_hpcnet.report import evidence as module

    bundle = EvidenceBundle.create(tmp_path)
    bundle.append(record())
    parsed = []
    real = module.CheckRecord.model_validate_json
    monkeypatch.setattr(
        module.CheckRecord, "model_validate_json", lambda line: parsed.append(1) or real(line)
    )
    first = read_records(bundle.run_dir)
    assert read_records(bundle.run_dir) == first and len(parsed) == 1
    assert read_records(bundle.run_dir) is not first  # each caller gets its own list
    bundle.append(record())
    assert len(read_records(bundle.run_dir)) == 2 and len(parsed) == 3
