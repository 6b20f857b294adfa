"""The host's hardware, PCIe AER counters and settings: each facts command run by `sh`
against a fake sysfs/proc tree holding real recorded files (tests/fixtures/host), its parser,
and its judge's outcome, bound and source."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.host_hardware import host_hardware_command, parse_host_hardware
from pytest_hpcnet.probes.host_settings import host_settings_command, parse_host_settings
from pytest_hpcnet.probes.pcie_aer import parse_pcie_devices, pcie_devices_command
from pytest_hpcnet.probes.timesync import parse_timesync
from pytest_hpcnet.report.recording import record_codes
from pytest_hpcnet.requirements.host_hardware import InstanceTypeFigures, judge_host_hardware
from pytest_hpcnet.requirements.host_settings import judge_host_settings, judge_time_offset
from pytest_hpcnet.requirements.pcie_aer import judge_nvme_pcie, judge_pcie_aer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "host"
AER = ("correctable", "nonfatal", "fatal")
KIB_PER_GIB = 1024**2


def _run(command: str, root: Path) -> str:
    env = {
        **os.environ,
        "HPCNET_SYSFS": str(root / "sys"),
        "HPCNET_PROC": str(root / "proc"),
        "PATH": f"{root / 'bin'}:{os.environ['PATH']}",
    }
    return subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, env=env, check=False
    ).stdout


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _expect(**host) -> Expectations:
    return Expectations(host=host)


# -- host hardware -----------------------------------------------------------------------------


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A node with the recorded lscpu, 2 TiB less 1 % MemTotal and one 3.84 TB NVMe disk."""
    lscpu = tmp_path / "bin" / "lscpu"
    _write(lscpu, f"#!/bin/sh\ncat {FIXTURES / 'real-lscpu-xeon-8468-2s-96c.txt'}\n")
    lscpu.chmod(0o755)
    mem_kib = int(2048 * 0.99 * KIB_PER_GIB)
    meminfo = f"MemTotal:       {mem_kib} kB\nMemFree:  1 kB\nHugePages_Total:       0\n"
    _write(tmp_path / "proc" / "meminfo", meminfo + "Hugepagesize:       2048 kB\n")
    _write(tmp_path / "sys/class/block/nvme0n1/size", "7501476528\n")
    _write(tmp_path / "sys/class/block/nvme0n1p1/size", "2048\n")
    return tmp_path


def test_host_hardware_reads_the_recorded_lscpu(host):
    hw = parse_host_hardware(_run(host_hardware_command(), host))
    assert (hw.cpu_model, hw.cpus, hw.sockets, hw.threads_per_core) == (
        "Intel(R) Xeon(R) Platinum 8468",
        96,
        2,
        1,
    )
    assert round(hw.mem_total_gib) == 2028 and hw.hugepages_total == 0
    assert [(d.name, d.size_bytes) for d in hw.nvme] == [("nvme0n1", 7501476528 * 512)]
    assert hw.problems == ()


def test_host_hardware_passes_the_expected_node(host):
    hw = parse_host_hardware(_run(host_hardware_command(), host))
    expect = _expect(cpu_model="platinum  8468", cpus=96, memory_gib=2048, nvme_count=1)
    verdict = judge_host_hardware("node1", hw, expect)
    assert verdict.outcome == "pass", verdict.reason
    memory = next(m for m in verdict.measurements if m.name == "mem_total")
    assert (memory.bound, memory.comparison) == (1945.6, ">=")
    assert memory.source.startswith("expect.host.memory_gib 2048 x (1 -0.05)")


def test_a_missing_dimm_and_fewer_cpus_fail_naming_them(host):
    """A node that lost 1/8 of its memory and its second socket."""
    hw = parse_host_hardware(_run(host_hardware_command(), host))
    hw = type(hw)(**{**hw.__dict__, "mem_total_kib": 1792 * KIB_PER_GIB, "cpus": 48})
    verdict = judge_host_hardware("node1", hw, _expect(cpus=96, memory_gib=2048))
    assert verdict.outcome == "fail"
    assert "48 logical CPUs, expected 96" in verdict.reason
    assert "MemTotal 1792 GiB < 1945.6 GiB" in verdict.reason


def test_nothing_expected_is_measured_not_judged(host):
    hw = parse_host_hardware(_run(host_hardware_command(), host))
    verdict = judge_host_hardware("node1", hw, Expectations())
    assert verdict.outcome == "not_measured" and "measured, not judged" in verdict.reason
    assert {m.name: m.value for m in verdict.measurements}["cpus"] == 96
    assert all(
        "reported, not judged" in m.source
        for m in verdict.measurements
        if m.value and m.name != "judge"
    )


