"""Burn-in device watch: the node program's device line (sysfs AER, RDMA and NIC counters,
NVLink), the parser's typed device samples and copy bandwidth (old lines still read), and
the judges (each device fails at its first time; resets; not measured without data)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes import burnin as probe
from pytest_hpcnet.probes.burnin import DeviceSample, parse_lines
from pytest_hpcnet.probes.counters import BAD_COUNTERS
from pytest_hpcnet.requirements.burnin import (
    CODES,
    NodeBurnin,
    counter_rise,
    device_measurements,
    judge_burnin,
)
from pytest_hpcnet.requirements.registry import requirement
from tests.unit.test_burnin import EXPECT, FIXTURE, LAB_RUN, device_line, healthy, line

RUN = (FIXTURE / "samples-8gpu-2eri-lab-aer-gpu3-counter-erdma1.jsonl").read_text()
NVLINK = Expectations.model_validate({"gpu_load": {"max_temperature_c": 85, "nvlink_links": 18}})


def program():
    spec = importlib.util.spec_from_file_location("burnin_program", probe.PROGRAM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def judged(lines: list[str], expect: Expectations = EXPECT):
    found = NodeBurnin("node01", 10.0, parse_lines(lines), gpus=2)
    return judge_burnin(found, {"node01": found}, expect)


def failed(verdict) -> dict[str, str]:
    return {
        f"{m.subject} {m.name}": str(m.value) for m in verdict.measurements if m.outcome == "fail"
    }


def with_devices(changes_from: float, **changes: dict) -> list[str]:
    """A healthy run whose device lines from `changes_from` on carry `changes`."""
    out = []
    for text in healthy():
        record = json.loads(text)
        if "dev" in record and record["t"] >= changes_from:
            text = device_line(record["t"], **changes)
        out.append(text)
    return out


# -- the program and the parser ------------------------------------------------------------


def test_program_orders_match_the_parser():
    prog = program()
    assert tuple(f"aer_{k}" for k in prog.AER) == probe.AER_KEYS
    assert tuple(f"nvlink_{k}" for k in prog.NVLINK) == probe.NVLINK_KEYS
    assert prog.RDMA == probe.RDMA_KEYS and prog.NIC == probe.NIC_KEYS
    assert set(prog.RDMA + prog.NIC) == set(BAD_COUNTERS)
    assert len(prog.FIELDS) == len(prog.KEYS)


def test_program_reads_a_sysfs_tree(tmp_path, monkeypatch):
    """GPUs and ERIs found by PCI id, ERI names from `infiniband/`, AER totals, hw_counters
    summed over ports, NIC statistics of the ERI's netdev; NVLink summed over links."""
    prog = program()
    pci = tmp_path / "bus/pci/devices"
    for bdf, ids in {
        "0000:18:00.0": ("0x10de", "0x2335", "0x030200"),
        "0000:1c:00.0": ("0x1ded", "0x107f", "0x020000"),
        "0000:00:01.0": ("0x8086", "0x1234", "0x060400"),
    }.items():
        (pci / bdf).mkdir(parents=True)
        for name, value in zip(("vendor", "device", "class"), ids, strict=True):
            (pci / bdf / name).write_text(value + "\n")
    (pci / "0000:1c:00.0/infiniband/erdma_0").mkdir(parents=True)
    (pci / "0000:18:00.0/aer_dev_nonfatal").write_text("CmpltTO 3\nTOTAL_ERR_NONFATAL 3\n")
    (pci / "0000:18:00.0/aer_dev_correctable").write_text("RxErr 2\nBadTLP 1\n")  # no TOTAL_
    ib = tmp_path / "class/infiniband/erdma_0"
    (ib / "device/net/eth0").mkdir(parents=True)
    for port, value in (("1", "4"), ("2", "1")):
        (ib / "ports" / port / "hw_counters").mkdir(parents=True)
        (ib / "ports" / port / "hw_counters/connect_failed_cnt").write_text(value + "\n")
    stats = tmp_path / "class/net/eth0/statistics"
    stats.mkdir(parents=True)
    for name, value in zip(prog.NIC, ("0", "1", "7", "0"), strict=True):
        (stats / name).write_text(value + "\n")
    nvlink = "GPU 0: NVIDIA H200 (UUID: GPU-x)\n\t Link 0: Replay Errors: 2\n"
    nvlink += "\t Link 0: Recovery Errors: 0\n\t Link 0: CRC Flit Errors: 1\n"
    nvlink += "\t Link 1: Replay Errors: 1\n\t Link 1: CRC Data Errors: 4\n"
    ran = type("Ran", (), {"stdout": nvlink, "returncode": 0})()
    monkeypatch.setattr(prog.subprocess, "run", lambda *a, **kw: ran)
    devices = prog.Devices(str(tmp_path))
    assert devices.pci == {"0000:18:00.0": "gpu", "0000:1c:00.0": "erdma_0"}
    rows = [{"gpu": 0, "bus": "00000000:18:00.0"}]
    record = prog.device_line(devices, rows, 30.04, 30.0)
    assert record == {
        "t": 30.0,
        "dev": {
            "GPU 0": {"aer": [3, 3, None], "nvl": [3, 0, 5]},
            "erdma_0": {"aer": [None, None, None], "rdma": [None, None, None, None, 5, None, None]},
            "eth0": {"nic": [0, 1, 7, 0]},
        },
    }
    again = prog.device_line(devices, rows, 60.0, 30.0)  # NVLink only every NVLINK_EVERY_S
    assert "nvl" not in again["dev"]["GPU 0"]
    assert "nvl" in prog.device_line(devices, rows, 90.0, 30.0, last=True)["dev"]["GPU 0"]
    assert "GPU 0" in prog.device_line(devices, [], 120.0, 30.0)["dev"]  # query failed: kept


