"""GPU parsers on the derived fixtures (tests/fixtures/gpu/PROVENANCE.md) and the commands."""

from __future__ import annotations

import os
import subprocess

import pytest

from pytest_hpcnet.probes.gpu import (
    QUERY_FIELDS,
    bus_key,
    parse_query_gpu,
    query_gpu_command,
    value_or_none,
)
from pytest_hpcnet.probes.gpu_host import (
    memlock_command,
    parse_driver_version,
    parse_memlock,
    parse_modules,
)
from pytest_hpcnet.probes.gpu_rdma import (
    RDMA_SYSFS_COMMAND,
    parse_cuda_version,
    parse_rdma_sysfs,
)
from pytest_hpcnet.probes.gpu_topo import parse_topo
from pytest_hpcnet.probes.gpu_xid import KERNEL_LOG_COMMAND, parse_kernel_log, xid_meaning


@pytest.fixture
def gpu_text(fixture_text):
    return lambda name: fixture_text("gpu", name)


def test_eight_gpus_in_bus_order(gpu_text):
    query = parse_query_gpu(gpu_text("query-8gpu-h200.csv"))
    assert query.error is None and [g.index for g in query.gpus] == list(range(8))
    assert query.gpu(3).bus_id == "00000000:5D:00.0" and query.gpu(3).label.startswith("GPU 3 (")
    assert {g.name for g in query.gpus} == {"NVIDIA H200"}


def test_missing_and_lost_gpu(gpu_text):
    missing = parse_query_gpu(gpu_text("query-7gpu-missing-gpu3.csv"))
    assert missing.error is None and len(missing.gpus) == 7 and missing.lost == ()
    lost = parse_query_gpu(gpu_text("query-7gpu-lost-gpu3.csv"))
    assert len(lost.gpus) == 7 and lost.lost == (("0000:5D:00.0", "Unknown Error"),)


def test_cut_short_row_is_an_error_not_fewer_gpus(gpu_text):
    query = parse_query_gpu(gpu_text("query-8gpu-cut-in-gpu4.csv"))
    assert query.state == "error" and "row 5 has 7 of 25 fields" in query.error
    assert len(query.gpus) == 4


@pytest.mark.parametrize(
    ("name", "state"),
    [
        ("smi-command-not-found.txt", "no-tool"),
        ("smi-no-driver.txt", "no-driver"),
        ("smi-version-mismatch.txt", "version-mismatch"),
        ("smi-no-devices.txt", "no-devices"),
        ("smi-invalid-field.txt", "error"),
    ],
)
def test_error_states(gpu_text, name, state):
    text = gpu_text(name)
    query = parse_query_gpu(text)
    assert query.state == state and query.gpus == () and query.error
    assert parse_topo(text).error


def test_ansi_and_empty_output():
    assert parse_query_gpu("").error == "no output from nvidia-smi"
    assert parse_query_gpu("index, name\n").error == "a header but no GPU row"
    coloured = "\x1b[1mindex, name, pci.bus_id\x1b[0m\n0, NVIDIA L20, 00000000:0A:00.0\n"
    assert parse_query_gpu(coloured).gpus[0].name == "NVIDIA L20"


def test_values_and_units():
    assert [value_or_none(v) for v in ("[N/A]", "[Not Supported]", "N/A", " 5 ")] == [
        None,
        None,
        None,
        "5",
    ]
    text = "index, memory.total [MiB], clocks_throttle_reasons.active\n0, 46068 MiB, 0x48\n"
    gpu = parse_query_gpu(text).gpus[0]
    assert gpu.memory_total_mib == 46068 and gpu.clock_events == 0x48  # the old alias
    assert gpu.clock_event_names == ("hw_slowdown", "hw_thermal_slowdown")
    assert bus_key("00000000:5D:00.0") == bus_key("PCI:0000:5d:00") == (0, 0x5D, 0)


def test_query_command_falls_back_to_old_field_names(tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in *clocks_event_reasons*) '
        "echo 'Field \"clocks_event_reasons.active\" is not a valid field to query.'; exit 2;; "
        'esac\necho "$1"\n'
    )
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run(
        ["sh", "-c", query_gpu_command()], capture_output=True, text=True, env=env, timeout=10
    )
    assert out.returncode == 0 and "clocks_throttle_reasons.active" in out.stdout
    assert len(out.stdout.split(",")) == len(QUERY_FIELDS)


