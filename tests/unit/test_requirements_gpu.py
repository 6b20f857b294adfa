"""Each GPU judge: the failing cases first (node, GPU index, bus id, value, fix), then what
was not measured (never a failure a waiver could cover), then a pass; and the values as
measurements per GPU."""

from __future__ import annotations

import re

import pytest

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.gpu import parse_query_gpu
from pytest_hpcnet.probes.gpu_host import parse_memlock, parse_modules
from pytest_hpcnet.probes.gpu_rdma import RdmaSysfs, parse_rdma_sysfs
from pytest_hpcnet.probes.gpu_topo import parse_topo
from pytest_hpcnet.probes.gpu_xid import parse_kernel_log
from pytest_hpcnet.requirements.gpu import (
    judge_count_model,
    judge_ecc,
    judge_mig,
    judge_pcie,
    judge_persistence,
    judge_throttle,
    judge_xid,
)
from pytest_hpcnet.requirements.gpu_node import (
    judge_gpu_nic_numa,
    judge_memlock,
    judge_modules,
    judge_nccl_ib_hca,
    judge_rdma_pcie,
    judge_versions,
)

H200 = "NVIDIA H200"


def expect(**gpu) -> Expectations:
    """Expectations with these `expect.gpu` keys (and `versions` when given)."""
    versions = gpu.pop("versions", {})
    return Expectations.model_validate({"gpu": gpu, "versions": versions})


def at_fault(verdict) -> tuple[int, ...]:
    """The GPU indexes a failed verdict names (`GPU 3 (bus)`), in order."""
    return tuple(dict.fromkeys(int(i) for i in re.findall(r"GPU (\d+) \(", verdict.reason)))


@pytest.fixture
def query(fixture_text):
    return lambda name: parse_query_gpu(fixture_text("gpu", name))


@pytest.fixture
def healthy(query):
    return query("query-8gpu-h200.csv")


ALL_JUDGES = (
    lambda q: judge_count_model("node05", q, expect(count=8, model=H200)),
    lambda q: judge_ecc("node05", q),
    lambda q: judge_throttle("node05", q),
    lambda q: judge_pcie("node05", q),
    lambda q: judge_persistence("node05", q, expect()),
    lambda q: judge_mig("node05", q, expect()),
)


@pytest.mark.parametrize(
    ("name", "state_text"),
    [
        ("smi-no-driver.txt", "couldn't communicate with the NVIDIA driver"),
        ("smi-version-mismatch.txt", "Driver/library version mismatch"),
        ("smi-no-devices.txt", "No devices were found"),
    ],
)
def test_every_gpu_judge_fails_a_node_whose_driver_nvidia_smi_measured_broken(
    query, name, state_text
):
    for judge in ALL_JUDGES:
        verdict = judge(query(name))
        assert verdict.outcome == "fail" and verdict.reason.startswith("node05: ") and verdict.fix
        assert state_text in verdict.reason and verdict.sections == ("gpu_query",)


@pytest.mark.parametrize(
    ("name", "state_text"),
    [
        ("smi-command-not-found.txt", "nvidia-smi: command not found"),
        ("query-8gpu-cut-in-gpu4.csv", "output unreadable: row 5 has 7 of 25"),
        ("smi-invalid-field.txt", "output unreadable"),
    ],
)
def test_every_gpu_judge_says_not_measured_when_nvidia_smi_is_missing_or_unreadable(
    query, name, state_text
):
    # a waiver for "2 corrected ECC errors" must not hide "nvidia-smi hung"
    for judge in ALL_JUDGES:
        verdict = judge(query(name))
        assert verdict.outcome == "not_measured" and not verdict, verdict.reason
        assert verdict.reason.startswith("node05: ") and state_text in verdict.reason
        assert verdict.fix
    hung = parse_query_gpu("index, name, pci.bus_id\n0, NVIDIA H200, 00000000:18:00.0\n1, NV")
    assert judge_ecc("node05", hung).outcome == "not_measured"


