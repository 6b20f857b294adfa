"""Burn-in: the duration setting, the collection parser, the sample parser, the judge over
time (each quantity fails naming its GPU and first time), and the campaign's incremental,
resumable collection against a fake transport."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_hpcnet.campaigns.burnin import BurninCampaign
from pytest_hpcnet.inventory.burnin_settings import BurninSettings, parse_duration
from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.burnin import (
    PROGRAM,
    collect_command,
    node_folder,
    parse_collect,
    parse_lines,
    start_command,
)
from pytest_hpcnet.requirements.burnin import NodeBurnin, judge_burnin
from pytest_hpcnet.transport.fanout import CommandResult

FIXTURE = Path(__file__).parents[1] / "fixtures" / "burnin"
LAB_RUN = (FIXTURE / "samples-8gpu-lab-throttle-gpu2-checksum-gpu1.jsonl").read_text()
EXPECT = Expectations.model_validate({"gpu_load": {"max_temperature_c": 85}})


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), ("24h", 86400), ("1h30m", 5400), ("45s", 45), ("2d", 172800), (30, 30)],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1x", "h", "-5", "0", "15d", "1h 30m", True])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_settings_read_durations_with_defaults():
    assert BurninSettings.model_validate({"duration": "2h"}).duration == 7200
    assert BurninSettings().interval == 30 and BurninSettings().heartbeat == 600
    with pytest.raises(ValueError):
        BurninSettings.model_validate({"interval": "0.5"})


def test_start_is_detached_once_per_run():
    cmd = start_command("run-1", 8, 3600, 30, 600, 8192)
    assert 'd="${HPCNET_BURNIN_DIR:-/var/tmp/hpcnet-burnin}/run-1"' in cmd
    assert "if ! mkdir $d 2>/dev/null; then echo 'hpcnet-burnin already'" in cmd  # the lock
    assert "systemd-run --quiet --unit hpcnet-burnin-run-1 --setenv=PATH=" in cmd
    assert 'setsid nohup timeout -k 30 4500 "$py" $d/burnin.py' in cmd
    assert "--seconds 3600 --interval 30 --heartbeat 600 --gpus 8" in cmd
    with pytest.raises(ValueError):
        node_folder("x; rm -rf /")


def test_start_and_collect_on_a_local_folder(tmp_path):
    """The start command saves the programs once (a second start re-attaches); collection
    touches the heartbeat and reads from the offset."""
    env = {**os.environ, "HPCNET_BURNIN_DIR": str(tmp_path), "HPCNET_BURNIN_DETACH": "setsid"}
    start = start_command("run-1", 0, 1, 1, 10, 256).replace("setsid nohup", "true")

    def sh(cmd: str) -> str:
        return subprocess.run(["sh", "-c", cmd], env=env, capture_output=True, text=True).stdout

    assert sh(start) == "hpcnet-burnin started setsid\n"
    assert sh(start) == "hpcnet-burnin already\n"
    folder = tmp_path / "run-1"
    assert (folder / "burnin.py").read_text() == PROGRAM.read_text()
    (folder / "samples.jsonl").write_text('{"t": 1}\n{"t": 2}\n')
    got = parse_collect(sh(collect_command("run-1", 9)))
    assert got.lines == ('{"t": 2}',) and got.size == 18
    assert (folder / "heartbeat").stat().st_mtime > time.time() - 5


def test_collect_reads_from_its_offset():
    cmd = collect_command("run-1", 2048)
    assert "touch $d/heartbeat" in cmd and "tail -c +2049" in cmd


def test_collect_keeps_whole_lines_only():
    got = parse_collect('hpcnet-burnin-collect size=60\n{"t":1,"gpu":0}\n{"t":2,"gp')
    assert got.lines == ('{"t":1,"gpu":0}',)
    assert got.consumed == len('{"t":1,"gpu":0}\n') and got.size == 60
    assert parse_collect("hpcnet-burnin-collect missing\n").missing
    assert parse_collect("bash: oops").error
    assert parse_collect("hpcnet-burnin-collect size=0\n").lines == ()


def test_lab_samples_parse():
    found = parse_lines(LAB_RUN.splitlines())
    assert found.end == "done" and found.end_t == 12.8 and found.unreadable == 0
    assert len(found.samples) == 72
    hot = [s for s in found.samples if s.gpu == 2 and s.temp == 91]
    assert hot[0].t == 5.1 and hot[0].events == 0x4C
    windows = [w for s in found.samples if s.gpu == 1 for w in s.windows]
    assert [w.number for w in windows] == list(range(1, 9))  # none lost, two in one sample
    assert {w.checksum for w in windows[3:]} == {"2b3c0015b37b1db8"}


def test_unreadable_lines_are_counted_not_judged():
    found = parse_lines(['{"t": 1, "gpu": "x"}', "nope", '{"t": "1"}', '{"t": 1, "error": "e"}'])
    assert found.samples == () and found.unreadable == 3 and found.errors == ("e",)


def node(lines: list[str], asked: float = 10.0, name: str = "node01", **kw) -> NodeBurnin:
    return NodeBurnin(name, asked, parse_lines(lines), gpus=8, **kw)


def line(t: float, gpu: int, w: int, **kw) -> str:
    """A sample line; `tflops`, `sum` and `copy` are its window's."""
    tflops, checksum, copy = kw.pop("tflops", 780.0), kw.pop("sum", "aaaa"), kw.pop("copy", 4300.0)
    record = {"t": t, "gpu": gpu, "temp": 60, "events": "0x4", "ecc_uv": 0, "ecc_ua": 0}
    record |= {"rr_u": 0, "pg": 5, "pw": 16, "pgm": 5, "pwm": 16}
    record |= {"win": [[w, tflops, checksum, copy]]} | kw
    return json.dumps(record)