def test_device_lines_and_copy_parse():
    found = parse_lines(RUN)
    assert found.unreadable == 0 and found.end == "done"
    assert {d.device for d in found.devices} == {f"GPU {i}" for i in range(8)} | {
        "erdma_0",
        "erdma_1",
        "eth0",
    }
    kinds = {d.device: d.kind for d in found.devices}
    assert (kinds["GPU 3"], kinds["erdma_1"], kinds["eth0"]) == ("gpu", "eri", "nic")
    gpu3 = [d for d in found.devices if d.device == "GPU 3"]
    assert gpu3[0].t == 0.2 and gpu3[0].counters["nvlink_replay"] == 0
    assert [d.counters["aer_nonfatal"] for d in gpu3][4:6] == [0, 2]
    assert "nvlink_replay" not in gpu3[1].counters  # not read that time: absent
    windows = [w for s in found.samples if s.gpu == 0 for w in s.windows]
    assert all(w.copy_gbps and w.copy_gbps > 4000 for w in windows)
    assert {
        (s.pcie_gen, s.pcie_width, s.pcie_gen_max, s.pcie_width_max) for s in found.samples
    } == {(5, 16, 5, 16)}


def test_old_lines_still_parse():
    """Three-element windows and no device line: copy and devices absent, nothing lost."""
    found = parse_lines(LAB_RUN)
    assert found.unreadable == 0 and found.devices == () and len(found.samples) == 72
    windows = [w for s in found.samples for w in s.windows]
    assert windows and all(w.copy_gbps is None and w.checksum for w in windows)
    assert all(s.pcie_gen is None for s in found.samples)


@pytest.mark.parametrize(
    "text",
    [
        '{"t": 1, "dev": 3}',
        '{"t": 1, "dev": {"erdma_0": {"rdma": [1, 2]}}}',  # wrong length: not read
        '{"t": 1, "dev": {"erdma_0": {"aer": [-1, "x", true]}}}',
        '{"t": 1, "gpu": 0, "win": [[1, 2.0, "ab", "fast"], [2], [3, 1, "c", 4, 5]]}',
    ],
)
def test_odd_device_lines_never_raise(text):
    found = parse_lines([text])
    assert found.unreadable <= 1
    for d in found.devices:
        assert all(v is None or v >= 0 for v in d.counters.values())
    for s in found.samples:
        assert [w.number for w in s.windows] == [1] and s.windows[0].copy_gbps is None


# -- the judges -----------------------------------------------------------------------------