LAB_TYPE = InstanceTypeFigures("ecs.hpcnet-lab.emulated", cpus=96, memory_gib=2048.0)


def test_unset_cpus_and_memory_are_judged_against_the_instance_type(host):
    """No profile value: the control plane's CpuCoreCount and MemorySize are the bounds,
    memory with expect.host.memory_lower below the nominal size."""
    hw = parse_host_hardware(_run(host_hardware_command(), host))
    verdict = judge_host_hardware("node1", hw, Expectations(), LAB_TYPE)
    assert verdict.outcome == "pass", verdict.reason
    found = {m.name: m for m in verdict.measurements}
    assert (found["cpus"].bound, found["cpus"].comparison) == (96, "==")
    assert found["cpus"].source.startswith("ecs:DescribeInstanceTypes CpuCoreCount")
    assert (found["mem_total"].bound, found["mem_total"].comparison) == (1945.6, ">=")
    assert found["mem_total"].source.startswith("ecs:DescribeInstanceTypes MemorySize 2048")
    assert "ecs.hpcnet-lab.emulated" in found["mem_total"].source
    assert "memory_lower" in found["mem_total"].source
    lost = type(hw)(**{**hw.__dict__, "mem_total_kib": 1792 * KIB_PER_GIB, "cpus": 48})
    verdict = judge_host_hardware("node1", lost, Expectations(), LAB_TYPE)
    assert verdict.outcome == "fail"
    assert "48 logical CPUs, expected 96 (ecs:DescribeInstanceTypes)" in verdict.reason
    assert "MemTotal 1792 GiB < 1945.6 GiB" in verdict.reason


def test_the_profile_value_wins_over_the_instance_type(host):
    hw = parse_host_hardware(_run(host_hardware_command(), host))
    other = InstanceTypeFigures("ecs.other", cpus=192, memory_gib=4096.0)
    verdict = judge_host_hardware("node1", hw, _expect(cpus=96, memory_gib=2048), other)
    assert verdict.outcome == "pass", verdict.reason
    found = {m.name: m for m in verdict.measurements}
    assert found["cpus"].source == "expect.host.cpus"
    assert found["mem_total"].source.startswith("expect.host.memory_gib 2048")


def test_an_instance_type_without_figures_leaves_them_reported(host):
    hw = parse_host_hardware(_run(host_hardware_command(), host))
    blank = InstanceTypeFigures("ecs.g8i.large")
    verdict = judge_host_hardware("node1", hw, Expectations(), blank)
    assert verdict.outcome == "not_measured" and "measured, not judged" in verdict.reason


def test_no_lscpu_is_not_measured(tmp_path):
    out = "== lscpu\nsh: 1: lscpu: not found\n== meminfo\n== nvme\n"
    verdict = judge_host_hardware("node1", parse_host_hardware(out), _expect(cpus=96))
    assert verdict.outcome == "not_measured" and "cpus not read" in verdict.reason


# -- PCIe AER ----------------------------------------------------------------------------------


def _pci(root: Path, bdf: str, vendor: str, device: str, cls: str, **counts: int) -> None:
    base = root / "sys/bus/pci/devices" / bdf
    for name, value in (("vendor", vendor), ("device", device), ("class", cls)):
        _write(base / name, f"{value}\n")
    for key, value in (("current_link_speed", "16.0 GT/s PCIe"), ("current_link_width", 16)):
        _write(base / key, f"{value}\n")
        _write(base / key.replace("current", "max"), f"{value}\n")
    for severity in AER:
        text = (FIXTURES / f"real-aer_dev_{severity}-amd-0000-23-00.1.txt").read_text()
        for bit, value in counts.items():
            if _SEVERITY[bit] == severity:
                text = re.sub(rf"^{bit} 0$", f"{bit} {value}", text, flags=re.M)
                text = re.sub(r"^(TOTAL_\w+) 0$", rf"\g<1> {value}", text, flags=re.M)
        _write(base / f"aer_dev_{severity}", text)


_SEVERITY = {"RxErr": "correctable", "CmpltTO": "nonfatal", "DLP": "fatal"}


@pytest.fixture
def pci(tmp_path: Path) -> Path:
    _pci(tmp_path, "0000:18:00.0", "0x10de", "0x2335", "0x030200")
    _pci(tmp_path, "0000:18:00.1", "0x10de", "0x22a3", "0x068000")  # NVSwitch-class: left out
    _pci(tmp_path, "0000:5e:00.0", "0x1ded", "0x107f", "0x020000")
    _pci(tmp_path, "0000:9a:00.0", "0x144d", "0xa80a", "0x010802")
    _pci(tmp_path, "0000:00:03.1", "0x1022", "0x1453", "0x060400")  # a root port: left out
    return tmp_path