def device_line(t: float, gpus: int = 2, **changes: dict) -> str:
    """A device line: every GPU's AER and NVLink, erdma_0's AER and RDMA counters, eth0's;
    `changes` replace a device's values (`erdma_0={"rdma": [...]}`)."""
    dev = {f"GPU {g}": {"aer": [0, 0, 0], "nvl": [0, 0, 0]} for g in range(gpus)}
    dev["erdma_0"] = {"aer": [0, 0, 0], "rdma": [0] * 7}
    dev["eth0"] = {"nic": [0, 0, 0, 0]}
    for name, values in changes.items():
        dev[name.replace("_", " ") if name.startswith("GPU") else name] |= values
    return json.dumps({"t": t, "dev": dev})


def healthy(gpus: int = 2, windows: int = 8) -> list[str]:
    lines = [device_line(0.0, gpus)]
    for w in range(1, windows + 1):
        lines += [line(w + 2.0, g, w) for g in range(gpus)] + [device_line(w + 2.0, gpus)]
    return [*lines, '{"t": 11.0, "end": "done"}']


def failed(verdict) -> dict[str, str]:
    return {
        f"{m.subject} {m.name}": str(m.value) for m in verdict.measurements if m.outcome == "fail"
    }


def test_a_healthy_burnin_passes():
    found = node(healthy())
    verdict = judge_burnin(found, {"node01": found}, EXPECT)
    assert verdict.outcome == "pass", verdict.reason
    assert {m.name for m in verdict.measurements} >= {
        "burnin.xid",
        "burnin.ecc_uncorrected",
        "burnin.retired",
        "burnin.temperature",
        "burnin.slowdown",
        "burnin.tflops_drift",
        "burnin.checksum",
        "burnin.duration",
    }