def test_the_device_run_fails_gpu3_aer_and_erdma1_counters_at_their_times():
    verdict = judged(RUN.splitlines(), NVLINK)
    assert failed(verdict) == {
        "GPU 3 burnin.aer": "aer_nonfatal +2 at t=5.6 s (0h00m05s)",
        "erdma_1 burnin.eri_counters": "connect_timeout_cnt +1 at t=7.2 s (0h00m07s)",
    }
    assert verdict.code == "HPCNET-BURNIN-AER" and verdict.reason.startswith("GPU 3 aer")
    assert {m.code for m in verdict.measurements if m.outcome == "fail"} == {
        "HPCNET-BURNIN-AER",
        "HPCNET-BURNIN-NETWORK",
    }
    names = {(m.subject, m.name) for m in verdict.measurements if m.outcome == "pass"}
    assert ("GPU 0", "burnin.nvlink_errors") in names  # read at the start and in the last interval
    assert ("eth0", "burnin.nic_drops") in names and ("erdma_0", "burnin.aer") in names


@pytest.mark.parametrize(
    ("changes", "expect", "name"),
    [
        ({"erdma_0": {"aer": [0, 0, 1]}}, EXPECT, "erdma_0 burnin.aer"),
        ({"GPU_1": {"aer": [0, 1, 0]}}, EXPECT, "GPU 1 burnin.aer"),
        ({"GPU_1": {"nvl": [0, 0, 1]}}, NVLINK, "GPU 1 burnin.nvlink_errors"),
        ({"erdma_0": {"rdma": [1, 0, 0, 0, 0, 0, 0]}}, EXPECT, "erdma_0 burnin.eri_counters"),
        ({"eth0": {"nic": [1, 0, 0, 0]}}, EXPECT, "eth0 burnin.nic_errors"),
        ({"eth0": {"nic": [0, 0, 11, 0]}}, EXPECT, "eth0 burnin.nic_drops"),
        (
            {"erdma_0": {"aer": [5, 0, 0]}},
            Expectations.model_validate({"host": {"aer_max_correctable": 4}}),
            "erdma_0 burnin.aer_correctable",
        ),
    ],
)
def test_each_device_quantity_fails_its_device_at_its_first_time(changes, expect, name):
    verdict = judged(with_devices(7.0, **changes), expect)
    assert verdict.outcome == "fail", verdict.reason
    assert list(failed(verdict)) == [name]
    assert "at t=7 s (0h00m07s)" in failed(verdict)[name]
    code = CODES[name.split()[-1]][0]
    assert verdict.code == code
    assert code in {f.code for f in requirement("burnin").faults}


def test_within_bounds_and_correctable_errors_pass():
    verdict = judged(with_devices(7.0, eth0={"nic": [0, 0, 10, 0]}, erdma_0={"aer": [9, 0, 0]}))
    assert verdict.outcome == "pass", verdict.reason
    corrected = next(
        m
        for m in verdict.measurements
        if (m.subject, m.name) == ("erdma_0", "burnin.aer_correctable")
    )
    assert (corrected.value, corrected.outcome, corrected.comparison) == (9, None, None)


def test_nvlink_is_not_judged_where_the_profile_has_none():
    verdict = judged(with_devices(7.0, GPU_1={"nvl": [0, 0, 9]}), EXPECT)
    assert verdict.outcome == "pass"
    assert not any(m.name == "burnin.nvlink_errors" for m in verdict.measurements)


def test_counter_resets_count_from_zero():
    quiet = counter_rise([(0, 5), (1, 5), (2, 0), (3, 0)], 0)
    assert (quiet.total, quiet.over_at, quiet.resets) == (0, None, (2,))
    moved = counter_rise([(0, 5), (1, None), (2, 1), (3, 4)], 0)
    assert (moved.total, moved.over_at, moved.resets, moved.readings) == (4, 2, (2,), 3)
    lines = with_devices(5.0, eth0={"nic": [0, 0, 0, 0]})
    lines = [device_line(0.0, eth0={"nic": [0, 0, 7, 0]}), *lines[1:]]  # reset to 0 at t=3
    verdict = judged(lines)
    assert verdict.outcome == "pass", verdict.reason
    drops = next(m for m in verdict.measurements if m.name == "burnin.nic_drops")
    assert "rx_dropped reset at t=3 s" in drops.basis
    after = [
        device_line(0.0, eth0={"nic": [0, 0, 7, 0]}),
        *with_devices(5.0, eth0={"nic": [0, 0, 20, 0]})[1:],
    ]
    assert "eth0 burnin.nic_drops" in failed(judged(after))  # 0 at t=3, then 20: +20


