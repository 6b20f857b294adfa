"""eRDMA identity, GID table and driver state parsers (probes/erdma.py)."""

from __future__ import annotations

import pytest

from pytest_hpcnet.probes.erdma import (
    erdma_driver_command,
    erdma_identity_command,
    expected_active_mtu,
    parse_erdma_driver,
    parse_erdma_identity,
    parse_gid_tables,
    rate_is_nominal,
)

IDENTITY = (
    "dev=rocep26s0 driver=erdma vendor=0x1ded device=0x107f numa=0 netdev=eth1\n"
    "dev=erdma_1 driver= vendor=0x1ded device=0x107f numa=1 netdev=eth2\n"
    "dev=mlx5_0 driver=mlx5_core vendor=0x15b3 device=0x101b numa=-1 netdev=ens1f0,ens1f1\n"
)


def test_identity_by_driver_or_pci_id_not_by_name():
    ids = parse_erdma_identity(IDENTITY)
    assert [d.name for d in ids.eris()] == ["rocep26s0", "erdma_1"]
    assert ids.devices[1].pci_id == "1ded:107f" and ids.devices[1].driver is None
    assert [d.numa_node for d in ids.devices] == [0, 1, -1]
    assert ids.devices[2].netdevs == ("ens1f0", "ens1f1") and not ids.devices[2].is_erdma
    assert [d.name for d in ids.eris("erdma*")] == ["erdma_1"]
    assert ids.reason(expected=2) is None
    assert ids.reason(expected=2, name_glob="erdma*") == "1 eRDMA devices (erdma_1), 2 expected"


def test_identity_without_erdma_names_what_is_there():
    ids = parse_erdma_identity(IDENTITY.splitlines()[2])
    assert ids.reason() == (
        "no eRDMA device (driver erdma or PCI 1ded:107f) among mlx5_0 (driver mlx5_core)"
    )
    empty = parse_erdma_identity("hpcnet: no /sys/class/infiniband devices\n")
    assert empty.no_devices and "no RDMA device in sysfs" in empty.reason()
    cut = parse_erdma_identity("")
    assert cut.reason() == "no device line in output (command cut short?)"


def test_identity_command_reads_the_given_sysfs_root(tmp_path):
    import subprocess

    dev = tmp_path / "class/infiniband/erdma_0/device"
    (dev / "net/eth0").mkdir(parents=True)
    (tmp_path / "bus/pci/drivers/erdma").mkdir(parents=True)
    (dev / "driver").symlink_to(tmp_path / "bus/pci/drivers/erdma")
    (dev / "vendor").write_text("0x1ded\n")
    (dev / "device").write_text("0x107f\n")
    (dev / "numa_node").write_text("1\n")
    out = subprocess.run(
        ["sh", "-c", erdma_identity_command(str(tmp_path))], capture_output=True, text=True
    ).stdout
    assert out == "dev=erdma_0 driver=erdma vendor=0x1ded device=0x107f numa=1 netdev=eth0\n"
    none = subprocess.run(
        ["sh", "-c", erdma_identity_command(str(tmp_path / "x"))], capture_output=True, text=True
    ).stdout
    assert parse_erdma_identity(none).no_devices


def _devinfo(device: str, gids: list[str]) -> str:
    lines = [f"hca_id:\t{device}", "\ttransport:\t\t\teRDMA (0)", "\t\tport:\t1"]
    lines += ["\t\t\tstate:\t\t\tPORT_ACTIVE (4)"]
    lines += [f"\t\t\tGID[{i:3d}]:\t\t{g}" for i, g in enumerate(gids)]
    return "\n".join(lines) + "\n\n"


COMPAT = _devinfo(
    "erdma_0",
    [
        "fe80:0000:0000:0000:0216:3eff:fe18:000b, RoCE v2",
        "2001:db8::11, RoCE v2",
        "::ffff:198.18.0.11, RoCE v2",
    ],
) + _devinfo("erdma_1", ["fe80::216:3eff:fe18:c", "0000:0000:0000:0000:0000:ffff:c612:000b"])


def test_gid_index_is_the_ipv4_one_per_device():
    tables = parse_gid_tables(COMPAT)
    assert tables.choose("erdma_0").index == 2  # shifted by an extra IPv6 address
    assert tables.choose("erdma_1").index == 1  # old rdma-core: full hex, no type
    assert tables.choose("erdma_1").ipv4 == "198.18.0.11"
    assert tables.tables["erdma_0"][0].gid_type == "RoCE v2"
    assert tables.choose("erdma_0", address="198.18.0.12").index is None


def test_iwarp_default_mode_has_one_gid_at_index_0():
    tables = parse_gid_tables(_devinfo("erdma_0", ["0216:3eff:fe18:000b:0000:0000:0000:0000"]))
    choice = tables.choose("erdma_0")
    assert choice.index == 0 and "iWARP" in choice.reason


