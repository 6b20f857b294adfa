"""Firmware on a node (`probes/firmware.py`) and its agreement across nodes
(`requirements/firmware.py`), on real recorded outputs (tests/fixtures/firmware)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_hpcnet.inventory.expectations import Expectations
from pytest_hpcnet.probes.firmware import (
    GPU_FIRMWARE_COMMAND,
    BiosInfo,
    GpuFirmwareList,
    NicInfo,
    node_firmware,
    parse_bios,
    parse_nic_info,
    parse_smi_firmware,
)
from pytest_hpcnet.requirements.firmware import judge_firmware

H100 = "nvidia-smi-q-h100-sxm-x8-drv565-vbios-96.00.74.00.01-gsp-565-thamada.txt"
RTX = "nvidia-smi-q-rtx6000ada-x8-drv550-ecc-disabled-gsp-na-thamada.txt"
VIRTIO = "ethtool-i-virtio_net-1.0.0-empty-firmware-no-statistics-vm.txt"
ICE = "ethtool-i-ice-e810-cqda2-inbox-6.5.0-fw-2.50-trailing-space.txt"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "firmware"


@pytest.fixture
def read(fixture_text):
    return lambda name: fixture_text("firmware", name)


def test_smi_q_firmware_per_gpu(read):
    h100 = parse_smi_firmware(read(H100))
    assert h100.error is None and len(h100.gpus) == 8
    first = h100.gpus[0]
    assert (first.bus_id, first.vbios, first.inforom_image) == (
        "00000000:18:00.0",
        "96.00.74.00.01",
        "G520.0200.00.05",
    )
    assert (first.gsp_firmware, first.ecc_mode) == ("565.57.01", "Enabled")
    rtx = parse_smi_firmware(read(RTX))
    assert {(g.gsp_firmware, g.ecc_mode) for g in rtx.gpus} == {("N/A", "Disabled")}
    l40s = parse_smi_firmware(read("nvidia-smi-q-l40s-x1-drv550-gsp-na-thamada.txt"))
    assert [g.gsp_firmware for g in l40s.gpus] == ["N/A"]
    assert (
        len(parse_smi_firmware(read("nvidia-smi-q-a40-x10-drv550-vbios-94.02.5C-thamada.txt")).gpus)
        == 10
    )


@pytest.mark.parametrize("name", [H100, RTX])
def test_command_sends_back_only_the_firmware_lines(fixture_text, name):
    """The command's awk keeps what the parser reads: the same result from 1 line in 30."""
    path = str(FIXTURES / name)
    command = GPU_FIRMWARE_COMMAND.replace("nvidia-smi -q 2>&1", 'cat "$F"')
    sent = subprocess.run(["sh", "-c", command], env={"F": path}, capture_output=True, text=True)
    full = fixture_text("firmware", name)
    assert parse_smi_firmware(sent.stdout) == parse_smi_firmware(full)
    assert len(sent.stdout.splitlines()) * 25 < len(full.splitlines())


def test_smi_q_cut_or_failed_is_an_error(read):
    cut = read(H100)[: read(H100).index("GPU 00000000:2A")]
    assert parse_smi_firmware(cut).error == "`nvidia-smi -q` lists 1 of 8 GPUs"
    failed = parse_smi_firmware("NVIDIA-SMI has failed because it couldn't communicate\n")
    assert failed.error and "NVIDIA-SMI has failed" in failed.error
    assert parse_smi_firmware("not expected\n") == GpuFirmwareList(expected=False)


def test_ethtool_i_blocks(read):
    text = f"== hpcnet-nic eth0\n{read(VIRTIO)}== hpcnet-nic eth1\n{read(ICE)}"
    eth0, eth1 = parse_nic_info(text)
    assert eth0 == NicInfo("eth0", "virtio_net", "1.0.0", "", "0000:00:04.0")
    assert (eth1.driver, eth1.firmware) == ("ice", "2.50 0x800077a6 1.2960.0")
    tg3 = parse_nic_info(
        "== hpcnet-nic eth0\n" + read("ethtool-i-tg3-broadcom-fw-sb-kernel-5.10-lolyu-aoi.txt")
    )
    assert tg3[0].firmware == "sb"
    missing = parse_nic_info("== hpcnet-nic eth9\nCannot get driver information: No such device\n")
    assert missing[0].driver is None


def test_bios_from_sysfs_or_dmidecode(read):
    assert parse_bios("bios_vendor=Alibaba Cloud\nbios_version=0.0.0\n") == BiosInfo(
        "Alibaba Cloud", "0.0.0"
    )
    hpe = parse_bios(
        read("dmidecode-3.1-full-hpe-bl460c-gen10-graphics-exp-smbios3.2-netbox-agent.txt")
    )
    assert (hpe.vendor, hpe.version, hpe.date) == ("HPE", "I41", "04/18/2019")
    dell = parse_bios(read("dmidecode-2.12-full-dell-poweredge-m630-netbox-agent.txt"))
    assert (dell.vendor, dell.version) == ("Dell Inc.", "1.2.5")
    assert parse_bios("sh: 1: dmidecode: not found\n").version is None