def test_old_lines_judge_what_they_have_and_leave_the_rest_not_measured():
    old = [
        text.replace(", 4300.0]]", "]]").replace('"pg": 5, "pw": 16, ', "")
        for text in healthy()
        if '"dev"' not in text
    ]
    verdict = judged(old)
    assert verdict.outcome == "not_measured"
    unmeasured = {(m.subject, m.name) for m in verdict.measurements if m.outcome == "not_measured"}
    assert {
        ("", "burnin.devices"),
        ("GPU 0", "burnin.copy_drift"),
        ("GPU 1", "burnin.pcie_link"),
    } <= unmeasured
    assert {m.name for m in verdict.measurements if m.outcome == "pass"} >= {
        "burnin.xid",
        "burnin.checksum",
        "burnin.tflops_drift",
    }
    old[5] = line(3.0, 1, 1, xid=[79]).replace(", 4300.0]]", "]]")
    assert judged(old).outcome == "fail"


def test_devices_without_data_are_not_measured():
    no_eri = [
        json.dumps({"t": json.loads(t)["t"], "dev": {"GPU 0": {"aer": [0, 0, 0]}}})
        if '"dev"' in t
        else t
        for t in healthy()
    ]
    verdict = judged(no_eri)
    unmeasured = {
        (m.subject, m.name): m.value for m in verdict.measurements if m.outcome == "not_measured"
    }
    assert unmeasured == {
        ("GPU 1", "burnin.aer"): "not read",
        ("ERI", "burnin.eri_counters"): "no ERI counters read",
    }
    assert verdict.outcome == "not_measured"
    assert verdict.reason.startswith("not measured: GPU 1 aer not read (and 1 more)")
    cpu_only = Expectations.model_validate({"rdma": {"min_devices": 0}})
    unread = {
        m.subject for m in judged(no_eri, cpu_only).measurements if m.outcome == "not_measured"
    }
    assert unread == {"GPU 1"}
    nulls = [
        device_line(json.loads(t)["t"], erdma_0={"rdma": [None] * 7}) if '"dev"' in t else t
        for t in healthy()
    ]
    eri = next(m for m in judged(nulls).measurements if m.name == "burnin.eri_counters")
    assert (eri.subject, eri.outcome, eri.value) == ("erdma_0", "not_measured", "not read")


def test_device_sample_kinds():
    assert DeviceSample(0, "GPU 2", {"aer_fatal": 0}).kind == "gpu"
    assert DeviceSample(0, "erdma_1", {"aer_fatal": 0}).kind == "eri"
    assert DeviceSample(0, "eth1", {"rx_errors": 0}).kind == "nic"


def test_device_evidence_stays_under_a_megabyte_per_node_hour():
    """The measured run: every byte the program wrote per sample round (8 GPU lines and a
    device line of 8 GPUs, 2 ERIs and a NIC) x 120 rounds an hour at 30 s."""
    rounds = sum(1 for text in RUN.splitlines() if '"gpu":0,' in text)
    assert len(RUN) / rounds * 3600 / 30 < 400_000
    assert Path(probe.PROGRAM).read_text().count("def device_line") == 1


def test_lab_flap_fault_records_its_first_time_and_period(tmp_path):
    """Without a live lab (no namespace) the injector only records `ERI@FIRST@PERIOD`;
    a wrong ERI or period is refused."""
    import time

    from pytest_hpcnet.lab.burnin import flap_fault
    from pytest_hpcnet.lab.state import LabNode, LabState
    from pytest_hpcnet.lab.system import LabError

    node = LabNode("node01", "198.18.0.11", 8500)
    state = LabState(str(tmp_path), "lab.yaml", nodes=[node], eris=2)
    inject, heal = flap_fault()
    kind, value, undo = inject(state, node, "erdma_1 8")
    device, first, period = value.split("@")
    assert (kind, device, period, undo) == ("burnin-flap", "erdma_1", "8", "0 eth0")
    assert abs(float(first) - time.time() - 8) < 2
    heal(state, node, kind, undo)  # nothing started, nothing to stop
    for bad in ("erdma_2 8", "erdma_1 0.5", "erdma_1", None):
        with pytest.raises(LabError):
            inject(state, node, bad)