def test_pcie_devices_are_found_by_id_and_class(pci):
    found = parse_pcie_devices(_run(pcie_devices_command(), pci))
    assert found.complete and found.problems == ()
    kinds = [(d.bdf, d.kind) for d in found.devices]
    assert kinds == [("0000:18:00.0", "gpu"), ("0000:5e:00.0", "eri"), ("0000:9a:00.0", "nvme")]
    assert all(d.aer == dict.fromkeys(AER, 0) for d in found.devices)
    verdict = judge_pcie_aer("node1", found, Expectations())
    assert verdict.outcome == "pass"
    correctable = [m for m in verdict.measurements if m.name == "aer_correctable"]
    assert all(m.comparison is None and "none published" in m.source for m in correctable)


@pytest.mark.parametrize(
    ("bit", "counter"), [("CmpltTO", "aer_dev_nonfatal"), ("DLP", "aer_dev_fatal")]
)
def test_an_uncorrectable_error_fails_naming_node_device_bus_and_counter(pci, bit, counter):
    _pci(pci, "0000:5e:00.0", "0x1ded", "0x107f", "0x020000", **{bit: 2})
    verdict = judge_pcie_aer(
        "node1", parse_pcie_devices(_run(pcie_devices_command(), pci)), Expectations()
    )
    assert verdict.outcome == "fail"
    assert verdict.reason == f"node1: ERI 0000:5e:00.0 {counter} 2 ({bit} 2)"


def test_correctable_errors_fail_only_past_their_bound(pci):
    _pci(pci, "0000:9a:00.0", "0x144d", "0xa80a", "0x010802", RxErr=7)
    found = parse_pcie_devices(_run(pcie_devices_command(), pci))
    assert judge_pcie_aer("node1", found, Expectations()).outcome == "pass"
    assert judge_pcie_aer("node1", found, _expect(aer_max_correctable=10)).outcome == "pass"
    verdict = judge_pcie_aer("node1", found, _expect(aer_max_correctable=5))
    assert verdict.outcome == "fail" and "NVMe 0000:9a:00.0 aer_dev_correctable 7" in verdict.reason
    codes = {m.code for m in verdict.measurements if m.outcome == "fail"}
    assert codes == {"HPCNET-PCIE-AER-CORRECTABLE"}


def test_a_device_without_aer_files_or_a_cut_listing_is_not_measured(pci):
    for severity in AER:
        (pci / "sys/bus/pci/devices/0000:18:00.0" / f"aer_dev_{severity}").unlink()
    text = _run(pcie_devices_command(), pci)
    verdict = judge_pcie_aer("node1", parse_pcie_devices(text), Expectations())
    assert verdict.outcome == "not_measured" and "GPU 0000:18:00.0 has no AER" in verdict.reason
    cut = text.replace("done", "")
    assert judge_pcie_aer("node1", parse_pcie_devices(cut), Expectations()).outcome == (
        "not_measured"
    )


def test_an_nvme_link_below_its_maximum_fails(pci):
    found = parse_pcie_devices(_run(pcie_devices_command(), pci))
    assert judge_nvme_pcie("node1", found).outcome == "pass"
    _write(pci / "sys/bus/pci/devices/0000:9a:00.0/current_link_width", "8\n")
    verdict = judge_nvme_pcie("node1", parse_pcie_devices(_run(pcie_devices_command(), pci)))
    assert (
        verdict.outcome == "fail" and "NVMe 0000:9a:00.0 PCIe link 8 of 16 lanes" in verdict.reason
    )