@pytest.mark.parametrize(
    ("change", "name"),
    [
        ({"xid": [79]}, "burnin.xid"),
        ({"ecc_uv": 1, "ecc_ua": 1}, "burnin.ecc_uncorrected"),
        ({"rr_u": 1}, "burnin.retired"),
        ({"temp": 91}, "burnin.temperature"),
        ({"events": "0x48"}, "burnin.slowdown"),
        ({"tflops": 700.0}, "burnin.tflops_drift"),
        ({"sum": "bbbb"}, "burnin.checksum"),
        ({"copy": 4000.0}, "burnin.copy_drift"),
        ({"pg": 4}, "burnin.pcie_link"),
        ({"pw": 8}, "burnin.pcie_link"),
    ],
)
def test_each_quantity_fails_its_gpu_at_its_first_time(change, name):
    lines = healthy()
    for i, text in enumerate(lines):  # GPU 1 from window 5 (t=7) on
        record = json.loads(text)
        if record.get("gpu") == 1 and record["win"][0][0] >= 5:
            w, tflops, checksum, copy = record["win"][0]
            change = dict(change)
            tflops, checksum = change.pop("tflops", tflops), change.pop("sum", checksum)
            record["win"] = [[w, tflops, checksum, change.pop("copy", copy)]]
            lines[i] = json.dumps(record | change)
    found = node(lines)
    verdict = judge_burnin(found, {"node01": found}, EXPECT)
    assert verdict.outcome == "fail"
    assert list(failed(verdict)) == [f"GPU 1 {name}"]
    assert "t=7 s (0h00m07s)" in failed(verdict)[f"GPU 1 {name}"]
    assert verdict.reason.startswith(f"GPU 1 {name.removeprefix('burnin.')}")


def test_a_checksum_differing_from_the_other_gpus_fails_from_the_first_window():
    gpu1 = '"gpu": 1,'
    lines = [text.replace('"aaaa"', '"cccc"') if gpu1 in text else text for text in healthy()]
    found = node(lines)
    verdict = judge_burnin(
        found, {"node01": found, "node02": node(healthy(), name="node02")}, EXPECT
    )
    assert list(failed(verdict)) == ["GPU 1 burnin.checksum"]
    assert "t=3 s" in failed(verdict)["GPU 1 burnin.checksum"]
    assert verdict.code == "HPCNET-BURNIN-CHECKSUM" and "replaced" in verdict.fix
    assert {m.code for m in verdict.measurements if m.outcome == "fail"} == {verdict.code}


def test_correctable_ecc_is_reported_not_judged():
    lines = [text.replace('"ecc_uv": 0', '"ecc_cv": 9, "ecc_uv": 0') for text in healthy()]
    found = node(lines)
    verdict = judge_burnin(found, {"node01": found}, EXPECT)
    assert verdict.outcome == "pass"
    assert {m.value for m in verdict.measurements if m.name == "burnin.ecc_corrected"} == {9}


def test_a_short_burnin_is_not_measured_with_the_duration_achieved():
    found = node(healthy()[:-1], asked=3600)
    verdict = judge_burnin(found, {"node01": found}, EXPECT)
    assert verdict.outcome == "not_measured"
    assert verdict.reason == "burn-in 10 s of 3600 s asked"
    duration = next(m for m in verdict.measurements if m.name == "burnin.duration")
    assert (duration.value, duration.bound) == (10.0, 3600)


def test_a_lost_node_is_named_with_its_last_seen_time():
    found = node(healthy()[:6], asked=60, lost="timed out", last_seen=1_800_000_000.0)
    verdict = judge_burnin(found, {"node01": found}, EXPECT)
    assert verdict.outcome == "not_measured"
    assert "stopped answering (timed out), last seen 2027-01-15T08:00:00Z" in verdict.reason


def test_a_failure_before_the_node_was_lost_still_fails():
    lines = [*healthy()[:6], line(6.0, 0, 5, xid=[48])]
    found = node(lines, asked=60, lost="timed out", last_seen=1_800_000_000.0)
    assert judge_burnin(found, {"node01": found}, EXPECT).outcome == "fail"