def test_nic_drops_are_bounded_per_hour_of_burn_in():
    """`nic_max_dropped` (10) bounds a benchmark phase of minutes; Linux counts every frame of
    a protocol nobody handles as rx_dropped, so a healthy node's drops grow with time: a
    24-hour burn-in allows 10 an hour (240), a burn-in shorter than an hour still 10."""
    lines = with_devices(7.0, eth0={"nic": [0, 0, 200, 0]})
    day = NodeBurnin("node01", 86400.0, parse_lines(lines), gpus=2)
    drops = next(m for m in device_measurements(day, EXPECT) if m.name == "burnin.nic_drops")
    assert (drops.outcome, drops.bound) == ("pass", 240), drops
    assert "per hour" in drops.source
    lines = with_devices(7.0, eth0={"nic": [0, 0, 241, 0]})
    day = NodeBurnin("node01", 86400.0, parse_lines(lines), gpus=2)
    drops = next(m for m in device_measurements(day, EXPECT) if m.name == "burnin.nic_drops")
    assert drops.outcome == "fail", drops
    assert "eth0 burnin.nic_drops" in failed(judged(with_devices(7.0, eth0={"nic": [0, 0, 11, 0]})))


# -- NVSwitch SXids and the kernel log ----------------------------------------------------------

SXID_LOG = [  # the driver's NVSWITCH_PRINT_SXID format (open-gpu-kernel-modules error_nvswitch.h)
    "[ 123.456789] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 20009, Non-fatal, Link 28 RX Short"
    " Error Rate",
    "[ 123.456790] nvidia-nvswitch2: SXid (PCI:0000:0b:00.0): 12028, Correctable, Link 04 egress",
    "[ 123.456791] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.",
    "[ 123.456792] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 30 sourcetrack"
    " timeout error",
]


def test_the_program_reads_sxids_beside_xids():
    prog = program()
    seen: set[str] = set()
    sxids: list = []
    assert prog.new_xids(SXID_LOG, seen, sxids) == {"18": [79]}
    assert sxids == [
        ["nvidia-nvswitch0", 20009, "Non-fatal"],
        ["nvidia-nvswitch2", 12028, "Correctable"],
        ["nvidia-nvswitch0", 24007, "Fatal"],
    ]
    again: list = []
    assert prog.new_xids(SXID_LOG, seen, again) == {} and again == []  # seen: not twice


SXID_EVENTS = [  # driver 570.195.03 at boot, as posted in NVIDIA/nvtrust issue #124: each
    # event is a Data line, its severity line and an engine line, all with the same SXid
    "[   38.175561] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Data {0x0000002b,"
    " 0x0000002b, 0x00000000, 0x0000002b, 0x80005302, 0x00000000, 0x00000000, 0x00000000,"
    " 0x00000000}",
    "[   38.178720] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion"
    " Link DLREQ interrupt",
    "[   38.180708] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Severity 0 Engine instance"
    " 44 Sub-engine instance 00",
    "[   38.187830] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 45 Minion"
    " Link DLREQ interrupt",
]


def test_an_sxid_event_of_three_lines_counts_once_by_its_severity_line():
    sxids: list = []
    assert program().new_xids(SXID_EVENTS, set(), sxids) == {}
    assert sxids == [["nvidia-nvswitch3", 22013, "Non-fatal"]] * 2  # links 44 and 45