def test_count_missing_gpu(query, healthy):
    verdict = judge_count_model(
        "node03", query("query-7gpu-missing-gpu3.csv"), expect(count=8, model=H200)
    )
    assert not verdict and verdict.reason == "node03: 7 GPUs (index 0,1,2,3,4,5,6), expected 8"
    assert "lspci" in verdict.fix
    lost = judge_count_model(
        "node03", query("query-7gpu-lost-gpu3.csv"), expect(count=8, model=H200)
    )
    assert lost.reason.endswith("expected 8; 0000:5D:00.0 Unknown Error")
    assert judge_count_model("node03", healthy, expect(count=8, model=H200))


def test_model(healthy):
    verdict = judge_count_model("node01", healthy, expect(count=8, model="NVIDIA L20"))
    assert not verdict and at_fault(verdict) == tuple(range(8))
    assert "GPU 0 (00000000:18:00.0) is 'NVIDIA H200', expected 'NVIDIA L20'" in verdict.reason
    assert judge_count_model("node01", healthy, expect(count=8, model=" nvidia  h200 "))
    assert judge_count_model("node01", healthy, expect(count=8, model=None))


def test_ecc_errors_and_pending_remap(query, healthy):
    verdict = judge_ecc("node02", query("query-8gpu-ecc-gpu2.csv"))
    assert not verdict and at_fault(verdict) == (2,)
    assert verdict.reason == (
        "node02: GPU 2 (00000000:3A:00.0) 4 volatile uncorrected ECC errors, row remapping pending"
    )
    assert "nvidia-smi -r" in verdict.fix
    ecc = {(m.name, m.subject): m for m in verdict.measurements}
    uncorrected = ecc[("ecc_uncorrected_volatile", "GPU 2")]
    assert (uncorrected.value, uncorrected.unit, uncorrected.bound) == (4, "errors", 0)
    assert ecc[("ecc_uncorrected_volatile", "GPU 0")].value == 0
    assert ecc[("remapped_rows_pending", "GPU 2")].value == "Yes"
    assert len({m.subject for m in verdict.measurements}) == 8
    assert judge_ecc("node02", healthy)


def test_ecc_mode_off_and_counters_unreadable():
    text = (
        "index, pci.bus_id, ecc.mode.current, ecc.errors.uncorrected.volatile.total, "
        "retired_pages.pending, remapped_rows.pending, remapped_rows.failure\n"
        "0, 00000000:0A:00.0, Disabled, [N/A], [N/A], [N/A], [N/A]\n"
        "1, 00000000:0B:00.0, Enabled, 0, No, [N/A], [N/A]\n"
        "2, 00000000:0C:00.0, Enabled, 0, [N/A], No, Yes\n"
    )
    verdict = judge_ecc("node09", parse_query_gpu(text))
    assert not verdict and at_fault(verdict) == (0, 2)
    assert "GPU 0 (00000000:0A:00.0) ECC mode Disabled, volatile uncorrected ECC count " in (
        verdict.reason
    )
    assert "neither retired pages nor remapped rows readable" in verdict.reason
    assert "GPU 2 (00000000:0C:00.0) row remapping failure" in verdict.reason


def test_xid_not_allowed_names_meaning_and_gpu(fixture_text, healthy):
    log = parse_kernel_log(fixture_text("gpu", "kernel-log-journalctl-xids.txt"))
    verdict = judge_xid("node03", log, expect(allowed_xids=[13]), healthy)
    assert not verdict and at_fault(verdict) == (2, 7)
    assert verdict.reason == (
        "node03: Xid 63 (ECC page retirement or row remapping recording event) on GPU 2 "
        "(00000000:3A:00.0); Xid 79 (GPU has fallen off the bus) on GPU 7 (00000000:DB:00.0); "
        "Xid 94 (Contained ECC error (the application that hit it must be restarted)) on GPU 2 "
        "(00000000:3A:00.0) (allowed: 13)"
    )
    assert "docs.nvidia.com/deploy/xid-errors" in verdict.fix
    per_gpu = {(m.name, m.subject): m.value for m in verdict.measurements}
    assert per_gpu[("xid_events", "")] == 3 and per_gpu[("xids", "GPU 2")] == "63, 94"
    assert per_gpu[("xid_events", "GPU 7")] == 1 and per_gpu[("kernel_log", "")] == "journalctl"
    without_gpus = judge_xid("node03", log, expect(allowed_xids=[13, 63, 94]))
    assert without_gpus.reason == (
        "node03: Xid 79 (GPU has fallen off the bus) on GPU at 0000:db:00 (allowed: 13, 63, 94)"
    )
    assert judge_xid("node03", log, expect(allowed_xids=[13, 63, 79, 94]))