def test_query_command_keeps_other_errors_and_status(tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'No devices were found'; exit 6\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run(
        ["sh", "-c", query_gpu_command() + "; echo after=$?"],
        capture_output=True,
        text=True,
        env=env,
        timeout=10,
    )
    assert out.stdout == "No devices were found\nafter=6\n"  # the subshell keeps the script


def test_topology_of_eight_gpus_and_two_erdma(gpu_text):
    topo = parse_topo(gpu_text("topo-8gpu-2nic-erdma.txt"))
    assert topo.error is None and len(topo.gpus) == 8
    assert topo.devices[-2:] == ("NIC0", "NIC1")
    assert topo.nearest_nics("GPU1") == ("erdma_0",) and topo.nearest_nics("GPU6") == ("erdma_1",)
    gpu5 = topo.row("GPU5")
    assert (gpu5.cpu_affinity, gpu5.numa_affinity, gpu5.gpu_numa_id) == (
        "48-95,144-191",
        "1",
        "N/A",
    )
    assert topo.link("NIC0", "GPU4") == "SYS"


def test_topology_cut_short(gpu_text):
    text = gpu_text("topo-8gpu-2nic-erdma.txt")
    cut = text[: text.index("\nGPU3\t") + 13]
    assert "GPU3: 2 of 10 matrix cells" in parse_topo(cut).error


def test_kernel_log_xids(gpu_text):
    log = parse_kernel_log(gpu_text("kernel-log-journalctl-xids.txt"))
    assert log.source == "journalctl" and log.error is None
    assert [(e.xid, e.bus_id) for e in log.events] == [
        (94, "0000:3a:00"),
        (63, "0000:3a:00"),
        (79, "0000:db:00"),
        (13, "0000:18:00"),
    ]
    assert log.events[2].meaning == "GPU has fallen off the bus"
    assert "catalog" in xid_meaning(9999)


def test_kernel_log_states(gpu_text):
    assert parse_kernel_log(gpu_text("kernel-log-dmesg-clean.txt")) == parse_kernel_log(
        "hpcnet-klog: dmesg\n"
    )
    clean = parse_kernel_log(gpu_text("kernel-log-dmesg-clean.txt"))
    assert (clean.source, clean.events, clean.error) == ("dmesg", (), None)
    assert "neither journalctl" in parse_kernel_log(gpu_text("kernel-log-unreadable.txt")).error
    odd = parse_kernel_log(gpu_text("kernel-log-dmesg-odd-lines.txt"))
    assert [e.xid for e in odd.events] == [3] and "1 XID line(s) not understood" in odd.error
    assert "cut short" in parse_kernel_log("").error


def test_kernel_log_command_runs_here():
    out = subprocess.run(["sh", "-c", KERNEL_LOG_COMMAND], capture_output=True, text=True)
    log = parse_kernel_log(out.stdout)
    assert out.returncode == 0 and log.source in ("journalctl", "dmesg", "none")


def test_driver_version_flavours(gpu_text):
    proprietary = parse_driver_version(gpu_text("nv-version-proprietary-535.txt"))
    assert (proprietary.version, proprietary.open_module) == ("535.104.05", False)
    assert "driver loaded (/proc" in parse_driver_version(gpu_text("nv-version-missing.txt")).error
    assert parse_driver_version("").error == "empty output"


def test_modules_from_proc_and_lsmod(gpu_text):
    proc = parse_modules(gpu_text("proc-modules-nvidia-peermem.txt"))
    assert proc.loaded("nvidia") and proc.loaded("nvidia-peermem") and proc.error is None
    lsmod = parse_modules(gpu_text("lsmod-nvidia-no-peermem.txt"))
    assert lsmod.loaded("nvidia") and not lsmod.loaded("nvidia_peermem")
    assert not lsmod.loaded("Module") and parse_modules("cat: /proc/modules: denied").error


def test_memlock():
    assert parse_memlock("unlimited\n").unlimited
    assert parse_memlock("8192\n") == parse_memlock("8192")
    assert parse_memlock("8192").kib == 8192 and not parse_memlock("8192").unlimited
    assert "not a ulimit" in parse_memlock("su: user nccl does not exist\n").error
    assert memlock_command("nccl user") == "su -s /bin/sh 'nccl user' -c 'ulimit -l' 2>&1"
    out = subprocess.run(["sh", "-c", memlock_command()], capture_output=True, text=True)
    here = parse_memlock(out.stdout)
    assert here.error is None and (here.unlimited or here.kib is not None)


def test_rdma_sysfs_command_runs_here():
    out = subprocess.run(["sh", "-c", RDMA_SYSFS_COMMAND], capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr == ""
    found = parse_rdma_sysfs(out.stdout)
    assert found.error is None and all(d.numa_node is not None for d in found.devices)


def test_rdma_sysfs_parser():
    """Values as Linux prints them (pci-sysfs.c: `16.0 GT/s PCIe`; older kernels `16 GT/s`)."""
    text = (
        "erdma_0 numa_node 0\nerdma_0 current_link_speed 8.0 GT/s PCIe\n"
        "erdma_0 max_link_speed 16 GT/s\nerdma_0 current_link_width 16\n"
        "erdma_0 max_link_width 16\nerdma_1 numa_node -1\n"
        "erdma_1 current_link_speed Unknown\nerdma_1 max_link_speed ?\n"
        "erdma_1 current_link_width 0\nerdma_1 max_link_width ?\nhpcnet-rdma-devices: 2\n"
    )
    found = parse_rdma_sysfs(text)
    first, second = found.devices
    assert found.error is None
    assert (first.speed_gts, first.speed_max_gts, first.width, first.width_max) == (8, 16, 16, 16)
    assert second.numa_node == -1 and second.speed_gts is None and second.width_max is None
    assert "cut short" in parse_rdma_sysfs(text.rsplit("hpcnet", 1)[0]).error
    assert (
        "2 devices counted, 1 read whole" in parse_rdma_sysfs(text[:150] + "\n" + text[-24:]).error
    )


def test_cuda_version_on_the_real_outputs(fixture_text):
    for name in ("smi-q.txt", "smi-q-health.txt", "smi.txt"):
        assert parse_cuda_version(fixture_text("samples/nvidia_smi", name)) == "13.0", name
    assert parse_cuda_version("nvidia-smi: command not found") is None


def test_a_node_s_query_output_is_parsed_once_for_all_its_gpu_checks(gpu_text):
    text = gpu_text("query-8gpu-h200.csv")
    assert parse_query_gpu(text) is parse_query_gpu(text)  # immutable, so shared safely
