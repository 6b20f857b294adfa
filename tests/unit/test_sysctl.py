"""Unit tests of the sysctl reader and expectation comparison."""

from __future__ import annotations

import subprocess

import pytest

from pytest_hpcnet.probes import sysctl
from pytest_hpcnet.probes.sysctl import ExpectedSysctl

EXPECTATIONS = (
    ExpectedSysctl("net.core.rmem_max", "16777216", "min"),
    ExpectedSysctl("net.core.wmem_max", "16777216", "min"),
    ExpectedSysctl("net.ipv4.tcp_rmem", "4096 87380 16777216", "min"),
    ExpectedSysctl("net.ipv4.tcp_wmem", "16777216", "min"),
    ExpectedSysctl("net.ipv4.tcp_congestion_control", "bbr", "equal"),
    ExpectedSysctl("net.ipv4.tcp_nope", "1", "equal"),
)


def test_parse_tabs_and_missing(fixture_text):
    values = sysctl.parse_sysctl(fixture_text("sysctl", "network.txt"))
    assert values.get("net.ipv4.tcp_rmem") == "4096 87380 16777216"
    assert values.get("net/core/rmem_max") == "16777216"
    assert values.get("net.ipv4.tcp_congestion_control") == "cubic"
    assert [k for k, _ in values.missing] == ["net.ipv4.tcp_nope"]
    assert values.problems == ()


def test_parse_crlf_denied_and_noise(fixture_text):
    values = sysctl.parse_sysctl(fixture_text("sysctl", "crlf-denied.txt"))
    assert values.get("net.core.rmem_max") == "33554432"
    assert [k for k, _ in values.missing] == ["net.core.bpf_jit_harden"]
    assert len(values.problems) == 1 and "Applying" in values.problems[0]


def test_compare(fixture_text):
    values = sysctl.parse_sysctl(fixture_text("sysctl", "network.txt"))
    deviations = sysctl.compare_sysctl(values, EXPECTATIONS)
    assert [(d.key, d.found, d.expected, d.mode) for d in deviations] == [
        ("net.core.wmem_max", "4194304", "16777216", "min"),
        ("net.ipv4.tcp_wmem", "4096 65536 6291456", "16777216", "min"),
        ("net.ipv4.tcp_congestion_control", "cubic", "bbr", "equal"),
        ("net.ipv4.tcp_nope", None, "1", "equal"),
    ]
    assert deviations[1].reason == "net.ipv4.tcp_wmem maximum 6291456 is below 16777216"
    assert deviations[3].reason == "net.ipv4.tcp_nope could not be read"


@pytest.mark.parametrize(
    ("found", "expected", "mode", "ok"),
    [
        ("16777216", "16777216", "min", True),
        ("33554432", "16777216", "min", True),
        ("212992", "16777216", "min", False),
        ("4096\t87380\t16777216", "4096 87380 16777216", "min", True),
        ("4096 131072 33554432", "4096 87380 16777216", "min", True),
        ("4096 87380 6291456", "4096 87380 16777216", "min", False),
        ("4096 65536 16777216", "4096 87380 16777216", "min", False),
        ("4096 87380", "4096 87380 16777216", "min", False),
        ("bbr", "16777216", "min", False),
        ("bbr", "bbr", "equal", True),
        ("cubic", "bbr", "equal", False),
        ("4096\t87380\t16777216", "4096 87380 16777216", "equal", True),
        ("1", "1 ", "equal", True),
    ],
)
def test_check_semantics(found, expected, mode, ok):
    dev = sysctl.check_sysctl(found, ExpectedSysctl("k", expected, mode))
    assert (dev is None) is ok
    if dev is not None:
        assert dev.reason


def test_elementwise_reason_names_field():
    dev = sysctl.check_sysctl(
        "4096 65536 16777216", ExpectedSysctl("k", "4096 87380 16777216", "min")
    )
    assert "field 2: 65536 < 87380" in dev.reason


def test_compare_with_plain_mapping():
    devs = sysctl.compare_sysctl({"net.core.rmem_max": "100"}, EXPECTATIONS[:1])
    assert devs[0].found == "100"


def test_command_validation_and_quoting():
    cmd = sysctl.sysctl_command(["net.core.rmem_max", "net.ipv4.tcp_rmem"])
    assert "sysctl net.core.rmem_max net.ipv4.tcp_rmem 2>&1" in cmd
    with pytest.raises(ValueError):
        sysctl.sysctl_command(["net.core.rmem_max; reboot"])
    with pytest.raises(ValueError):
        sysctl.sysctl_command([])


def test_command_runs_here():
    keys = ["net.core.rmem_max", "net.ipv4.tcp_rmem", "net.hpcnet.no_such_key"]
    out = subprocess.run(
        ["sh", "-c", sysctl.sysctl_command(keys)], capture_output=True, text=True, check=False
    ).stdout
    values = sysctl.parse_sysctl(out)
    assert values.get("net.core.rmem_max") is not None
    assert len(values.get("net.ipv4.tcp_rmem").split()) == 3
    assert [k for k, _ in values.missing] == ["net.hpcnet.no_such_key"]


def test_proc_fallback_when_sysctl_missing(tmp_path):
    import shutil

    (tmp_path / "cat").symlink_to(shutil.which("cat"))  # a PATH with cat but no sysctl
    keys = ["net.core.rmem_max", "net.hpcnet.no_such_key"]
    cmd = sysctl.sysctl_command(keys)
    out = subprocess.run(
        ["/bin/sh", "-c", cmd],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(tmp_path)},
    ).stdout
    values = sysctl.parse_sysctl(out)
    assert values.get("net.core.rmem_max") is not None
    assert [k for k, _ in values.missing] == ["net.hpcnet.no_such_key"]


def test_one_of_mode_accepts_any_listed_value():
    from pytest_hpcnet.probes.sysctl import ExpectedSysctl, check_sysctl

    exp = ExpectedSysctl("net.ipv4.tcp_congestion_control", "cubic, bbr", "one_of")
    assert check_sysctl("bbr", exp) is None
    dev = check_sysctl("reno", exp)
    assert dev is not None and dev.reason.endswith("expected one of cubic, bbr")