def test_xid_unreadable_log_is_not_measured(fixture_text):
    verdict = judge_xid(
        "node04", parse_kernel_log(fixture_text("gpu", "kernel-log-unreadable.txt")), expect()
    )
    assert verdict.outcome == "not_measured" and "neither journalctl -k nor dmesg" in verdict.reason
    assert verdict.sections == ("gpu_klog",)
    cut = parse_kernel_log("hpcnet-klog: dmesg\n[ 1.0] NVRM: Xid (PCI:0000:18:00): 48, DBE\n")
    assert judge_xid("node04", cut, expect()).outcome == "fail"  # what was read already fails
    assert judge_xid("node04", parse_kernel_log(""), expect()).outcome == "not_measured"
    repeated = parse_kernel_log(
        "hpcnet-klog: dmesg\n[ 1.0] NVRM: Xid (PCI:0000:18:00): 48, DBE\n"
        "[ 2.0] NVRM: Xid (PCI:0000:18:00): 48, DBE\n"
    )
    assert "Xid 48 x2 (Double Bit ECC Error" in judge_xid("node04", repeated, expect()).reason
    assert judge_xid(
        "node04", parse_kernel_log(fixture_text("gpu", "kernel-log-dmesg-clean.txt")), expect()
    )


def test_throttle(query, healthy):
    verdict = judge_throttle("node06", query("query-8gpu-throttle-gpu5.csv"))
    assert not verdict and at_fault(verdict) == (5,)
    assert verdict.reason == (
        "node06: GPU 5 (00000000:AB:00.0) slowdown active: hw_slowdown, hw_thermal_slowdown (0x48)"
    )
    slow = {m.subject: m.value for m in verdict.measurements if m.name == "slowdown"}
    assert slow["GPU 5"] == "hw_slowdown, hw_thermal_slowdown" and slow["GPU 0"] == "none"
    unread = judge_throttle("node06", parse_query_gpu("index, pci.bus_id\n0, 00000000:0A:00.0\n"))
    assert unread.outcome == "not_measured" and "clock event reasons unreadable" in unread.reason
    idle_and_power_cap = parse_query_gpu("index, clocks_event_reasons.active\n0, 0x5\n")
    assert judge_throttle("node06", idle_and_power_cap)
    assert judge_throttle("node06", healthy)


def test_persistence_and_mig(healthy):
    off = parse_query_gpu(
        "index, pci.bus_id, persistence_mode, mig.mode.current\n"
        "0, 00000000:0A:00.0, Disabled, Enabled\n"
        "1, 00000000:0B:00.0, Enabled, [N/A]\n"
    )
    persistence = judge_persistence("node07", off, expect())
    assert not persistence and at_fault(persistence) == (0,)
    assert persistence.reason == (
        "node07: GPU 0 (00000000:0A:00.0) persistence mode Disabled, expected Enabled"
    )
    assert "nvidia-smi -pm 1" in persistence.fix
    mig = judge_mig("node07", off, expect())
    assert not mig and at_fault(mig) == (0,) and "MIG mode Enabled, expected Disabled" in mig.reason
    assert "-mig 0" in mig.fix
    unsupported = judge_mig("node07", off, expect(mig=True))  # N/A: MIG unknown on GPU 1
    assert unsupported.outcome == "not_measured" and at_fault(unsupported) == (1,)
    assert "GPU 1 (00000000:0B:00.0) MIG mode unreadable ([N/A]), expected Enabled" in (
        unsupported.reason
    )
    one = parse_query_gpu("index, pci.bus_id, mig.mode.current\n1, 00000000:0B:00.0, [N/A]\n")
    assert judge_mig("node07", one, expect())  # a GPU without MIG runs without MIG
    modes = {(m.name, m.subject): (m.value, m.bound) for m in persistence.measurements}
    assert modes[("persistence_mode", "GPU 0")] == ("Disabled", "Enabled")
    assert judge_persistence("node07", healthy, expect()) and judge_mig("node07", healthy, expect())
    assert not judge_persistence("node07", healthy, expect(persistence=False))