def test_no_burnin_is_not_measured_with_the_fix():
    found = NodeBurnin("node01", 60, missing="python3 has no torch", fix="install torch")
    verdict = judge_burnin(found, {"node01": found}, EXPECT)
    assert verdict.outcome == "not_measured" and verdict.fix == "install torch"


def test_the_lab_run_fails_gpu2_thermally_and_gpu1_checksum():
    """GPU 2 throttled from its third window on: inside the baseline windows, so its TFLOPS
    drift from them is not what fails it (the lab test injects later)."""
    found = node(LAB_RUN.splitlines())
    verdict = judge_burnin(found, {"node01": found}, EXPECT)
    assert set(failed(verdict)) == {
        "GPU 2 burnin.temperature",
        "GPU 2 burnin.slowdown",
        "GPU 1 burnin.checksum",
    }


# -- the campaign against a fake transport ---------------------------------------------------


class FakeNodes:
    """Nodes whose burn-in writes one line per GPU per collection round; `silent` nodes stop
    answering from round `silent[node]` on."""

    def __init__(self, names: list[str], rounds: int, silent: dict[str, int] | None = None):
        self.files = dict.fromkeys(names, "")
        self.rounds = rounds
        self.silent = silent or {}
        self.tick = 0
        self.started = 0

    def run_on_all(self, command, nodes=None, timeout_s=None, together=False):
        out = {}
        for name in nodes:
            text = command(type("N", (), {"name": name})())
            if "HPCNET_BURNIN_EOF" in text:
                self.started += 1
                out[name] = CommandResult(
                    name, "start", 0, "hpcnet-burnin started setsid\n", "", 0, 0
                )
                continue
            if self.silent.get(name, 10**9) <= self.tick:
                out[name] = CommandResult(name, "c", None, "", "", 0, 0, unreachable="timed out")
                continue
            offset = int(text.split("tail -c +")[1].split()[0]) - 1
            body = self.files[name][offset:]
            out[name] = CommandResult(
                name,
                "c",
                0,
                f"hpcnet-burnin-collect size={len(self.files[name])}\n{body}",
                "",
                0,
                0,
            )
        self.advance()
        return out

    def advance(self):
        self.tick += 1
        for name in self.files:
            if self.tick < self.rounds:
                self.files[name] += "".join(line(self.tick, g, self.tick) + "\n" for g in range(2))
                self.files[name] += device_line(self.tick) + "\n"
            elif self.tick == self.rounds:
                self.files[name] += f'{{"t": {self.tick}, "end": "done"}}\n'


class Clock:
    def __init__(self):
        self.now = 1_800_000_000.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def campaign(tmp_path, nodes, clock, seconds=8.0, **kw):
    facts = type("F", (), {"transport": nodes})()
    settings = BurninSettings(interval=1, heartbeat=10)
    c = BurninCampaign(
        facts, tmp_path / "burnin", "run-1", seconds, settings, clock=clock, sleep=clock.sleep, **kw
    )
    c._planned = lambda: (dict.fromkeys(nodes.files, 2), {})
    return c


def test_campaign_collects_every_sample_once(tmp_path):
    nodes, clock = FakeNodes(["n1", "n2"], rounds=9), Clock()
    found = campaign(tmp_path, nodes, clock).found()
    for name in ("n1", "n2"):
        assert (tmp_path / "burnin" / f"{name}.jsonl").read_text() == nodes.files[name]
        assert found[name].lines.end == "done" and len(found[name].lines.samples) == 16
    assert judge_burnin(found["n1"], found, Expectations()).outcome == "pass"