def test_gid_choice_fails_closed():
    tables = parse_gid_tables(_devinfo("erdma_0", ["fe80::1", "fe80::2"]) + _devinfo("x", []))
    assert tables.choose("erdma_0").index is None
    assert "no IPv4-mapped GID" in tables.choose("erdma_0").reason
    assert "without -v" in tables.choose("x").reason
    assert "not in the" in tables.choose("erdma_9").reason


DRIVER = (
    "module=loaded\nversion=0.2.37\ncompat_mode=Y\n"
    "cc:erdma_0=mpcc \ncc:erdma_1!eadm not installed\n"
    "rate:erdma_0=100 Gb/sec (4X EDR)\nrate:erdma_1=\n"
)


def test_driver_state():
    d = parse_erdma_driver(DRIVER)
    assert (d.loaded, d.version, d.compat_mode) == (True, "0.2.37", True)
    assert d.cc == {"erdma_0": "mpcc", "erdma_1": None}
    assert d.cc_notes == {"erdma_1": "not readable: eadm not installed"}
    assert rate_is_nominal(d.rates["erdma_0"]) and not rate_is_nominal(d.rates["erdma_1"])
    assert not d.problems


def test_driver_state_unreadable_parts():
    d = parse_erdma_driver("module=loaded\nversion=\ncompat_mode=\ncc:erdma_0=usage: eadm\n")
    assert d.version is None and d.compat_mode is None
    assert d.cc == {"erdma_0": None} and "usage: eadm" in d.cc_notes["erdma_0"]
    assert d.problems == ("compat_mode unreadable ('')",)
    assert parse_erdma_driver("").problems[0] == "output does not say whether erdma is loaded"
    assert parse_erdma_driver("module=absent\ncompat_mode=\n").loaded is False


def test_driver_command_guards_eadm():
    cmd = erdma_driver_command(["erdma_0", "rocep26s0"])
    assert "eadm conf -d erdma_0 -t cc" in cmd and "eadm conf -d rocep26s0 -t cc" in cmd
    assert "cc:rocep26s0!eadm not installed" in cmd


@pytest.mark.parametrize(("mtu", "ib"), [(8500, 4096), (1400, 1024), (1500, 1024), (9000, 4096)])
def test_expected_active_mtu(mtu, ib):
    assert expected_active_mtu(mtu) == ib


def test_identity_is_the_driver_or_the_pci_id_never_the_name():
    ids = parse_erdma_identity(
        "dev=rocep26s0 driver=erdma vendor= device= numa=0 netdev=\n"
        "dev=erdma_9 driver=rxe vendor=0x8086 device=0x1593 numa=0 netdev=\n"
    )
    assert [d.name for d in ids.eris()] == ["rocep26s0"]


def test_ambiguous_eadm_output_is_not_read_as_a_setting():
    d = parse_erdma_driver("module=loaded\ncompat_mode=N\ncc:erdma_0=supported: cubic mpcc\n")
    assert d.cc == {"erdma_0": None} and "not readable" in d.cc_notes["erdma_0"]
    assert d.compat_mode is False


def _fake_sysfs(root, devices):
    """A sysfs tree: `devices` (name, driver) under class/infiniband, the erdma module."""
    (root / "module/erdma/parameters").mkdir(parents=True)
    (root / "module/erdma/version").write_text("0.2.37\n")
    (root / "module/erdma/parameters/compat_mode").write_text("Y\n")
    for name, driver in devices:
        dev = root / f"class/infiniband/{name}/device"
        (dev / "net/eth0").mkdir(parents=True)
        (root / f"class/infiniband/{name}/ports/1").mkdir(parents=True)
        (root / f"class/infiniband/{name}/ports/1/rate").write_text("100 Gb/sec (4X EDR)\n")
        (root / f"bus/pci/drivers/{driver}").mkdir(parents=True, exist_ok=True)
        (dev / "driver").symlink_to(root / f"bus/pci/drivers/{driver}")
        (dev / "numa_node").write_text("0\n")


def test_commands_without_root_read_hpcnet_sysfs_else_sys(tmp_path):
    """The facts' builders (no root given) read `$HPCNET_SYSFS` (the lab's emulated tree);
    the driver command then covers every device bound to erdma, whatever its name."""
    import os
    import subprocess

    _fake_sysfs(tmp_path, [("rocep26s0", "erdma"), ("mlx5_0", "mlx5_core")])
    env = {**os.environ, "HPCNET_SYSFS": str(tmp_path)}

    def sh(cmd):
        return subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, env=env).stdout

    ids = parse_erdma_identity(sh(erdma_identity_command(None)))
    assert [d.name for d in ids.eris()] == ["rocep26s0"]
    driver = parse_erdma_driver(sh(erdma_driver_command(None, None)))
    assert (driver.loaded, driver.version, driver.compat_mode) == (True, "0.2.37", True)
    assert set(driver.rates) == {"rocep26s0"} and driver.cc == {"rocep26s0": None}
    assert '"${HPCNET_SYSFS:-/sys}"/class/infiniband' in erdma_identity_command(None)