def test_pcie_downgrade(query, healthy):
    verdict = judge_pcie("node08", query("query-8gpu-pcie-gpu6.csv"))
    assert not verdict and at_fault(verdict) == (6,)
    assert verdict.reason == "node08: GPU 6 (00000000:BA:00.0) PCIe link gen4 of gen5, x8 of x16"
    idle = parse_query_gpu(
        "index, pci.bus_id, pstate, pcie.link.gen.current, pcie.link.gen.max, "
        "pcie.link.width.current, pcie.link.width.max\n0, 00000000:0A:00.0, P8, 1, 4, 16, 16\n"
    )
    # An idle GPU (P8) lowers its link gen: not a fault, not a pass either (not measured).
    idle_verdict = judge_pcie("node08", idle)
    assert idle_verdict.outcome == "not_measured" and idle_verdict.reason == (
        "node08: GPU 0 (00000000:0A:00.0) at gen1 of gen4 in pstate P8 (a GPU lowers its PCIe "
        "gen when idle)"
    )
    assert "while the GPUs are busy" in idle_verdict.fix
    gen = next(m for m in idle_verdict.measurements if m.name == "pcie_gen")
    assert (gen.subject, gen.value, gen.bound, gen.comparison) == ("GPU 0", 1, 4, ">=")
    narrow = parse_query_gpu(
        "index, pci.bus_id, pstate, pcie.link.gen.current, pcie.link.gen.max, "
        "pcie.link.width.current, pcie.link.width.max\n0, 00000000:0A:00.0, P8, 1, 4, 8, 16\n"
    )
    assert not judge_pcie("node08", narrow)  # a narrow link is a fault in any pstate
    assert "x8 of x16" in judge_pcie("node08", narrow).reason
    busy = parse_query_gpu(
        "index, pci.bus_id, pstate, pcie.link.gen.current, pcie.link.gen.max, "
        "pcie.link.width.current, pcie.link.width.max\n0, 00000000:0A:00.0, P0, 1, 4, 16, 16\n"
    )
    assert judge_pcie("node08", busy).outcome == "fail"
    unread = judge_pcie("node08", parse_query_gpu("index\n0\n"))
    assert unread.outcome == "not_measured" and "unreadable" in unread.reason
    assert judge_pcie("node08", healthy)


def test_memlock():
    verdict = judge_memlock("node01", parse_memlock("8192\n"), expect(nccl_user="nccl"))
    assert not verdict and verdict.reason == (
        "node01: memlock (ulimit -l) for nccl is 8192 KiB, expected unlimited"
    )
    assert "memlock unlimited" in verdict.fix
    (measured,) = verdict.measurements
    assert (measured.value, measured.bound, measured.comparison) == (8192, "unlimited", ">=")
    assert "not a ulimit -l value" in judge_memlock("node01", parse_memlock(""), expect()).reason
    assert judge_memlock("node01", parse_memlock("unlimited\n"), expect())
    floor = expect(memlock_min_kib=8192)
    assert judge_memlock("node01", parse_memlock("8192\n"), floor)
    low = judge_memlock("node01", parse_memlock("64\n"), floor)
    assert not low and low.reason.endswith("is 64 KiB, expected at least 8192 KiB")


@pytest.mark.parametrize(
    "text", ["", "sh: 1: ulimit: command not found\n", "su: user nccl does not exist\n"]
)
@pytest.mark.parametrize("floor", [None, 1, 8192])  # 0 is refused at load
def test_an_unreadable_memlock_is_not_measured_whatever_the_floor(text, floor):
    # issue 23, finding 6: `gpu.memlock_min_kib: 0` passed an unreadable `ulimit -l`
    verdict = judge_memlock("node01", parse_memlock(text), expect(memlock_min_kib=floor))
    assert verdict.outcome == "not_measured" and not verdict
    assert verdict.reason.startswith("node01: memlock (ulimit -l) for the SSH user unreadable: ")
    assert verdict.measurements[0].value is None