# -- host settings and time sync ---------------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    sys_ = tmp_path / "sys"
    _write(sys_ / "devices/system/clocksource/clocksource0/current_clocksource", "tsc\n")
    for cpu in range(4):
        _write(sys_ / f"devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor", "performance\n")
    _write(sys_ / "kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
    _write(sys_ / "kernel/iommu_groups/0/type", "identity\n")
    _write(tmp_path / "proc/sys/kernel/numa_balancing", "0\n")
    _write(tmp_path / "proc/cmdline", "BOOT_IMAGE=/vmlinuz ro iommu=pt\n")
    return tmp_path


def test_host_settings_are_read_and_judged(settings):
    found = parse_host_settings(_run(host_settings_command(), settings))
    assert (found.clocksource, found.governor, found.numa_balancing, found.thp) == (
        "tsc",
        "performance",
        "0",
        "madvise",
    )
    assert (found.iommu_mode, found.governors) == ("passthrough", (("performance", 4),))
    want = {"clocksource": "tsc", "numa_balancing": "0", "iommu": "passthrough"}
    verdict = judge_host_settings("node1", found, _expect(**want))
    assert verdict.outcome == "pass"
    shown = {m.name: (m.value, m.comparison, m.source) for m in verdict.measurements}
    assert shown["clocksource"] == ("tsc", "==", "expect.host.clocksource")
    assert shown["governor"][1] is None and "not judged" in shown["governor"][2]


def test_an_hpet_clocksource_and_a_powersave_cpu_fail_naming_them(settings):
    sys_ = settings / "sys/devices/system"
    _write(sys_ / "clocksource/clocksource0/current_clocksource", "hpet\n")
    _write(sys_ / "cpu/cpu2/cpufreq/scaling_governor", "powersave\n")
    found = parse_host_settings(_run(host_settings_command(), settings))
    assert found.governor == "mixed"
    verdict = judge_host_settings(
        "node1", found, _expect(clocksource="tsc", governor="performance")
    )
    assert verdict.outcome == "fail"
    assert "clocksource is 'hpet', expected 'tsc'" in verdict.reason
    assert "governor is 'mixed', expected 'performance'" in verdict.reason


def test_no_cpufreq_and_no_iommu_groups_are_shown_as_such(tmp_path):
    _write(tmp_path / "proc/cmdline", "ro quiet\n")
    found = parse_host_settings(_run(host_settings_command(), tmp_path))
    assert (found.governor, found.iommu_mode, found.clocksource) == ("none", "off", None)
    verdict = judge_host_settings("node1", found, _expect(clocksource="tsc"))
    assert verdict.outcome == "not_measured" and "clocksource not shown" in verdict.reason
    assert judge_host_settings("node1", found, Expectations()).outcome == "not_measured"


@pytest.mark.parametrize(
    ("name", "tool", "offset_ms", "reference"),
    [
        ("real-chronyc-tracking-ec2-slow.txt", "chrony", -0.031625, "C7E9ECE2 (pyramid.latt.net)"),
        ("real-chronyc-tracking-ec2-fast.txt", "chrony", 0.000031, "A9FEA97B (169.254.169.123)"),
        (
            "real-timedatectl-timesync-status-ubuntu.txt",
            "timesyncd",
            2.497,
            "91.189.94.4 (ntp.ubuntu.com)",
        ),
    ],
)
def test_time_offsets_are_read_from_chrony_and_timesyncd(name, tool, offset_ms, reference):
    sync = parse_timesync((FIXTURES / name).read_text())
    assert (sync.tool, sync.synchronised, sync.reference) == (tool, True, reference)
    assert sync.offset_ms == pytest.approx(offset_ms)
    assert judge_time_offset("node1", sync, _expect(max_time_offset_ms=5)).outcome == "pass"
    unjudged = judge_time_offset("node1", sync, Expectations())
    assert unjudged.outcome == "not_measured" and "measured, not judged" in unjudged.reason


def test_a_skewed_or_unsynchronised_clock_fails():
    text = (FIXTURES / "real-chronyc-tracking-ec2-slow.txt").read_text()
    skewed = parse_timesync(text.replace("0.000031625 seconds slow", "2.500000000 seconds fast"))
    verdict = judge_time_offset("node1", skewed, _expect(max_time_offset_ms=100))
    assert (
        verdict.outcome == "fail"
        and "clock offset +2500.000 ms (chrony) beyond 100 ms" in verdict.reason
    )
    unsynced = parse_timesync(
        text.replace("Leap status     : Normal", "Leap status     : Not synchronised")
    )
    verdict = judge_time_offset("node1", unsynced, _expect(max_time_offset_ms=100))
    assert verdict.outcome == "fail" and verdict.code == "HPCNET-TIME-SYNC"
    # no measurement failed: the record takes the judge's code, not the default
    record = {"check_id": "host_settings", "measured": []}
    assert record_codes(record, verdict.code) == ["HPCNET-TIME-SYNC"]
    assert record_codes(record) == ["HPCNET-HOST-SETTING"]
    down = parse_timesync("506 Cannot talk to daemon\n")
    verdict = judge_time_offset("node1", down, _expect(max_time_offset_ms=100))
    assert verdict.outcome == "not_measured" and "506 Cannot talk to daemon" in verdict.reason