def test_an_unreadable_kernel_log_is_none_not_empty(tmp_path, monkeypatch):
    """`dmesg` as a user under kernel.dmesg_restrict=1 fails: no Xid read is not no Xid."""
    prog = program()
    fake = tmp_path / "dmesg"
    fake.write_text(
        "#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    assert prog.xid_lines() is None
    fake.write_text("#!/bin/sh\nprintf '%s\\n' 'boot' 'NVRM: Xid (PCI:0000:18:00): 13, x'\n")
    assert prog.xid_lines() == ["NVRM: Xid (PCI:0000:18:00): 13, x"]


def with_switch_errors(t: float, *errors: list) -> list[str]:
    lines = with_devices(99.0)
    out = []
    for text in lines:
        record = json.loads(text)
        if "dev" in record and record["t"] == t:
            record["sxid"] = list(errors)
        out.append(json.dumps(record))
    return out


NVSWITCH = Expectations.model_validate({"gpu_load": {"max_temperature_c": 85, "nvswitch": True}})


def test_a_fatal_or_non_fatal_sxid_fails_the_nvswitch_at_its_time():
    verdict = judged(with_switch_errors(7.0, ["nvidia-nvswitch0", 20009, "Non-fatal"]), NVSWITCH)
    assert verdict.outcome == "fail", verdict.reason
    assert list(failed(verdict)) == ["NVSwitch burnin.sxid"]
    value = failed(verdict)["NVSwitch burnin.sxid"]
    assert "nvidia-nvswitch0 SXid 20009 (Non-fatal) at t=7 s" in value
    assert verdict.code == CODES["burnin.sxid"][0]
    assert CODES["burnin.sxid"][0] in {f.code for f in requirement("burnin").faults}


def test_a_correctable_sxid_is_reported_and_no_sxid_passes():
    verdict = judged(with_switch_errors(7.0, ["nvidia-nvswitch2", 12028, "Correctable"]), NVSWITCH)
    assert verdict.outcome == "pass", verdict.reason
    sxid = [m for m in verdict.measurements if m.name.startswith("burnin.sxid")]
    assert {(m.subject, m.name, m.outcome) for m in sxid} == {
        ("NVSwitch", "burnin.sxid", "pass"),
        ("NVSwitch", "burnin.sxid_correctable", None),
    }
    quiet = judged(with_devices(99.0), EXPECT)  # no NVSwitch in the profile, none logged
    assert not [m for m in quiet.measurements if m.name.startswith("burnin.sxid")]


def test_an_unreadable_kernel_log_leaves_xid_and_sxid_unmeasured():
    lines = []
    for text in with_devices(99.0):
        record = json.loads(text)
        if "dev" in record and record["t"] == 0.0:
            record["klog"] = "unreadable: dmesg: read kernel buffer failed: Operation not permitted"
        lines.append(json.dumps(record))
    verdict = judged(lines, NVSWITCH)
    assert verdict.outcome == "not_measured", verdict.reason
    unmeasured = {(m.subject, m.name) for m in verdict.measurements if m.outcome == "not_measured"}
    assert {("GPU 0", "burnin.xid"), ("GPU 1", "burnin.xid"), ("NVSwitch", "burnin.sxid")} <= (
        unmeasured
    )
    assert "kernel log" in verdict.reason and "dmesg_restrict" in verdict.fix + verdict.reason


def test_the_memory_clock_is_sampled_and_parsed():
    prog = program()
    assert prog.KEYS[prog.FIELDS.index("clocks.mem")] == "mem"
    found = parse_lines(['{"t": 1.0, "gpu": 0, "mem": 3201, "sm": 1980}'])
    assert found.samples[0].mem == 3201.0


def test_without_hw_counters_the_program_asks_rdma(tmp_path, monkeypatch):
    """No `hw_counters` and no `device/net` in sysfs (erdma's netdev is another PCI
    function): the netdevs come from `rdma -j link show`, the counters from `rdma -j
    statistic show` summed over ports; a tool that fails or prints no list gives nothing."""
    prog = program()
    (tmp_path / "class/infiniband/erdma_0/ports/1").mkdir(parents=True)
    outputs = {
        ("link", "show"): '[{"ifname": "erdma_0", "port": 1, "netdev": "eth0"}]',
        ("statistic", "show"): '[{"ifname": "erdma_0", "port": 1, "connect_failed_cnt": 2},'
        ' {"ifname": "erdma_0", "port": 2, "connect_failed_cnt": 1, "hw_bps_limit_drop_cnt": 4}]',
    }

    def run(argv, **kw):
        return type("Ran", (), {"stdout": outputs.get(tuple(argv[2:]), "")})()

    monkeypatch.setattr(prog.subprocess, "run", run)
    devices = prog.Devices(str(tmp_path))
    assert devices.netdevs == ["eth0"] and not devices.hw_counters
    counters = devices.rdma_counters()["erdma_0"]
    assert counters[prog.RDMA.index("connect_failed_cnt")] == 3
    assert counters[prog.RDMA.index("hw_bps_limit_drop_cnt")] == 4
    outputs[("statistic", "show")] = "rdma: unknown command"
    assert devices.rdma_counters() == {}