def test_modules(fixture_text):
    lsmod = parse_modules(fixture_text("gpu", "lsmod-nvidia-no-peermem.txt"))
    both = expect(modules=["nvidia", "nvidia_peermem"])
    verdict = judge_modules("node02", lsmod, both)
    assert not verdict and verdict.reason == "node02: kernel module(s) not loaded: nvidia_peermem"
    assert "modprobe nvidia_peermem" in verdict.fix
    assert judge_modules("node02", parse_modules(""), expect()).outcome == "not_measured"
    assert {m.name: m.value for m in verdict.measurements} == {
        "nvidia": "loaded",
        "nvidia_peermem": "not loaded",
    }
    proc = parse_modules(fixture_text("gpu", "proc-modules-nvidia-peermem.txt"))
    assert judge_modules("node02", proc, both)


def test_versions_differ_across_nodes():
    found = {
        "node01": {"nvidia_driver": "580.159.04", "nccl": "2.27.7", "fio": "3.28"},
        "node02": {"nvidia_driver": "580.159.04", "nccl": "2.27.7", "fio": "3.36"},
        "node03": {"nvidia_driver": "570.172.08", "nccl": "2.27.7", "fio": "3.28"},
        "node04": {"nvidia_driver": "580.159.04", "fio": "3.28"},
    }
    verdict = judge_versions(found, expect())
    assert not verdict and verdict.reason == (
        "nvidia_driver 570.172.08 on node03 (majority 580.159.04 on 3 of 4 nodes); "
        "nccl missing on node04 (majority 2.27.7 on 3 of 4 nodes)"
    )  # fio is not compared: only the GPU and RDMA stack must agree
    assert verdict.extra["suspects"] == ["node03", "node04"]
    shown = {(m.name, m.subject): (m.value, m.bound, m.outcome) for m in verdict.measurements}
    assert shown == {  # the agreed value of each (one type: subject ""), each odd node's
        ("nvidia_driver", ""): ("580.159.04", None, "pass"),
        ("nvidia_driver", "node03"): ("570.172.08", "580.159.04", "fail"),
        ("nccl", ""): ("2.27.7", None, "pass"),
        ("nccl", "node04"): ("missing", "2.27.7", "fail"),
    }
    unread = judge_versions({"n1": {"nvidia_driver": "580.159.04"}, "n2": None}, expect())
    assert unread.outcome == "not_measured" and unread.reason == "versions unreadable on n2"
    assert judge_versions({n: {"nvidia_driver": "580.159.04"} for n in ("n1", "n2")}, expect())


def test_versions_pin_and_known_bad():
    found = {n: {"nvidia_driver": "580.159.04", "nccl": "2.28.7-1+cuda12.9"} for n in ("n1", "n2")}
    bad = {
        "tool": "nccl",
        "version": "2.28.7",
        "reason": "segfaults in ncclNetInit()",
        "source": "S15",
    }
    rules = expect(versions={"pin": {"nvidia_driver": "580.126.09"}, "known_bad": [bad]})
    verdict = judge_versions(found, rules)
    assert not verdict and verdict.reason == (
        "nvidia_driver 580.159.04 on n1, n2 (pinned 580.126.09); "
        "nccl 2.28.7-1+cuda12.9 on n1, n2 is known bad: segfaults in ncclNetInit() (S15)"
    )
    near = {n: {"nccl": "2.28.70"} for n in ("n1", "n2")}
    assert judge_versions(near, rules)  # 2.28.70 is not 2.28.7
    pinned = expect(versions={"pin": {"nvidia_driver": "580.159.04", "nccl": "2.28.7"}})
    assert judge_versions(found, pinned)


