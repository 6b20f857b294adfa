"""Unit tests of the sysctl reader (the comparison: tests/unit/test_requirements_host.py)."""

from __future__ import annotations

import subprocess

import pytest

from pytest_hpcnet.probes import sysctl


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