def node(read, vbios3: str = "96.00.74.00.01", nic_fw: str = ""):
    smi = read(H100).replace("96.00.74.00.01", vbios3, 4)  # GPU 3 is the 4th block
    smi = smi.replace(vbios3, "96.00.74.00.01", 3) if vbios3 != "96.00.74.00.01" else smi
    nics = (NicInfo("eth0", "virtio_net", "1.0.0", nic_fw),)
    return node_firmware(parse_smi_firmware(smi), nics, BiosInfo("Alibaba Cloud", "0.0.0"))


def test_odd_gpu_named_with_the_majority(read):
    nodes = {f"n{i}": node(read) for i in range(1, 4)}
    assert judge_firmware(nodes, Expectations())
    nodes["n2"] = node(read, vbios3="96.00.74.00.02")
    verdict = judge_firmware(nodes, Expectations())
    assert not verdict and verdict.reason == (
        "vbios 96.00.74.00.02 on n2 GPU 3 (00000000:5D:00.0) "
        "(majority 96.00.74.00.01 on 23 of 24 GPUs)"
    )
    assert verdict.extra["suspects"] == ["n2"]


def test_even_split_has_no_majority_and_pins_decide(read):
    nodes = {"n1": node(read), "n2": node(read, nic_fw="1.2.3")}
    split = judge_firmware(nodes, Expectations())
    assert (
        not split
        and split.reason == "nic_firmware has no majority: (empty) on n1 eth0; 1.2.3 on n2 eth0"
    )
    assert split.extra["suspects"] == []
    pinned = Expectations.model_validate({"versions": {"pin": {"nic_firmware": "1.2.3"}}})
    verdict = judge_firmware(nodes, pinned)
    assert verdict.reason == "nic_firmware (empty) on n1 eth0 (pinned 1.2.3)"
    assert verdict.extra["suspects"] == ["n1"]


def test_compared_within_instance_type_and_unread(read):
    nodes = {"a1": node(read), "a2": node(read), "b1": node(read, nic_fw="9.9")}
    types = {"a1": "ecs.x", "a2": "ecs.x", "b1": "ecs.y"}
    assert judge_firmware(nodes, Expectations(), types)
    unread = judge_firmware({"a1": node(read), "a2": None}, Expectations())
    assert unread.outcome == "not_measured" and unread.reason == "firmware unreadable on a2"
    cut = node_firmware(None, (), BiosInfo(None, None))
    assert cut.unread == (
        "section gpu_firmware not given whole",
        "BIOS version unreadable (sysfs dmi, dmidecode)",
    )
    cpu_only = node_firmware(GpuFirmwareList(expected=False), (), BiosInfo("x", "1"))
    assert cpu_only.unread == () and {i.item for i in cpu_only.items} == {
        "bios_vendor",
        "bios_version",
    }


def test_pin_names_few_subjects_and_measures_each_odd_node(read):
    nodes = {f"n{i}": node(read) for i in range(1, 4)}
    pinned = Expectations.model_validate({"versions": {"pin": {"vbios": "96.00.74.00.05"}}})
    verdict = judge_firmware(nodes, pinned)
    assert verdict.reason.startswith("vbios 96.00.74.00.01 on n1 GPU 0 (00000000:18:00.0), ")
    assert verdict.reason.endswith(" and 18 more (pinned 96.00.74.00.05)")
    odd = [m for m in verdict.measurements if m.basis.startswith("off")]
    assert [(m.subject.split()[0], m.subject.count("GPU"), m.bound) for m in odd] == [
        (n, 8, "96.00.74.00.05") for n in ("n1", "n2", "n3")
    ]
    agreed = {m.name: m.value for m in verdict.measurements if m.basis.startswith("agreed")}
    assert agreed == {
        "vbios": "96.00.74.00.01",
        "inforom_image": "G520.0200.00.05",
        "gsp_firmware": "565.57.01",
        "ecc_mode": "Enabled",
        "nic_driver": "virtio_net 1.0.0",
        "nic_firmware": "",
        "bios_vendor": "Alibaba Cloud",
        "bios_version": "0.0.0",
    }


def test_an_odd_ecc_mode_is_a_setting_and_an_odd_vbios_firmware(read):
    nodes = {f"n{i}": node(read) for i in range(1, 4)}
    pinned = Expectations.model_validate(
        {"versions": {"pin": {"vbios": "96.00.74.00.05", "ecc_mode": "Disabled"}}}
    )
    verdict = judge_firmware(nodes, pinned)
    codes = {m.name: m.code for m in verdict.measurements if m.outcome == "fail"}
    assert codes == {"vbios": "HPCNET-FIRMWARE", "ecc_mode": "HPCNET-ECC-MODE"}