def test_gpu_nic_numa(fixture_text, healthy):
    topo = parse_topo(fixture_text("gpu", "topo-8gpu-2nic-erdma.txt"))

    def sysfs(numa: dict[str, int]):
        keys = ("current_link_speed 16.0 GT/s PCIe", "max_link_speed 16.0 GT/s PCIe")
        lines = [f"{d} numa_node {n}" for d, n in numa.items()]
        lines += [f"{d} {k}" for d in numa for k in keys]
        lines += [f"{d} {k} 16" for d in numa for k in ("current_link_width", "max_link_width")]
        return parse_rdma_sysfs("\n".join(lines) + f"\nhpcnet-rdma-devices: {len(numa)}\n")

    swapped = judge_gpu_nic_numa("node05", topo, sysfs({"erdma_0": 1, "erdma_1": 0}), healthy)
    assert not swapped and at_fault(swapped) == tuple(range(8))
    assert swapped.reason.startswith(
        "node05: GPU 0 (00000000:18:00.0) on NUMA 0, nearest RDMA device erdma_0 on NUMA 1; "
    )
    numa = {m.subject: (m.value, m.bound) for m in swapped.measurements}
    assert numa["GPU 0"] == ("0", ["1"])
    unknown = judge_gpu_nic_numa("node05", topo, sysfs({"erdma_0": 0}))
    assert unknown.outcome == "not_measured"
    assert "GPU 4 (bus ?) on NUMA 1" in unknown.reason and "erdma_1 on NUMA ?" in unknown.reason
    cut = judge_gpu_nic_numa("node05", parse_topo("GPU0\tX\n"), sysfs({}))
    assert cut.outcome == "not_measured" and "topo -m unreadable" in cut.reason
    no_nic_topo = parse_topo(fixture_text("samples/nvidia_smi", "smi-topo.txt"))  # no NIC
    no_nic = judge_gpu_nic_numa("node05", no_nic_topo, sysfs({}), healthy)
    assert no_nic.outcome == "fail" and "nearest RDMA device none" in no_nic.reason
    short = judge_gpu_nic_numa("node05", topo, parse_rdma_sysfs("erdma_0 numa_node 0\n"))
    assert short.outcome == "not_measured"
    assert "RDMA sysfs: no hpcnet-rdma-devices line" in short.reason
    assert judge_gpu_nic_numa("node05", topo, sysfs({"erdma_0": 0, "erdma_1": 1}))


def one_nic(topo_text: str) -> str:
    """The 2-NIC fixture with NIC1 (erdma_1) taken out: column, row and legend (derived)."""
    lines = []
    for line in topo_text.splitlines():
        cells = line.split("\t")
        if cells[0] == "NIC1" or "NIC1: " in line:
            continue
        if len(cells) > 10 and (cells[0].startswith(("GPU", "NIC")) or "NIC1" in line):
            del cells[10]
        lines.append("\t".join(cells))
    return "\n".join(lines) + "\n"


def test_a_numa_node_with_no_rdma_device_is_the_layout_not_a_fault(fixture_text, healthy):
    topo = parse_topo(one_nic(fixture_text("gpu", "topo-8gpu-2nic-erdma.txt")))
    assert {nic for row in topo.gpus for nic in topo.nearest_nics(row.device)} == {"erdma_0"}
    lines = ["erdma_0 numa_node 0", "erdma_0 current_link_speed 16.0 GT/s PCIe"]
    lines += ["erdma_0 max_link_speed 16.0 GT/s PCIe", "erdma_0 current_link_width 16"]
    sysfs = parse_rdma_sysfs(
        "\n".join([*lines, "erdma_0 max_link_width 16", "hpcnet-rdma-devices: 1"])
    )
    verdict = judge_gpu_nic_numa("node05", topo, sysfs, healthy)
    assert verdict, verdict.reason
    assert "no RDMA device on NUMA 1 (GPU 4, GPU 5, GPU 6, GPU 7)" in verdict.reason
    far = parse_rdma_sysfs(
        "\n".join([*lines, "erdma_0 max_link_width 16", "hpcnet-rdma-devices: 1"]).replace(
            "numa_node 0", "numa_node 1"
        )
    )
    wrong = judge_gpu_nic_numa("node05", topo, far, healthy)
    assert (
        not wrong
        and "GPU 0 (00000000:18:00.0) on NUMA 0, nearest RDMA device erdma_0 on NUMA 1"
        in wrong.reason
    )