def test_a_killed_controller_resumes_without_losing_or_repeating_a_sample(tmp_path):
    nodes, clock = FakeNodes(["n1", "n2"], rounds=9), Clock()
    first = campaign(tmp_path / "a", nodes, clock, max_collections=3).found()
    assert judge_burnin(first["n1"], first, Expectations()).outcome == "not_measured"
    clock.sleep(2.0)  # the controller is down; the nodes go on
    nodes.advance(), nodes.advance()
    resumed = campaign(tmp_path / "b", nodes, clock, resume_from=tmp_path / "a" / "burnin").found()
    assert nodes.started == 2  # started once, re-attached
    for name in ("n1", "n2"):
        assert (tmp_path / "b" / "burnin" / f"{name}.jsonl").read_text() == nodes.files[name]
    assert [s.t for s in resumed["n1"].lines.samples] == [t for t in range(1, 9) for _ in (0, 1)]
    assert judge_burnin(resumed["n1"], resumed, Expectations()).outcome == "pass"


def test_a_node_that_stops_answering_is_named_and_the_others_go_on(tmp_path):
    nodes, clock = FakeNodes(["n1", "n2"], rounds=20, silent={"n2": 4}), Clock()
    found = campaign(tmp_path, nodes, clock, seconds=20.0).found()
    assert found["n1"].lines.end == "done" and not found["n1"].lost
    assert found["n2"].lost == "n2 unreachable: timed out"
    assert found["n2"].last_seen == 1_800_000_000.0 + 3  # its third collection
    verdict = judge_burnin(found["n2"], found, Expectations())
    assert verdict.outcome == "not_measured" and "last seen" in verdict.reason
    assert judge_burnin(found["n1"], found, Expectations()).outcome == "pass"


def test_evidence_stays_under_a_megabyte_per_node_hour():
    per_line = max(len(text) + 1 for text in LAB_RUN.splitlines())
    assert per_line * 8 * 3600 / 30 < 1_000_000  # 8 GPUs, one line each per 30 s


def test_replace_keeps_node_result_frozen():
    found = node(healthy())
    assert replace(found, lost="x").lost == "x"


class Options:
    def __init__(self, markexpr: str = "", **given: str):
        self.option = type("Option", (), {"markexpr": markexpr})()
        self.given = given

    def getoption(self, name: str):
        return self.given.get(name)


def test_a_burnin_runs_only_when_asked():
    from pytest_hpcnet.session import NO_BURNIN, burnin_asked

    assert not burnin_asked(Options())  # a plain handover run: not applicable
    assert not burnin_asked(Options("static"))
    assert burnin_asked(Options(hpcnet_burnin="24h"))
    assert burnin_asked(Options(hpcnet_burnin_resume="20261203-162604-eaa4"))
    assert burnin_asked(Options("burnin"))
    assert NO_BURNIN.startswith("not applicable: ")


def test_lab_faults_record_when_they_start():
    from pytest_hpcnet.lab.burnin import timed_fault
    from pytest_hpcnet.lab.system import LabError

    inject, _ = timed_fault("burnin-ecc")
    kind, value, _ = inject(None, None, "5 8")
    gpu, _, at = value.partition("@")
    assert (kind, gpu) == ("burnin-ecc", "5") and abs(float(at) - time.time() - 8) < 2
    assert timed_fault("burnin-checksum", windows=True)[0](None, None, "1 5")[1] == "1@5"
    with pytest.raises(LabError):
        inject(None, None, "9 8")


def test_no_duration_is_not_measured_with_the_fix(tmp_path):
    nodes = FakeNodes(["n1"], rounds=3)
    inventory = type("Inventory", (), {"nodes": [type("Node", (), {"name": "n1"})()]})()
    facts = type("F", (), {"transport": nodes, "inventory": inventory})()
    c = BurninCampaign(facts, tmp_path, "run-1", None, BurninSettings())
    found = c.found()["n1"]
    verdict = judge_burnin(found, {"n1": found}, Expectations())
    assert verdict.outcome == "not_measured" and "--hpcnet-burnin DURATION" in verdict.fix
    assert nodes.started == 0