def test_nccl_ib_hca_covers_the_nearest_devices(fixture_text):
    topo = parse_topo(fixture_text("gpu", "topo-8gpu-2nic-erdma.txt"))
    one = judge_nccl_ib_hca("node06", topo, "erdma_0")
    assert not one and one.reason == (
        "node06: NCCL_IB_HCA=erdma_0 leaves out erdma_1 (nearest to some GPU)"
    )
    assert not judge_nccl_ib_hca("node06", topo, "^erdma_1")
    assert not judge_nccl_ib_hca("node06", topo, "=erdma_0,erdma_10")
    for covered in (None, "", "erdma", "=erdma_0,erdma_1", "erdma_0:1,erdma_1:1", "^mlx5"):
        assert judge_nccl_ib_hca("node06", topo, covered), covered
    shown = {m.name: m.value for m in one.measurements}
    assert shown["NCCL_IB_HCA"] == "erdma_0" and shown["nic_map"].startswith("GPU0=erdma_0,")
    cut = judge_nccl_ib_hca("node06", parse_topo("GPU0\tX\n"), None)
    assert cut.outcome == "not_measured"
    no_nic = judge_nccl_ib_hca(
        "node06", parse_topo(fixture_text("samples/nvidia_smi", "smi-topo.txt")), None
    )
    assert not no_nic and "no RDMA device near any GPU" in no_nic.reason


def test_rdma_pcie_links():
    def sysfs(*devices: tuple[str, str, str, str, str]) -> RdmaSysfs:
        keys = ("current_link_speed", "max_link_speed", "current_link_width", "max_link_width")
        lines = [f"{d[0]} numa_node 0" for d in devices]
        lines += [f"{d[0]} {k} {v}" for d in devices for k, v in zip(keys, d[1:], strict=True)]
        return parse_rdma_sysfs("\n".join(lines) + f"\nhpcnet-rdma-devices: {len(devices)}\n")

    two = expect(versions={})
    two.rdma.min_devices = 2
    full = ("erdma_0", "16.0 GT/s PCIe", "16.0 GT/s PCIe", "16", "16")
    slow = ("erdma_1", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "8", "16")
    verdict = judge_rdma_pcie("node07", sysfs(full, slow), two)
    assert not verdict and verdict.reason == (
        "node07: erdma_1 PCIe link 8 GT/s of 16 GT/s, x8 of x16"
    )
    assert "have the host repaired" in verdict.fix
    speed = {m.subject: m.value for m in verdict.measurements if m.name == "pcie_speed"}
    assert speed == {"erdma_0": 16.0, "erdma_1": 8.0}
    unknown = judge_rdma_pcie("node07", sysfs(full, ("erdma_1", "Unknown", "?", "?", "?")), two)
    assert unknown.outcome == "not_measured"
    assert "erdma_1 PCIe link not reported (current_link_speed=Unknown" in unknown.reason
    one = judge_rdma_pcie("node07", sysfs(full), two)
    assert one.reason == "node07: 1 devices in /sys/class/infiniband, expected at least 2"
    cut = judge_rdma_pcie("node07", parse_rdma_sysfs("erdma_0 numa_node 0\n"), two)
    assert cut.outcome == "not_measured" and "cut short" in cut.reason
    assert judge_rdma_pcie("node07", sysfs(full, ("erdma_1", *full[1:])), two)


def test_versions_split_evenly_has_no_majority():
    found = {"n1": {"nvidia_driver": "580.159.04"}, "n2": {"nvidia_driver": "570.172.08"}}
    verdict = judge_versions(found, expect())
    assert not verdict and verdict.reason == (
        "nvidia_driver has no majority: 570.172.08 on n2; 580.159.04 on n1"
    )
    assert verdict.extra["suspects"] == []  # neither group can be told from the other


def test_versions_compared_within_each_instance_type():
    found = {n: {"nvidia_driver": "580.159.04"} for n in ("a1", "a2", "a3")}
    found |= {n: {"nvidia_driver": "570.172.08"} for n in ("b1", "b2")}
    types = {n: "ecs.ebmgn8v" if n[0] == "a" else "ecs.gn8is" for n in found}
    assert judge_versions(found, expect(), types)
    found["a3"] = {"nvidia_driver": "570.172.08"}
    verdict = judge_versions(found, expect(), types)
    assert not verdict and verdict.reason == (
        "ecs.ebmgn8v: nvidia_driver 570.172.08 on a3 (majority 580.159.04 on 2 of 3 nodes)"
    )
    assert verdict.extra["suspects"] == ["a3"]
